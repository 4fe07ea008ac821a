// Exports vLLM-shaped request spans to fabricscoped with the real
// OpenTelemetry JS SDK over OTLP/gRPC: one `llm_request` span per request,
// from its arrival to its last token, with the OpenTelemetry GenAI attributes
// vLLM sets (latencies in seconds) and no fabricscope attribute at all.
//
//   node export_requests.js HOST:PORT REQUESTS.jsonl
//
// Each input line: {"tag": "...", "start_unix_nano": N, "queue_s": x,
// "ttft_s": x, "tokens": n, "tpot_ms": x}. Prints one line per request:
// {"tag": ..., "trace_id": ..., "span_id": ...}; exits non-zero when an export
// fails.
'use strict';

const fs = require('fs');
const { BasicTracerProvider, BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { trackedExporter } = require('./tracked_exporter');

const [endpoint, file] = process.argv.slice(2);
if (!endpoint || !file) {
  console.error('usage: node export_requests.js HOST:PORT REQUESTS.jsonl');
  process.exit(2);
}
const hrTime = (ns) => [Number(ns / 1000000000n), Number(ns % 1000000000n)];

const { exporter, stats } = trackedExporter(endpoint);
const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'vllm', 'process.pid': process.pid }),
  spanProcessors: [new BatchSpanProcessor(exporter, { maxExportBatchSize: 256, maxQueueSize: 10000 })],
});
const tracer = provider.getTracer('vllm.tracing', '0.0.0');

const out = [];
for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
  if (!line.trim()) continue;
  const r = JSON.parse(line);
  const start = BigInt(r.start_unix_nano);
  const decodeS = ((r.tokens - 1) * r.tpot_ms) / 1000;
  const e2e = r.ttft_s + decodeS;
  const end = start + BigInt(Math.round(e2e * 1e9));
  const span = tracer.startSpan('llm_request', {
    startTime: hrTime(start),
    attributes: {
      'gen_ai.response.model': 'meta-llama/Llama-3.1-8B-Instruct',
      'gen_ai.request.id': `cmpl-${r.tag}`,
      'gen_ai.request.max_tokens': 1024,
      'gen_ai.usage.prompt_tokens': 412,
      'gen_ai.usage.completion_tokens': r.tokens,
      'gen_ai.latency.time_in_queue': r.queue_s,
      'gen_ai.latency.time_to_first_token': r.ttft_s,
      'gen_ai.latency.e2e': e2e,
      'gen_ai.latency.time_in_model_prefill': r.ttft_s - r.queue_s,
      'gen_ai.latency.time_in_model_decode': decodeS,
      'gen_ai.latency.time_in_model_inference': r.ttft_s - r.queue_s + decodeS,
    },
  });
  span.end(hrTime(end));
  const ctx = span.spanContext();
  out.push(JSON.stringify({ tag: r.tag, trace_id: ctx.traceId, span_id: ctx.spanId }));
}
provider
  .forceFlush()
  .then(() => provider.shutdown())
  .then(() => {
    console.log(out.join('\n'));
    process.exit(stats.failures > 0 ? 1 : 0);
  })
  .catch((e) => {
    console.error('flush failed:', e);
    process.exit(1);
  });
