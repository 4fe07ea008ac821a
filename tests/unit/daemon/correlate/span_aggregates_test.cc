// The span aggregates' exemplars (daemon/correlate/span_aggregates.h): which
// span each series shows, and that the exposition writes them.
#include "daemon/correlate/span_aggregates.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "exporters/exposition.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace span_aggregates_test {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT0 = 1'700'000'000 * kSec;

Span MakeSpan(uint8_t id, int64_t end_ns, double seconds) {
  Span s;
  s.name = "decode";
  s.trace_id.fill(0);
  s.trace_id[15] = id;
  s.span_id.fill(0);
  s.span_id[7] = id;
  s.end_unix_nano = end_ns;
  s.start_unix_nano = end_ns - static_cast<int64_t>(seconds * 1e9);
  return s;
}

// `s` kept for the test's lifetime: a SeriesCorrelation views its names
// (in the daemon, the store's own strings).
absl::string_view Kept(const std::string& s) {
  static auto* kept = new std::set<std::string>;
  return *kept->insert(s).first;
}

SpanCorrelation Stall(Verdict verdict, std::vector<std::string> anomalous_signals) {
  SpanCorrelation c;
  c.stall = true;
  c.verdict = verdict;
  for (auto& sig : anomalous_signals) {
    SeriesCorrelation s;
    s.signal = Kept(sig);
    s.anomalous = true;
    c.series.push_back(s);
  }
  return c;
}

// The exemplar of `family` with these label values (any order), or null.
const SeriesExemplar* Find(const std::vector<SeriesExemplar>& all, const std::string& family,
                           const std::string& l1, const std::string& l2) {
  for (const auto& e : all) {
    // name and verdict (or signal), then the workload's service and model.
    if (e.family != family || e.labels.size() != 4) continue;
    if (e.labels[0].value == l1 && e.labels[1].value == l2) return &e;
  }
  return nullptr;
}

TEST(SpanAggregatesExemplarTest, LongestWithinTheWindowThenTheNextWindow) {
  MetricsRegistry metrics;
  SpanAggregates agg(&metrics, 10);
  EXPECT_TRUE(agg.Exemplars().empty());
  agg.Record(MakeSpan(1, kT0, 0.2), Stall(Verdict::kFabric, {"pfc_pause_seconds"}));
  agg.Record(MakeSpan(2, kT0 + 1 * kSec, 0.5), Stall(Verdict::kFabric, {"pfc_pause_seconds"}));
  agg.Record(MakeSpan(3, kT0 + 2 * kSec, 0.3), Stall(Verdict::kFabric, {"pfc_pause_seconds"}));
  std::vector<SeriesExemplar> ex = agg.Exemplars();
  const SeriesExemplar* stalls = Find(ex, "fabricscope_stalls_total", "decode", "fabric");
  ASSERT_NE(stalls, nullptr);
  EXPECT_EQ(stalls->exemplar.trace_id, "00000000000000000000000000000002");  // the longest
  EXPECT_EQ(stalls->exemplar.span_id, "0000000000000002");
  EXPECT_DOUBLE_EQ(stalls->exemplar.value, 0.5);
  EXPECT_EQ(stalls->exemplar.timestamp_ns, kT0 + 1 * kSec);
  ASSERT_NE(Find(ex, "fabricscope_stall_duration_seconds", "decode", "fabric"), nullptr);
  ASSERT_NE(Find(ex, "fabricscope_stall_signals_total", "decode", "pfc_pause_seconds"), nullptr);
  ASSERT_NE(Find(ex, "fabricscope_spans_total", "decode", "fabric"), nullptr);
  EXPECT_EQ(ex.size(), 4u);

  // A shorter span after the window replaces it.
  const int64_t later =
      kT0 + 1 * kSec + absl::ToInt64Nanoseconds(SpanAggregates::kExemplarWindow) + kSec;
  agg.Record(MakeSpan(4, later, 0.01), Stall(Verdict::kFabric, {"pfc_pause_seconds"}));
  ex = agg.Exemplars();
  EXPECT_EQ(Find(ex, "fabricscope_stalls_total", "decode", "fabric")->exemplar.trace_id,
            "00000000000000000000000000000004");
}

// The stall families are there (zero) from a name's first span, and the
// workload labels come from service.name and the GenAI model, bounded.
TEST(SpanAggregatesTest, StallSeriesFromTheFirstSpanAndWorkloadLabels) {
  MetricsRegistry metrics;
  SpanAggregates agg(&metrics, 10);
  SpanCorrelation clean;
  clean.verdict = Verdict::kClean;
  Span s = MakeSpan(1, kT0, 0.1);
  s.attributes = {{"service.name", "vllm"}, {"gen_ai.response.model", "llama"}};
  agg.Record(s, clean);
  int zero_stall_series = 0;
  for (const auto& f : metrics.registry()->Collect()) {
    if (f.name != "fabricscope_stalls_total") continue;
    for (const auto& m : f.metric) {
      std::map<std::string, std::string> l;
      for (const auto& p : m.label) l[p.name] = p.value;
      EXPECT_EQ(l["service"], "vllm");
      EXPECT_EQ(l["model"], "llama");
      EXPECT_EQ(m.counter.value, 0);
      ++zero_stall_series;
    }
  }
  EXPECT_EQ(zero_stall_series, 3);  // fabric, clean, unknown
  for (size_t i = 0; i < SpanAggregates::kMaxWorkloads + 5; ++i) {
    Span w = MakeSpan(2, kT0, 0.1);
    w.attributes = {{"service.name", absl::StrCat("svc", i)}};
    const auto labels = agg.WorkloadLabels(w);
    if (i + 1 < SpanAggregates::kMaxWorkloads) {
      EXPECT_EQ(labels.first, absl::StrCat("svc", i));
    } else if (i + 1 > SpanAggregates::kMaxWorkloads) {
      EXPECT_EQ(labels.first, "other");
      EXPECT_EQ(labels.second, "other");
    }
  }
}

TEST(SpanAggregatesExemplarTest, WhichSeriesGetOne) {
  MetricsRegistry metrics;
  SpanAggregates agg(&metrics, 10);
  // Clean, not stalled: no exemplar at all. Clean and stalled: the stall
  // families, not spans_total. Fabric, not stalled: spans_total only. A span
  // without a trace id: none.
  SpanCorrelation clean;
  clean.verdict = Verdict::kClean;
  agg.Record(MakeSpan(1, kT0, 0.1), clean);
  EXPECT_TRUE(agg.Exemplars().empty());
  agg.Record(MakeSpan(2, kT0, 0.1), Stall(Verdict::kClean, {}));
  SpanCorrelation fabric;
  fabric.verdict = Verdict::kFabric;
  agg.Record(MakeSpan(3, kT0, 0.1), fabric);
  Span untraced = MakeSpan(0, kT0, 9);
  agg.Record(untraced, Stall(Verdict::kUnknown, {}));
  const std::vector<SeriesExemplar> ex = agg.Exemplars();
  EXPECT_EQ(ex.size(), 3u);
  EXPECT_NE(Find(ex, "fabricscope_stalls_total", "decode", "clean"), nullptr);
  EXPECT_NE(Find(ex, "fabricscope_stall_duration_seconds", "decode", "clean"), nullptr);
  EXPECT_EQ(Find(ex, "fabricscope_spans_total", "decode", "fabric")->exemplar.span_id,
            "0000000000000003");
  EXPECT_EQ(Find(ex, "fabricscope_stalls_total", "decode", "unknown"), nullptr);
}

TEST(SpanAggregatesExemplarTest, WrittenInOpenMetricsOnly) {
  MetricsRegistry metrics;
  SpanAggregates agg(&metrics, 10);
  agg.Record(MakeSpan(7, kT0, 0.03), Stall(Verdict::kFabric, {"pfc_pause_seconds"}));
  const auto families = metrics.registry()->Collect();
  std::string om, text;
  WriteExposition(families, agg.Exemplars(), ExpositionFormat::kOpenMetrics, &om);
  WriteExposition(families, agg.Exemplars(), ExpositionFormat::kText, &text);
  const std::string ex =
      " # {trace_id=\"00000000000000000000000000000007\",span_id=\"0000000000000007\"} "
      "0.03 1700000000.000\n";
  EXPECT_NE(om.find("fabricscope_stalls_total{model=\"\",name=\"decode\",service=\"\","
                    "verdict=\"fabric\"} 1" +
                    ex),
            std::string::npos)
      << om;
  EXPECT_NE(om.find("fabricscope_stall_signals_total{model=\"\",name=\"decode\",service=\"\","
                    "signal=\"pfc_pause_seconds\"} 1" +
                    ex),
            std::string::npos);
  EXPECT_NE(om.find("fabricscope_spans_total{model=\"\",name=\"decode\",service=\"\","
                    "verdict=\"fabric\"} 1" +
                    ex),
            std::string::npos);
  // The histogram: on the first bucket that holds 0.03 (le="0.05"), once.
  EXPECT_NE(om.find("fabricscope_stall_duration_seconds_bucket{model=\"\",name=\"decode\","
                    "service=\"\",verdict=\"fabric\",le=\"0.05\"} 1" +
                    ex),
            std::string::npos);
  size_t n = 0;
  for (size_t at = om.find("trace_id"); at != std::string::npos; at = om.find("trace_id", at + 1))
    ++n;
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(text.find("trace_id"), std::string::npos);
}

}  // namespace
}  // namespace span_aggregates_test
}  // namespace fabricscope
