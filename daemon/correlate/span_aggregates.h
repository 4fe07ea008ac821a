// Span aggregates on /metrics (DESIGN.md section 7): how many spans of each
// name got which verdict, how many of them stalled, how long the stalls were,
// and which congestion signals the stalls were attributed to.
//
//   fabricscope_spans_total{name,verdict}
//   fabricscope_stalls_total{name,verdict}
//   fabricscope_stall_duration_seconds{name,verdict}   (histogram)
//   fabricscope_stall_signals_total{name,signal}       (one per distinct
//                                                       anomalous signal of a
//                                                       stall with verdict fabric)
//
// Cardinality: the `name` label takes at most max_names distinct span names,
// first come first served; every further name is recorded as name="other".
// `signal` is a family-derived signal name (a closed set), `verdict` one of
// fabric/clean/unknown.
//
// Thread-safety: Record() is thread-safe.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "core/metrics.h"
#include "daemon/correlate/correlator.h"

namespace fabricscope {

class SpanAggregates {
 public:
  // `metrics` is borrowed and must outlive this object.
  SpanAggregates(MetricsRegistry* metrics, size_t max_names);

  void Record(const Span& span, const SpanCorrelation& correlation);

  // The `name` label value for a span name (registers it while under the cap).
  std::string NameLabel(const std::string& name);

 private:
  MetricsRegistry* const metrics_;
  const size_t max_names_;
  std::mutex mu_;
  absl::flat_hash_set<std::string> names_;  // guarded by mu_
};

}  // namespace fabricscope
