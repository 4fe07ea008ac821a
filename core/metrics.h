// Metric declarations and the self-metrics registry.
//
// Every Prometheus family the daemon can expose is declared exactly once, next
// to the code that emits it, with DefineMetric():
//
//   const MetricSpec& kPollDuration = DefineMetric({
//       .name = "fabricscope_collector_poll_duration_seconds",
//       .type = MetricType::kHistogram,
//       .help = "Time one collector poll took, by collector.",
//       .labels = {"collector"},
//       .component = "scheduler"});
//
// The declarations form the process-wide catalog; docs/metrics.md is generated
// from it (`fabricscoped --dump-metrics-reference`), and a test fails when the
// checked-in file is stale. Declarations run from static initialisers, which is
// why the core library is linked as a whole archive (CMakeLists.txt).
//
// Self-metrics (counters the daemon increments about itself) live in a
// prometheus-cpp Registry owned by MetricsRegistry. Counter data read from the
// fabric is not pushed into that registry: exporters render it from a store
// snapshot at scrape time (exporters/prometheus_exporter.h).
//
// Thread-safety: DefineMetric may run concurrently with nothing else (static
// init); the catalog is read-only afterwards. MetricsRegistry is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace fabricscope {

enum class MetricType { kCounter, kGauge, kHistogram, kSummary };

struct MetricSpec {
  std::string name;
  MetricType type = MetricType::kGauge;
  std::string help;
  // Label names, in the order they are rendered. Every sample of the family
  // carries all of them ("" where one does not apply).
  std::vector<std::string> labels;
  // Who emits it (a collector name, "scheduler", "store", ...). Documentation only.
  std::string component;
};

// Adds `spec` to the catalog and returns a reference valid for the lifetime of
// the process. A duplicate name is a programming error and aborts.
const MetricSpec& DefineMetric(MetricSpec spec);

// The catalog, sorted by name.
std::vector<const MetricSpec*> MetricCatalog();
const MetricSpec* FindMetric(const std::string& name);

// The metric reference in Markdown (docs/metrics.md).
std::string RenderMetricReference();

absl::string_view MetricTypeName(MetricType type);

// Owns the prometheus-cpp registry for self-metrics. Families are created from
// their MetricSpec so that name and help text exist in one place only.
class MetricsRegistry {
 public:
  MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  prometheus::Family<prometheus::Counter>& Counter(const MetricSpec& spec);
  prometheus::Family<prometheus::Gauge>& Gauge(const MetricSpec& spec);
  prometheus::Family<prometheus::Histogram>& Histogram(const MetricSpec& spec);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace fabricscope
