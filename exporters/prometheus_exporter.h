// The Prometheus /metrics endpoint (exporters/http_server.h: libmicrohttpd).
//
// Two sources are rendered on every scrape:
//  - the self-metrics registry (MetricsRegistry), and
//  - WriteStoreFamilies: the counter families written straight from an
//    immutable snapshot of the store (raw counters as counters, never per-interval
//    gauges), the port inventory (PortInventory), saturation and reset bookkeeping, and the
//    store's own size metrics.
// Nothing is reset on scrape, so any number of scrapers see consistent values.
//
// Thread-safety: the HTTP server's workers serve scrapes on their own threads;
// rendering only reads store snapshots, so a slow or stuck scraper never
// delays a poll.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/metrics.h"
#include "exporters/exposition.h"
#include "exporters/http_server.h"
#include "exporters/metrics_profile.h"
#include "exporters/web_config.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

// Renders the store's families and fabricscope_port_info from `ports` (may
// be null: no inventory, no port_info family) -- what StoreCollectable
// returns on a scrape -- as of the wall clock.
std::vector<prometheus::MetricFamily> RenderStoreFamilies(const Store& store,
                                                          const PortInventory* ports);
// The same as of `now_ns` (unix nanoseconds): the time that decides whether a
// peak is stale and the age of the oldest sample (store retention). Tests pass
// a fixed time to render a store with fixed timestamps deterministically.
std::vector<prometheus::MetricFamily> RenderStoreFamilies(const Store& store,
                                                          const PortInventory* ports,
                                                          int64_t now_ns);

// Writes the families RenderStoreFamilies(store, ports, now_ns) returns, with
// `profile` applied (ApplyMetricsProfile), through `writer`: the bytes of
// writer->WriteFamilies() of those families, without building them (labels
// are written straight from the snapshot's keys and signals, no ClientMetric
// or label strings per sample). What /metrics runs on every scrape. Reads
// only a store snapshot: any number may run at once, beside the pollers.
void WriteStoreFamilies(const Store& store, const PortInventory* ports, int64_t now_ns,
                        MetricsProfile profile, ExpositionWriter* writer);

class StoreCollectable final : public prometheus::Collectable {
 public:
  // `store` and `ports` (may be null) outlive the collectable.
  StoreCollectable(const Store* store, const PortInventory* ports) : store_(store), ports_(ports) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return RenderStoreFamilies(*store_, ports_);
  }

 private:
  const Store* store_;
  const PortInventory* ports_;
};

// Health for the probes served next to /metrics: GET /healthz answers 200
// "ok" while `live`, else 503 with `detail`; GET /readyz the same for
// `ready`. Plain text.
struct HealthStatus {
  bool live = true;
  bool ready = true;
  std::string detail;
};
using HealthFn = std::function<HealthStatus()>;

// The exemplars of a scrape (exporters/exposition.h), e.g. the span
// aggregates' (daemon/correlate/span_aggregates.h).
using ExemplarFn = std::function<std::vector<SeriesExemplar>()>;

// Serves /metrics, /healthz and /readyz (exporters/http_server.h).
//
// Access control for /metrics comes from the exporter-toolkit web config file
// (exporters/web_config.h): HTTPS with optional client certificates, bcrypt
// basic auth and extra response headers; ReloadWebConfig re-reads it (SIGHUP)
// and keeps the running settings when the new file is bad. The probes answer
// without credentials (but over TLS when TLS is on, and with the headers).
// The deprecated --metrics-auth-file ("user:password" lines, plain
// passwords) still works for one release and cannot be combined with the
// file.
//
// Thread-safety: requests are served concurrently on the server's threads;
// ReloadWebConfig and the destructor run on one other thread (the daemon's
// main thread), never concurrently with each other.
class PrometheusExporter {
 public:
  // Binds `listen` (HOST:PORT; port 0 picks a free port) and starts serving.
  // `health` (may be empty: always healthy) answers /healthz and /readyz.
  static absl::StatusOr<std::unique_ptr<PrometheusExporter>> Start(const std::string& listen,
                                                                   MetricsRegistry* metrics,
                                                                   const Store* store,
                                                                   const PortInventory* ports,
                                                                   HealthFn health = {});
  struct Security {
    // Deprecated: "user:password" lines ('#' comments): basic auth on /metrics.
    std::string auth_file;
    // The exporter-toolkit web config file; empty: plain HTTP, no auth.
    std::string web_config_file;
  };
  // `profile` selects what /metrics exports (exporters/metrics_profile.h);
  // it filters the self-metrics and the store's families alike.
  static absl::StatusOr<std::unique_ptr<PrometheusExporter>> Start(
      const std::string& listen, const Security& security, MetricsRegistry* metrics,
      const Store* store, const PortInventory* ports, HealthFn health,
      MetricsProfile profile = MetricsProfile::kFull);
  ~PrometheusExporter();

  // Re-reads the web config file (no-op without one). An error (counted in
  // fabricscope_web_config_reloads_total{result="failure"}) keeps the running
  // settings. A change of the TLS settings or files starts a new server on the
  // same listening socket; connections in flight on the old one are closed.
  absl::Status ReloadWebConfig();

  // The bound address with the real port, e.g. "127.0.0.1:40123".
  const std::string& address() const { return server_->address(); }
  // "https" while TLS is on, else "http".
  std::string scheme() const { return tls_.has_value() ? "https" : "http"; }

  // Where /metrics takes its exemplars from (written in OpenMetrics
  // responses only); may be set while serving. `fn` is called on the server's
  // threads until the exporter is destroyed or the source replaced.
  void SetExemplarSource(ExemplarFn fn);

 private:
  // What a request needs from the web config: swapped whole on a reload.
  struct Access {
    std::unique_ptr<BasicAuthenticator> bcrypt_users;              // null: none
    std::vector<std::pair<std::string, std::string>> plain_users;  // deprecated file
    std::vector<std::pair<std::string, std::string>> headers;
    bool open() const { return bcrypt_users == nullptr && plain_users.empty(); }
  };
  PrometheusExporter() = default;
  // Every request: the probes, /metrics (after the access check), else 404;
  // the configured headers are added to every answer.
  HttpResponse Serve(const HttpRequest& req) const;
  HttpResponse Route(const HttpRequest& req, const Access& access) const;
  // GET /metrics: the self-metrics and the store's families, in the format
  // and encoding the request's Accept and Accept-Encoding negotiate
  // (exporters/exposition.h: RenderScrape).
  HttpResponse ServeMetrics(const HttpRequest& req) const;
  // Whether `req` carries credentials that `access` accepts.
  static bool Authorized(const HttpRequest& req, const Access& access);
  std::shared_ptr<const Access> CurrentAccess() const;

  MetricsRegistry* metrics_ = nullptr;
  const Store* store_ = nullptr;          // rendered with WriteStoreFamilies
  const PortInventory* ports_ = nullptr;  // may be null
  MetricsProfile profile_ = MetricsProfile::kFull;
  std::shared_ptr<prometheus::Collectable> metrics_collectable_;
  HealthFn health_;
  std::string web_config_file_;
  mutable std::mutex access_mu_;
  std::shared_ptr<const Access> access_;  // guarded by access_mu_; never null
  std::optional<TlsOptions> tls_;         // what server_ runs with
  mutable std::mutex exemplars_mu_;
  std::shared_ptr<const ExemplarFn> exemplars_;  // guarded by exemplars_mu_; may be null
  std::unique_ptr<HttpServer> server_;           // last: stopped before the rest goes
};

}  // namespace fabricscope
