// Exports spans to fabricscoped with the real OpenTelemetry JS SDK over
// OTLP/gRPC, the way an instrumented inference server would.
//
//   node export_spans.js HOST:PORT VALID_SPANS
//
// Sends VALID_SPANS good spans (decode/prefill/kv_transfer names, RDMA scope
// hints, batches of 512 through the BatchSpanProcessor) plus a few invalid
// ones the daemon must reject: 2 too_old (ended 2 h ago), 2 in_future
// (ending in 10 min), 1 missing_name. Prints a JSON summary; exits non-zero
// when the SDK reports an export failure.
'use strict';

const { trace, diag, DiagLogLevel } = require('@opentelemetry/api');
const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { trackedExporter } = require('./tracked_exporter');

const [endpoint, validArg] = process.argv.slice(2);
if (!endpoint || !validArg) {
  console.error('usage: node export_spans.js HOST:PORT VALID_SPANS');
  process.exit(2);
}
const valid = parseInt(validArg, 10);

// Surface SDK warnings/errors (partial success is logged as a warning).
const diagMessages = [];
diag.setLogger(
  {
    error: (...a) => { diagMessages.push(['error', a.join(' ')]); console.error('otel error:', ...a); },
    warn: (...a) => { diagMessages.push(['warn', a.join(' ')]); console.error('otel warn:', ...a); },
    info: () => {}, debug: () => {}, verbose: () => {},
  },
  DiagLogLevel.WARN,
);

const { exporter, stats } = trackedExporter(endpoint);

const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({
    'service.name': 'e2e-inference',
    'host.name': 'e2e-host',
    'process.pid': process.pid,
  }),
  spanProcessors: [
    new BatchSpanProcessor(exporter, {
      maxExportBatchSize: 512,
      maxQueueSize: 100000,
      scheduledDelayMillis: 50,
    }),
  ],
});
const tracer = provider.getTracer('fabricscope-e2e', '1.0.0');

const names = ['decode', 'prefill', 'kv_transfer'];
const now = Date.now();
for (let i = 0; i < valid; i++) {
  const start = new Date(now - 5000 + (i % 4000));
  const end = new Date(start.getTime() + 2);
  const span = tracer.startSpan(names[i % names.length], {
    startTime: start,
    attributes: {
      'rdma.device': 'mlx5_0',
      'rdma.port': 1,
      'network.interface.name': 'eth2',
      'gen_ai.request.model': 'e2e-model',
      'decode.step': i,
      'fabricscope.stall': i % 100 === 0,
    },
  });
  span.end(end);
}
// Invalid spans.
const twoHoursAgo = now - 2 * 3600 * 1000;
for (let i = 0; i < 2; i++) {
  tracer.startSpan('decode', { startTime: new Date(twoHoursAgo) }).end(new Date(twoHoursAgo + 5));
}
const inTenMinutes = now + 10 * 60 * 1000;
for (let i = 0; i < 2; i++) {
  tracer.startSpan('decode', { startTime: new Date(inTenMinutes) }).end(new Date(inTenMinutes + 5));
}
tracer.startSpan('', { startTime: new Date(now - 10) }).end(new Date(now - 5));

provider
  .forceFlush()
  .then(() => provider.shutdown())
  .then(() => {
    console.log(JSON.stringify({ valid, invalid: 5, exportedBatches: stats.batches, exportFailures: stats.failures,
                                 warnings: diagMessages.length }));
    process.exit(stats.failures === 0 ? 0 : 1);
  })
  .catch((e) => {
    console.error('flush failed:', e);
    process.exit(1);
  });
