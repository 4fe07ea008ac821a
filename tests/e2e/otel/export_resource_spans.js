// Exports spans with the resource attributes each names, with the real
// OpenTelemetry JS SDK over OTLP/gRPC: one TracerProvider per distinct
// resource, as separate processes (or pods) would send them.
//
//   node export_resource_spans.js HOST:PORT SPANS.jsonl
//
// Each line: {"tag": T, "name": N, "start_unix_nano": "...", "end_unix_nano":
// "...", "resource": {"k8s.namespace.name": ..., "process.pid": 4242, ...}}.
// Prints one {"tag", "trace_id", "span_id"} line per span; exits non-zero when
// an export fails.
'use strict';

const fs = require('fs');
const { BasicTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { trackedExporter } = require('./tracked_exporter');

const [endpoint, file] = process.argv.slice(2);
if (!endpoint || !file) {
  console.error('usage: node export_resource_spans.js HOST:PORT SPANS.jsonl');
  process.exit(2);
}
const hrTime = (ns) => {
  const n = BigInt(ns);
  return [Number(n / 1000000000n), Number(n % 1000000000n)];
};

const providers = new Map(); // resource JSON -> { provider, stats }
const out = [];
for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
  if (!line.trim()) continue;
  const s = JSON.parse(line);
  const key = JSON.stringify(s.resource);
  if (!providers.has(key)) {
    const { exporter, stats } = trackedExporter(endpoint);
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes(s.resource),
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    providers.set(key, { provider, stats });
  }
  const { provider } = providers.get(key);
  const span = provider.getTracer('fabricscope-e2e', '1.0.0').startSpan(s.name, {
    startTime: hrTime(s.start_unix_nano),
  });
  span.end(hrTime(s.end_unix_nano));
  const ctx = span.spanContext();
  out.push({ tag: s.tag, trace_id: ctx.traceId, span_id: ctx.spanId });
}
Promise.all([...providers.values()].map(({ provider }) => provider.forceFlush().then(() => provider.shutdown())))
  .then(() => {
    for (const o of out) console.log(JSON.stringify(o));
    const failures = [...providers.values()].reduce((n, p) => n + p.stats.failures, 0);
    process.exit(failures > 0 ? 1 : 0);
  })
  .catch((e) => {
    console.error('flush failed:', e);
    process.exit(1);
  });
