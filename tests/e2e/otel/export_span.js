// Exports one span to fabricscoped with the real OpenTelemetry JS SDK over
// OTLP/gRPC, with the start and end times given (what an instrumented
// inference server does for a step it timed), and prints its ids.
//
//   node export_span.js HOST:PORT NAME START_UNIX_NANO END_UNIX_NANO
//
// Prints {"trace_id": ..., "span_id": ...} (the SDK's random ids); exits
// non-zero when the export fails.
'use strict';

const { BasicTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { trackedExporter } = require('./tracked_exporter');

const [endpoint, name, startArg, endArg] = process.argv.slice(2);
if (!endpoint || !name || !startArg || !endArg) {
  console.error('usage: node export_span.js HOST:PORT NAME START_UNIX_NANO END_UNIX_NANO');
  process.exit(2);
}
// HrTime [seconds, nanoseconds]: a unix time in ns does not fit a double exactly.
const hrTime = (ns) => {
  const n = BigInt(ns);
  return [Number(n / 1000000000n), Number(n % 1000000000n)];
};

const { exporter, stats } = trackedExporter(endpoint);
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'e2e-inference', 'process.pid': process.pid }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
const span = provider.getTracer('fabricscope-e2e', '1.0.0').startSpan(name, { startTime: hrTime(startArg) });
span.end(hrTime(endArg));
const ctx = span.spanContext();
provider
  .forceFlush()
  .then(() => provider.shutdown())
  .then(() => {
    console.log(JSON.stringify({ trace_id: ctx.traceId, span_id: ctx.spanId }));
    process.exit(stats.failures > 0 ? 1 : 0);
  })
  .catch((e) => {
    console.error('flush failed:', e);
    process.exit(1);
  });
