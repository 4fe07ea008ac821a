// The OTLP/gRPC exporter the e2e scripts send with: the stock SDK exporter,
// its export wrapped to count batches and failed exports (a failure is also
// printed), so a script can exit non-zero when the daemon refused a batch.
'use strict';

const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-grpc');

function trackedExporter(endpoint) {
  const exporter = new OTLPTraceExporter({ url: `http://${endpoint}`, timeoutMillis: 10000 });
  const stats = { batches: 0, failures: 0 };
  const realExport = exporter.export.bind(exporter);
  exporter.export = (spans, done) => {
    realExport(spans, (result) => {
      stats.batches++;
      if (result.code !== 0) {
        stats.failures++;
        console.error('export failed:', result.error && result.error.message);
      }
      done(result);
    });
  };
  return { exporter, stats };
}

module.exports = { trackedExporter };
