#include "daemon/correlate/process_scope.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/correlate/window_stats.h"

namespace fabricscope {
namespace {

// "+340", "+0.5": the delta as an operator reads it.
std::string DeltaText(double delta) {
  if (delta >= 1) return absl::StrCat("+", static_cast<int64_t>(std::llround(delta)));
  return absl::StrFormat("+%.2g", delta);
}

}  // namespace

ProcessScopeResult CorrelateProcess(const Store& store, absl::Span<const SeriesSnapshot> all,
                                    const SpanScope& scope, const Span& span, uint32_t host_pid,
                                    const CorrelationOptions& options) {
  ProcessScopeResult out;
  if (host_pid == 0) return out;
  const std::string pid = absl::StrCat(host_pid);
  const std::pair<int64_t, int64_t> window = JudgedWindow(span);
  const int64_t t0 = window.first;
  const int64_t t1 = window.second;
  const int64_t baseline_ns = absl::ToInt64Nanoseconds(options.baseline_window);
  const int64_t gap_ns = absl::ToInt64Nanoseconds(options.max_sample_gap);
  const double floor = options.floors[static_cast<int>(SignalClass::kRetransmits)];
  constexpr CounterSemantics kSums{CounterKind::kCounter64, 64};
  std::string process;  // the process name as the series label it
  for (const SeriesSnapshot& snap : all) {
    if (snap.key == nullptr || snap.signal == nullptr) continue;
    if (snap.key->source != kProcessSeriesSource || snap.signal->Label("pid") != pid) continue;
    if (!scope.Contains(*snap.key)) continue;
    const std::vector<Sample> samples =
        store.ReadRange(snap.id, t0 - baseline_ns - gap_ns, t1 + gap_ns);
    if (samples.empty()) continue;  // an earlier process with this pid
    ++out.series;
    const WindowStats stats =
        ComputeWindowStats(kSums, snap.signal->scale, samples, t0, t1, baseline_ns, gap_ns);
    const double threshold = std::max(floor, options.rate_factor * stats.baseline_rate);
    const double score = stats.rate / threshold;
    if (!(stats.delta > 0 && score >= 1.0)) continue;
    SeriesCorrelation sc = SeriesCorrelationOf(snap, SignalClass::kRetransmits);
    sc.stats = stats;
    sc.score = score;
    sc.anomalous = true;
    if (process.empty()) process = std::string(snap.signal->Label("process"));
    out.anomalous.push_back(std::move(sc));
  }
  if (out.anomalous.empty()) return out;
  std::stable_sort(
      out.anomalous.begin(), out.anomalous.end(),
      [](const SeriesCorrelation& a, const SeriesCorrelation& b) { return a.score > b.score; });
  constexpr size_t kShown = 3;
  std::vector<std::string> parts;
  for (size_t i = 0; i < out.anomalous.size() && i < kShown; ++i) {
    const SeriesCorrelation& s = out.anomalous[i];
    parts.push_back(
        absl::StrCat(s.counter, " ", DeltaText(s.stats.delta), " (", s.device, "/", s.port, ")"));
  }
  out.reason = absl::StrCat("this process's QPs: ", absl::StrJoin(parts, ", "));
  if (out.anomalous.size() > kShown) {
    absl::StrAppend(&out.reason, " and ", out.anomalous.size() - kShown, " more");
  }
  absl::StrAppend(&out.reason, " [pid ", pid, process.empty() ? "" : absl::StrCat(" ", process),
                  "]");
  return out;
}

void ApplyProcessScope(ProcessScopeResult process, SpanCorrelation* out) {
  if (process.anomalous.empty()) return;
  out->reason = absl::StrCat(process.reason, "; ports: ", out->reason);
  out->verdict = Verdict::kFabric;
  std::vector<SeriesCorrelation> series = std::move(process.anomalous);
  series.reserve(series.size() + out->series.size());
  for (SeriesCorrelation& s : out->series) series.push_back(std::move(s));
  out->series = std::move(series);
}

}  // namespace fabricscope
