// Span aggregates on /metrics (DESIGN.md section 7): how many spans of each
// name got which verdict, how many of them stalled, how long the stalls were,
// and which congestion signals the stalls were attributed to.
//
//   fabricscope_spans_total{name,verdict,service,model}
//   fabricscope_stalls_total{name,verdict,service,model}  (zero from the
//                                                       first span of the
//                                                       name and workload)
//   fabricscope_stall_duration_seconds{name,verdict,service,model} (histogram)
//   fabricscope_stall_signals_total{name,signal,service,model} (one per distinct
//                                                       anomalous signal of a
//                                                       stall with verdict fabric)
//
// Cardinality: the `name` label takes at most max_names distinct span names,
// first come first served; every further name is recorded as name="other";
// `service` and `model` (service.name and the GenAI model of the span, ""
// when absent) at most kMaxWorkloads distinct pairs, then "other".
// `signal` is a family-derived signal name (a closed set), `verdict` one of
// fabric/clean/unknown.
//
// Exemplars (OpenMetrics only, exporters/exposition.h): each series of
// fabricscope_stalls_total, fabricscope_stall_duration_seconds,
// fabricscope_stall_signals_total and fabricscope_spans_total{verdict="fabric"}
// keeps the trace_id/span_id of one span: the longest of the spans recorded
// for it that ended within kExemplarWindow of the most recent one (so a
// scrape every kExemplarWindow or faster sees the longest stall of its
// interval, at one comparison per span), with the span's duration in seconds
// as the exemplar value and its end as the timestamp. One exemplar per series,
// so they are bounded like the series (max_names x verdicts/signals).
//
// Thread-safety: Record(), NameLabel() and Exemplars() are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "core/metrics.h"
#include "daemon/correlate/correlator.h"
#include "exporters/exposition.h"

namespace fabricscope {

class SpanAggregates {
 public:
  // `metrics` is borrowed and must outlive this object.
  SpanAggregates(MetricsRegistry* metrics, size_t max_names);

  void Record(const Span& span, const SpanCorrelation& correlation);

  // The `name` label value for a span name (registers it while under the cap).
  std::string NameLabel(const std::string& name);
  // The `service` and `model` label values of a span (service.name and the
  // gen_ai model, "" when absent; at most kMaxWorkloads distinct pairs, then
  // "other").
  std::pair<std::string, std::string> WorkloadLabels(const Span& span);
  static constexpr size_t kMaxWorkloads = 16;

  static constexpr absl::Duration kExemplarWindow = absl::Seconds(15);
  // The current exemplar of every series that has one (a copy).
  std::vector<SeriesExemplar> Exemplars() const;

 private:
  // Offers `span` as the exemplar of one series (see the file comment).
  void OfferExemplar(const std::string& family, std::vector<prometheus::ClientMetric::Label> labels,
                     const Span& span);

  MetricsRegistry* const metrics_;
  const size_t max_names_;
  mutable std::mutex mu_;
  absl::flat_hash_set<std::string> names_;                              // guarded by mu_
  absl::flat_hash_set<std::pair<std::string, std::string>> workloads_;  // guarded by mu_
  // Family, then label values -> the series' exemplar. Guarded by mu_.
  absl::flat_hash_map<std::string, SeriesExemplar> exemplars_;
};

}  // namespace fabricscope
