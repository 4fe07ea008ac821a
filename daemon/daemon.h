// The daemon: owns every component and wires them together.
//
//   collectors --(Poll via Scheduler tier threads)--> Store
//   Store --(snapshots)--> PrometheusExporter (civetweb threads)
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
#include "daemon/clock.h"
#include "daemon/config.h"
#include "daemon/metrics.h"
#include "daemon/scheduler.h"
#include "daemon/store/store.h"
#include "exporters/prometheus_exporter.h"

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

 private:
  void Reload();

  CommandLine command_line_;
  Config config_;
  Clock* clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<Store> store_;
  CollectorRegistry registry_;
  std::vector<std::unique_ptr<Collector>> collectors_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<PrometheusExporter> exporter_;
};

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (and so in every
// thread it starts afterwards); Run() waits for them with sigwait. Call first
// thing in main.
void BlockDaemonSignals();

}  // namespace fabricscope
