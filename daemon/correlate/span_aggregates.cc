#include "daemon/correlate/span_aggregates.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace fabricscope {
namespace {

const MetricSpec& kSpans = DefineMetric(
    {.name = "fabricscope_spans_total",
     .type = MetricType::kCounter,
     .help = "Correlated spans by span name and verdict (fabric, clean, unknown). Names beyond "
             "--max-span-names are counted as name=\"other\".",
     .labels = {"name", "verdict", "service", "model"},
     .component = "correlate"});
const MetricSpec& kStalls = DefineMetric(
    {.name = "fabricscope_stalls_total",
     .type = MetricType::kCounter,
     .help = "Stalled spans (fabricscope.stall=true, over the --stall-thresholds duration of "
             "their name, or over their key's learned bound) by span name, verdict, service and "
             "model. Present (zero) for every name, service and model that has had a span.",
     .labels = {"name", "verdict", "service", "model"},
     .component = "correlate"});
const MetricSpec& kStallDuration =
    DefineMetric({.name = "fabricscope_stall_duration_seconds",
                  .type = MetricType::kHistogram,
                  .help = "Duration of stalled spans by span name, verdict, service and model.",
                  .labels = {"name", "verdict", "service", "model"},
                  .component = "correlate"});
const MetricSpec& kStallSignals = DefineMetric(
    {.name = "fabricscope_stall_signals_total",
     .type = MetricType::kCounter,
     .help = "Stalls with verdict fabric attributed to each anomalous congestion signal (a stall "
             "counts once per distinct signal).",
     .labels = {"name", "signal", "service", "model"},
     .component = "correlate"});

const prometheus::Histogram::BucketBoundaries& StallBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  return *b;
}

}  // namespace

SpanAggregates::SpanAggregates(MetricsRegistry* metrics, size_t max_names)
    : metrics_(metrics), max_names_(max_names) {
  // Declare the families so they appear (empty) before the first span.
  metrics_->Counter(kSpans);
  metrics_->Counter(kStalls);
  metrics_->Histogram(kStallDuration);
  metrics_->Counter(kStallSignals);
}

std::string SpanAggregates::NameLabel(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (names_.contains(name)) return name;
  if (names_.size() < max_names_) {
    names_.insert(name);
    return name;
  }
  return "other";
}

std::pair<std::string, std::string> SpanAggregates::WorkloadLabels(const Span& span) {
  absl::string_view service, model, request_model;
  for (const auto& [k, v] : span.attributes) {
    if (k == "service.name") {
      service = v;
    } else if (k == "gen_ai.response.model") {
      model = v;
    } else if (k == "gen_ai.request.model") {
      request_model = v;
    }
  }
  if (model.empty()) model = request_model;
  std::pair<std::string, std::string> pair(service.substr(0, 128), model.substr(0, 128));
  std::lock_guard<std::mutex> lock(mu_);
  if (workloads_.contains(pair)) return pair;
  if (workloads_.size() < kMaxWorkloads) {
    workloads_.insert(pair);
    return pair;
  }
  return {"other", "other"};
}

std::vector<SeriesExemplar> SpanAggregates::Exemplars() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SeriesExemplar> out;
  out.reserve(exemplars_.size());
  for (const auto& [key, e] : exemplars_) out.push_back(e);
  return out;
}

void SpanAggregates::OfferExemplar(const std::string& family,
                                   std::vector<prometheus::ClientMetric::Label> labels,
                                   const Span& span) {
  Exemplar e;
  e.value =
      static_cast<double>(std::max<int64_t>(0, span.end_unix_nano - span.start_unix_nano)) * 1e-9;
  e.timestamp_ns = span.end_unix_nano;
  std::string key = family;
  for (const auto& l : labels) absl::StrAppend(&key, "\xff", l.value);
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = exemplars_.try_emplace(std::move(key));
  SeriesExemplar& cur = it->second;
  if (!inserted) {
    const bool newer_window =
        span.end_unix_nano - cur.exemplar.timestamp_ns > absl::ToInt64Nanoseconds(kExemplarWindow);
    if (!newer_window && e.value < cur.exemplar.value) return;
  }
  e.trace_id = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(span.trace_id.data()), span.trace_id.size()));
  e.span_id = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(span.span_id.data()), span.span_id.size()));
  cur.family = family;
  cur.labels = std::move(labels);
  cur.exemplar = std::move(e);
}

void SpanAggregates::Record(const Span& span, const SpanCorrelation& c) {
  const std::string name = NameLabel(span.name);
  const auto [service, model] = WorkloadLabels(span);
  const std::string verdict(VerdictName(c.verdict));
  const std::vector<prometheus::ClientMetric::Label> labels = {
      {"name", name}, {"verdict", verdict}, {"service", service}, {"model", model}};
  auto label_map = [&labels]() {
    std::map<std::string, std::string> m;
    for (const auto& l : labels) m[l.name] = l.value;
    return m;
  };
  metrics_->Counter(kSpans).Add(label_map()).Increment();
  // Every stall series of this name and workload exists, zero until its first stall.
  for (Verdict v : {Verdict::kFabric, Verdict::kClean, Verdict::kUnknown}) {
    metrics_->Counter(kStalls).Add({{"name", name},
                                    {"verdict", std::string(VerdictName(v))},
                                    {"service", service},
                                    {"model", model}});
  }
  const bool traced =
      std::any_of(span.trace_id.begin(), span.trace_id.end(), [](uint8_t b) { return b != 0; });
  if (traced && c.verdict == Verdict::kFabric) OfferExemplar(kSpans.name, labels, span);
  if (!c.stall) return;
  metrics_->Counter(kStalls).Add(label_map()).Increment();
  if (traced) {
    OfferExemplar(kStalls.name, labels, span);
    OfferExemplar(kStallDuration.name, labels, span);
  }
  const double seconds =
      static_cast<double>(std::max<int64_t>(0, span.end_unix_nano - span.start_unix_nano)) * 1e-9;
  metrics_->Histogram(kStallDuration).Add(label_map(), StallBuckets()).Observe(seconds);
  std::set<std::string> signals;
  for (const SeriesCorrelation& s : c.Anomalous()) signals.insert(std::string(s.signal));
  for (const std::string& signal : signals) {
    const std::vector<prometheus::ClientMetric::Label> signal_labels = {
        {"name", name}, {"signal", signal}, {"service", service}, {"model", model}};
    metrics_->Counter(kStallSignals)
        .Add({{"name", name}, {"signal", signal}, {"service", service}, {"model", model}})
        .Increment();
    if (traced) OfferExemplar(kStallSignals.name, signal_labels, span);
  }
}

}  // namespace fabricscope
