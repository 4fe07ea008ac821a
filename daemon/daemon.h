// The daemon: owns every component and wires them together.
//
//   collectors --(Poll via Scheduler tier threads)--> Store
//   Store --(snapshots)--> PrometheusExporter (HTTP server threads)
//   gRPC clients --(Ingest, OTLP Export on GrpcServer threads)--> SpanIngester
//     --> SpanStore (bounded ring, --span-memory) --> correlator / Query service
//   Store --(every append, on the tier thread)--> DetectorEngine --> EventLog,
//     detector gauges and counters on /metrics, Query.Events
//   SpanStore --(tailed by CorrelationWorker, once each span's window was
//     polled)--> Correlator(Store) --> span aggregates on /metrics
//   EventLog --(every episode opened/closed)--> IncidentWriter (--incident-dir:
//     a recording of the episode's port from Store and SpanStore, on its own
//     thread once the episode's window has closed)
//
// Run() blocks the calling thread in a signal loop: SIGTERM/SIGINT stop the
// daemon (bounded: the scheduler stops within one collector poll, the HTTP
// server within its request timeout) and Run returns 0; SIGHUP reloads the
// config file (an invalid file keeps the old config, is logged and counted in
// fabricscope_config_reloads_total{result="failure"}).
//
// Ownership: Daemon owns the store, metrics registry, collectors, scheduler
// and exporter; they are destroyed in reverse order of creation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "collectors/registry.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/config.h"
#include "daemon/correlate/correlation_worker.h"
#include "daemon/correlate/correlator.h"
#include "daemon/correlate/span_aggregates.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/detect/detectors.h"
#include "daemon/detect/event_log.h"
#include "daemon/ingest/nccl_inspector.h"
#include "daemon/ingest/span_ingester.h"
#include "daemon/kubernetes/kubernetes_source.h"
#include "daemon/query/query_engine.h"
#include "daemon/recording/incident_writer.h"
#include "daemon/recording/replay.h"
#include "daemon/scheduler.h"
#include "daemon/service/grpc_server.h"
#include "daemon/service/ingest_service.h"
#include "daemon/service/otlp_trace_service.h"
#include "daemon/service/query_service.h"
#include "daemon/spans/span_store.h"
#include "exporters/prometheus_exporter.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

class Daemon {
 public:
  Daemon(CommandLine command_line, Clock* clock);
  ~Daemon();

  // Creates the collectors and binds the listeners. Errors here are startup
  // errors (exit non-zero).
  absl::Status Init();
  // Starts polling and serving; blocks until SIGTERM/SIGINT. Returns the exit code.
  int Run();

  const std::string& metrics_address() const { return exporter_->address(); }
  // The bound gRPC address (real port when --grpc-listen used port 0).
  const std::string& grpc_address() const { return grpc_server_->address(); }
  SpanStore* span_store() { return span_store_.get(); }

  // After switching user: names (logged as errors) every configured path the
  // daemon uses later that its user cannot read (or, --incident-dir, write);
  // fails when --state-dir cannot be written (the errors name the path and
  // the user). --state-dir: creates the directory (0700) when it does not exist
  // and removes an interrupted snapshot's temporary file.
  absl::Status CheckPaths() const;

 private:
  void Reload();
  // Logs one warning when --sysfs-root lacks class/infiniband or class/net.
  void WarnAboutSysfsRoot() const;
  // --state-dir: restores DIR/snapshot into the empty stores (Init), and
  // writes it after the writers stopped (Run, on SIGTERM).
  void RestoreState();
  void SaveState();

  CommandLine command_line_;
  Config config_;
  CollectorOptions collector_options_;  // from config_ at Start; outlives the collectors
  Clock* clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<Store> store_;
  // The RDMA port inventory: written by rdma_sysfs (or replay), read by the
  // other collectors, detectors, correlator, query engine and exporter.
  PortInventory ports_;
  // Detectors: the store's append observer; they outlive every writer.
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<DetectorEngine> detectors_;
  CollectorRegistry registry_;
  std::vector<std::unique_ptr<Collector>> collectors_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<PrometheusExporter> exporter_;
  // Span ingest. Declared after what they use and before grpc_server_, so the
  // server (declared last) is destroyed first.
  std::unique_ptr<SpanStore> span_store_;
  // Judges every span before it is stored (ingest and replay); its sketches
  // are in the state snapshot.
  std::unique_ptr<StallLearner> stall_learner_;
  // --incident-dir: the event log's observer; reads the store and span store.
  std::unique_ptr<IncidentWriter> incident_writer_;
  std::unique_ptr<SpanIngester> ingester_;
  std::unique_ptr<NcclInspectorTailer> nccl_inspector_;  // --nccl-inspector-dir
  std::unique_ptr<KubernetesSource> kubernetes_;         // --kubernetes-socket
  std::unique_ptr<IngestService> ingest_service_;
  std::unique_ptr<OtlpTraceService> otlp_service_;
  // Other gRPC services (the Query service) go here, before grpc_server_.
  // Correlation: the correlator (on demand, for Query.Correlate) and the
  // worker that correlates every span once for the span aggregates.
  std::unique_ptr<Correlator> correlator_;
  std::unique_ptr<SpanAggregates> span_aggregates_;
  std::unique_ptr<CorrelationWorker> correlation_worker_;
  // Query: the engine (selection and bounds) and its gRPC adapter.
  std::unique_ptr<QueryEngine> query_engine_;
  std::unique_ptr<QueryService> query_service_;
  // --replay: feeds a recording instead of the collectors.
  std::unique_ptr<ReplayWorker> replay_;
  std::unique_ptr<GrpcServer> grpc_server_;
};

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (and so in every
// thread it starts afterwards); Run() waits for them with sigwait. Call first
// thing in main.
void BlockDaemonSignals();

}  // namespace fabricscope
