#include "daemon/query/query_engine.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tests/unit/daemon/query/query_test_world.h"

namespace fabricscope {
namespace query_engine_test {
namespace {

using query_test::Bytes;
using query_test::kMs;
using query_test::kSec;
using query_test::kT;
using query_test::MakeSpan;

class QueryEngineTest : public query_test::QueryWorld {
 protected:
  static CorrelateQuery ByTrace(uint8_t trace) {
    CorrelateQuery q;
    q.selector = CorrelateQuery::Selector::kTraceId;
    q.id = Bytes(16, trace);
    return q;
  }
};

TEST_F(QueryEngineTest, CorrelatesByTraceIdAndTrimsToTheAnomalousSeries) {
  auto got = engine_.Correlate(ByTrace(1));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  const CorrelatedSpan& hit = (*got)[0];
  EXPECT_EQ(hit.span->span_id[7], 1);
  EXPECT_EQ(hit.correlation.verdict, Verdict::kFabric) << hit.correlation.reason;
  EXPECT_TRUE(hit.correlation.stall);
  ASSERT_EQ(hit.correlation.series.size(), 1u);  // eth0 only: eth1 is not anomalous
  EXPECT_EQ(hit.correlation.series[0].netdev, "eth0");
  EXPECT_TRUE(hit.correlation.series[0].anomalous);
  EXPECT_EQ((*got)[1].correlation.verdict, Verdict::kClean);
  EXPECT_TRUE((*got)[1].correlation.series.empty());
  // The counts are of every series in scope, trimmed or not.
  EXPECT_EQ((*got)[1].correlation.congestion_series, 2u);

  CorrelateQuery all = ByTrace(1);
  all.include_all_series = true;
  got = engine_.Correlate(all);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].correlation.series.size(), 2u);
  EXPECT_EQ((*got)[1].correlation.series.size(), 2u);

  CorrelateQuery one = ByTrace(1);
  one.limit = 1;
  got = engine_.Correlate(one);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].span->span_id[7], 1);  // the earliest

  got = engine_.Correlate(ByTrace(9));
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

// A query asked to stop between spans ends with CANCELLED, after the spans
// it was let correlate (the gRPC service asks its call: the daemon's stop).
TEST_F(QueryEngineTest, CorrelateStopsWhenCancelled) {
  CorrelateQuery q;
  q.selector = CorrelateQuery::Selector::kTimeRange;
  q.time_range = {kT, kT + 60 * kSec};
  int asked = 0;
  q.cancelled = [&asked] { return ++asked > 2; };
  auto got = engine_.Correlate(q);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled);
  EXPECT_NE(got.status().message().find("after 2 of 3 spans"), std::string::npos) << got.status();
  q.cancelled = [] { return false; };
  got = engine_.Correlate(q);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 3u);
}

TEST_F(QueryEngineTest, CorrelatesBySpanIdAndTimeRange) {
  CorrelateQuery by_span;
  by_span.selector = CorrelateQuery::Selector::kSpanId;
  by_span.id = Bytes(8, 3);
  auto got = engine_.Correlate(by_span);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].span->name, "kv_transfer");
  EXPECT_EQ((*got)[0].correlation.verdict, Verdict::kFabric);

  CorrelateQuery by_range;
  by_range.selector = CorrelateQuery::Selector::kTimeRange;
  by_range.time_range = {kT, kT + 60 * kSec};
  got = engine_.Correlate(by_range);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 3u);

  by_range.name = "decode_step";
  got = engine_.Correlate(by_range);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  for (const CorrelatedSpan& s : *got) EXPECT_EQ(s.span->name, "decode_step");

  // Over the limit, the latest starts are kept.
  by_range.limit = 1;
  got = engine_.Correlate(by_range);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].span->span_id[7], 2);

  // Only [0, 5 s]: nothing overlaps.
  by_range = CorrelateQuery{};
  by_range.selector = CorrelateQuery::Selector::kTimeRange;
  by_range.time_range = {kT, kT + 5 * kSec};
  got = engine_.Correlate(by_range);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

TEST_F(QueryEngineTest, CorrelateRejectsBadSelectorsWithTheApiMessages) {
  auto none = engine_.Correlate(CorrelateQuery{});
  EXPECT_EQ(none.status(),
            absl::InvalidArgumentError("one of trace_id, span_id or time_range is required"));

  CorrelateQuery bad_trace;
  bad_trace.selector = CorrelateQuery::Selector::kTraceId;
  bad_trace.id = "short";
  EXPECT_EQ(engine_.Correlate(bad_trace).status(),
            absl::InvalidArgumentError("trace_id must be 16 bytes"));

  CorrelateQuery bad_span;
  bad_span.selector = CorrelateQuery::Selector::kSpanId;
  bad_span.id = Bytes(16, 3);
  EXPECT_EQ(engine_.Correlate(bad_span).status(),
            absl::InvalidArgumentError("span_id must be 8 bytes"));

  CorrelateQuery backwards;
  backwards.selector = CorrelateQuery::Selector::kTimeRange;
  backwards.time_range = {10, 5};
  EXPECT_EQ(engine_.Correlate(backwards).status(),
            absl::InvalidArgumentError("time_range: to_unix_nano is before from_unix_nano"));
}

TEST_F(QueryEngineTest, CorrelateSpanJudgesASpanOutsideTheStore) {
  const Span offline = MakeSpan(7, 7, "decode_step", kT + 10 * kSec, kT + 10100 * kMs);
  const SpanCorrelation trimmed = engine_.CorrelateSpan(offline, false);
  EXPECT_EQ(trimmed.verdict, Verdict::kFabric) << trimmed.reason;
  EXPECT_EQ(trimmed.series.size(), 1u);
  const SpanCorrelation all = engine_.CorrelateSpan(offline, true);
  EXPECT_EQ(all.series.size(), 2u);
  EXPECT_EQ(all.verdict, trimmed.verdict);
}

TEST_F(QueryEngineTest, SeriesMatchesSignalAndLabelsAndBoundsSamples) {
  SeriesQuery q;
  q.signal = "pfc_pause_seconds";
  q.matchers.push_back({"netdev", "eth0"});
  q.time_range = {kT + 10 * kSec, kT + 11 * kSec};
  auto got = engine_.Series(q);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  const SeriesSamples& s = (*got)[0];
  EXPECT_EQ(s.key->netdev, "eth0");
  EXPECT_EQ(s.key->name, "rx_prio3_pause_duration");
  EXPECT_EQ(s.signal->name, "pfc_pause_seconds");
  EXPECT_FALSE(s.truncated);
  ASSERT_EQ(s.samples.size(), 11u);  // every 100 ms poll, inclusive
  EXPECT_EQ(s.samples[2].value, 200'000u);
  const auto prio = std::find_if(s.labels.begin(), s.labels.end(),
                                 [](const auto& kv) { return kv.first == "priority"; });
  ASSERT_NE(prio, s.labels.end());
  EXPECT_EQ(prio->second, "3");

  // The newest samples are kept.
  q.max_samples_per_series = 3;
  got = engine_.Series(q);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ((*got)[0].samples.size(), 3u);
  EXPECT_TRUE((*got)[0].truncated);
  EXPECT_EQ((*got)[0].samples.back().ts_ns, kT + 11 * kSec);

  // By raw counter name, every netdev; max_series bounds the list.
  q = SeriesQuery{};
  q.signal = "rx_prio3_pause_duration";
  q.time_range = {kT, kT + 30 * kSec};
  got = engine_.Series(q);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 2u);
  q.max_series = 1;
  got = engine_.Series(q);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u);

  // A label the series does not have matches "" only.
  q = SeriesQuery{};
  q.time_range = {kT, kT + 30 * kSec};
  q.matchers.push_back({"device", ""});
  got = engine_.Series(q);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 2u);
  q.matchers[0].value = "mlx5_0";
  got = engine_.Series(q);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

TEST_F(QueryEngineTest, SeriesRangeDefaultsToTheLastMinuteAndRejectsBackwards) {
  SeriesQuery q;
  q.signal = "pfc_pause_seconds";
  // Unset: [now - 60 s, now] = [0, 60 s]: every sample (0..30 s).
  auto got = engine_.Series(q);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].samples.size(), 301u);
  // Only `to` set: the minute before it.
  q.time_range.to_unix_nano = kT + 61 * kSec;
  got = engine_.Series(q);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0].samples.size(), 291u);  // from 1 s

  q.time_range = {kT + 2 * kSec, kT + kSec};
  EXPECT_EQ(engine_.Series(q).status(),
            absl::InvalidArgumentError("time_range: to_unix_nano is before from_unix_nano"));
}

TEST_F(QueryEngineTest, EventsFilterByDetectorAndActivity) {
  EventsQuery q;
  q.time_range = {kT, kT + 60 * kSec};
  auto got = engine_.Events(q);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].detector, "pfc_storm");
  EXPECT_EQ((*got)[0].netdev, "eth0");
  EXPECT_FALSE((*got)[0].active());

  q.active_only = true;
  got = engine_.Events(q);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());

  q.active_only = false;
  q.detector = "microburst";
  got = engine_.Events(q);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());

  // Before the storm only.
  q = EventsQuery{};
  q.time_range = {kT, kT + 5 * kSec};
  got = engine_.Events(q);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());

  q.time_range = {kT + 5, kT};
  EXPECT_EQ(engine_.Events(q).status(),
            absl::InvalidArgumentError("time_range: to_unix_nano is before from_unix_nano"));
}

TEST_F(QueryEngineTest, WithoutDetectorsOrSpansTheAnswersAreEmptyButStillChecked) {
  const QueryEngine bare(nullptr, &correlator_, &store_, &ports_, nullptr, &clock_);
  EventsQuery events;
  events.time_range = {kT, kT + 60 * kSec};
  auto listed = bare.Events(events);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
  events.time_range = {2, 1};
  EXPECT_FALSE(bare.Events(events).ok());

  auto spans = bare.Correlate(ByTrace(1));
  ASSERT_TRUE(spans.ok());
  EXPECT_TRUE(spans->empty());
  CorrelateQuery bad = ByTrace(1);
  bad.id = "x";
  EXPECT_FALSE(bare.Correlate(bad).ok());
}

TEST_F(QueryEngineTest, PortsAreTheInventory) {
  const std::vector<PortInfo> ports = engine_.Ports();
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[0].device, "mlx5_0");
  EXPECT_EQ(ports[0].netdev, "eth0");
  EXPECT_EQ(ports[1].device, "mlx5_1");
}

// Collects what Record walks; fails on demand.
class CollectingSink final : public RecordSink {
 public:
  absl::Status Check() override {
    ++checks;
    return checks > fail_check_after ? absl::CancelledError("cancelled") : absl::OkStatus();
  }
  absl::Status OnSeries(const SeriesSamples& s) override {
    series.push_back(s.key->netdev);
    samples += s.samples.size();
    EXPECT_FALSE(s.truncated);
    return absl::OkStatus();
  }
  absl::Status OnSpans(absl::Span<const SpanRef> batch) override {
    batches.push_back(batch.size());
    if (fail_spans) return absl::CancelledError("client gone");
    return absl::OkStatus();
  }

  int checks = 0;
  int fail_check_after = 1 << 30;
  bool fail_spans = false;
  std::vector<std::string> series;
  size_t samples = 0;
  std::vector<size_t> batches;
};

TEST_F(QueryEngineTest, RecordWalksSeriesWithSamplesThenSpansInBatches) {
  // A third series with no samples in the range is left out.
  SeriesKey k{"ethtool", "rx_prio4_pause_duration", "", 0, "eth0"};
  store_.Append(store_.Register(k, *MapCounter(k)), kT + 50 * kSec, 1);
  for (int i = 0; i < 1500; ++i) {
    spans_.Add(MakeSpan(static_cast<uint8_t>(10 + i / 250), static_cast<uint8_t>(i % 250 + 1),
                        "other", kT + 15 * kSec + i, kT + 15 * kSec + i + 1));
  }

  CollectingSink sink;
  ASSERT_TRUE(engine_.Record({kT, kT + 30 * kSec}, sink).ok());
  EXPECT_EQ(sink.series, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(sink.samples, 2u * 301u);
  EXPECT_EQ(sink.checks, 3);  // before every series, with samples or not
  EXPECT_EQ(sink.batches, (std::vector<size_t>{1000, 503}));

  CollectingSink cancelled;
  cancelled.fail_check_after = 1;
  EXPECT_EQ(engine_.Record({kT, kT + 30 * kSec}, cancelled), absl::CancelledError("cancelled"));
  EXPECT_EQ(cancelled.series.size(), 1u);
  EXPECT_TRUE(cancelled.batches.empty());

  CollectingSink gone;
  gone.fail_spans = true;
  EXPECT_EQ(engine_.Record({kT, kT + 30 * kSec}, gone), absl::CancelledError("client gone"));
  EXPECT_EQ(gone.batches.size(), 1u);

  CollectingSink unused;
  EXPECT_EQ(engine_.Record({kT + 1, kT}, unused).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unused.checks, 0);
}

// Queries run on gRPC threads while collectors append and ingest adds spans.
TEST_F(QueryEngineTest, ConcurrentQueriesWhileTheStoresGrow) {
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    SeriesKey k{"ethtool", "rx_prio5_pause_duration", "", 0, "eth1"};
    const SeriesId id = store_.Register(k, *MapCounter(k));
    for (int i = 0; i < 2000; ++i) {
      store_.Append(id, kT + 31 * kSec + i * kMs, static_cast<uint64_t>(i));
      if (i % 10 == 0) {
        spans_.Add(MakeSpan(4, static_cast<uint8_t>(i / 10 % 250 + 1), "decode_step",
                            kT + 31 * kSec + i * kMs, kT + 31 * kSec + (i + 5) * kMs));
      }
    }
    stop.store(true);
  });
  std::vector<std::thread> readers;
  std::atomic<int> answers{0};
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      do {  // at least once, however fast the writer
        CorrelateQuery q;
        q.selector = CorrelateQuery::Selector::kTimeRange;
        q.time_range = {kT, kT + 60 * kSec};
        auto spans = engine_.Correlate(q);
        SeriesQuery sq;
        sq.signal = "pfc_pause_seconds";
        auto series = engine_.Series(sq);
        auto events = engine_.Events(EventsQuery{});
        if (spans.ok() && spans->size() >= 3 && series.ok() && series->size() >= 2 && events.ok()) {
          answers.fetch_add(1);
        }
      } while (!stop.load());
    });
  }
  writer.join();
  for (std::thread& t : readers) t.join();
  EXPECT_GT(answers.load(), 0);

  CorrelateQuery q;
  q.selector = CorrelateQuery::Selector::kTimeRange;
  q.time_range = {kT, kT + 60 * kSec};
  auto spans = engine_.Correlate(q);
  ASSERT_TRUE(spans.ok());
  EXPECT_EQ(spans->size(), 3u + 200u);
}

// `s` kept for the test's lifetime: a SeriesCorrelation views its names
// (in the daemon, the store's own strings).
absl::string_view Kept(const std::string& s) {
  static auto* kept = new std::set<std::string>;
  return *kept->insert(s).first;
}

// A correlated span with `verdict`, `stall` and (fabric) a top-ranked
// anomalous series of `signal` rx priority `prio`.
CorrelatedSpan Judged(uint8_t id, Verdict verdict, bool stall, const std::string& signal = "",
                      const std::string& prio = "") {
  CorrelatedSpan c;
  c.span = std::make_shared<const Span>(
      MakeSpan(1, id, "decode_step", kT + id * kSec, kT + id * kSec + 30 * kMs));
  c.correlation.start_unix_nano = c.span->start_unix_nano;
  c.correlation.end_unix_nano = c.span->end_unix_nano;
  c.correlation.verdict = verdict;
  c.correlation.stall = stall;
  if (!signal.empty()) {
    SeriesCorrelation s;
    s.signal = Kept(signal);
    s.direction = "rx";
    s.priority = Kept(prio);
    s.anomalous = true;
    c.correlation.series.push_back(s);
  }
  return c;
}

// 10 spans: 6 clean (one stalled), 3 fabric (two stalled; two blamed on
// pause prio 3, one on ecn), 1 unknown (stalled).
std::vector<CorrelatedSpan> Ten() {
  std::vector<CorrelatedSpan> v;
  for (uint8_t i = 1; i <= 5; ++i) v.push_back(Judged(i, Verdict::kClean, false));
  v.push_back(Judged(6, Verdict::kFabric, true, "pfc_pause_seconds", "3"));
  v.push_back(Judged(7, Verdict::kClean, true));
  v.push_back(Judged(8, Verdict::kFabric, false, "ecn_marked_packets", "3"));
  v.push_back(Judged(9, Verdict::kUnknown, true));
  v.push_back(Judged(10, Verdict::kFabric, true, "pfc_pause_seconds", "3"));
  return v;
}

std::vector<int> Ids(const std::vector<CorrelatedSpan>& v) {
  std::vector<int> out;
  for (const CorrelatedSpan& c : v) out.push_back(c.span->span_id[7]);
  return out;
}

TEST(SelectSpansTest, SummaryCountsEverySpanWhateverTheSelection) {
  SpanSelection none;
  none.all = false;  // nothing selected: the summary alone
  std::vector<CorrelatedSpan> v = Ten();
  const CorrelateSummary s = SelectSpans(none, 0, &v);
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(s.spans, 10u);
  EXPECT_EQ(s.by_verdict[static_cast<int>(Verdict::kClean)], 6u);
  EXPECT_EQ(s.by_verdict[static_cast<int>(Verdict::kFabric)], 3u);
  EXPECT_EQ(s.by_verdict[static_cast<int>(Verdict::kUnknown)], 1u);
  EXPECT_EQ(s.stalls, 4u);
  EXPECT_EQ(s.stalls_by_verdict[static_cast<int>(Verdict::kFabric)], 2u);
  EXPECT_EQ(s.stalls_by_verdict[static_cast<int>(Verdict::kClean)], 1u);
  EXPECT_EQ(s.stalls_by_verdict[static_cast<int>(Verdict::kUnknown)], 1u);
  // Blame counts the stalls judged fabric; the fabric span that did not
  // stall (ecn) is grouped instead.
  ASSERT_EQ(s.blamed.size(), 1u);
  EXPECT_EQ(s.blamed[0].signal, "pfc_pause_seconds");
  EXPECT_EQ(s.blamed[0].priority, "3");
  EXPECT_EQ(s.blamed[0].direction, "rx");
  EXPECT_EQ(s.blamed[0].spans, 2u);
  ASSERT_EQ(s.fabric_groups.size(), 1u);
  EXPECT_EQ(s.fabric_groups[0].signal, "ecn_marked_packets");
  EXPECT_EQ(s.fabric_groups[0].spans, 1u);
  EXPECT_EQ(s.fabric_groups[0].first_start_unix_nano, kT + 8 * kSec);
  EXPECT_EQ(s.fabric_groups[0].last_end_unix_nano, kT + 8 * kSec + 30 * kMs);
  EXPECT_EQ(s.not_selected, 10u);
  EXPECT_EQ(s.over_limit, 0u);
}

TEST(SelectSpansTest, EachSelectorKeepsItsSpansInOrder) {
  auto select = [](SpanSelection sel, uint32_t max_listed, CorrelateSummary* s) {
    std::vector<CorrelatedSpan> v = Ten();
    *s = SelectSpans(sel, max_listed, &v);
    return Ids(v);
  };
  CorrelateSummary s;
  EXPECT_EQ(select(SpanSelection{}, 0, &s), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(s.not_selected, 0u);
  SpanSelection stalls_and_fabric{.all = false, .stalls = true, .fabric = true};
  EXPECT_EQ(select(stalls_and_fabric, 0, &s), (std::vector<int>{6, 7, 8, 9, 10}));
  EXPECT_EQ(s.not_selected, 5u);
  EXPECT_EQ(select({.all = false, .stalls = true}, 0, &s), (std::vector<int>{6, 7, 9, 10}));
  EXPECT_EQ(select({.all = false, .fabric = true}, 0, &s), (std::vector<int>{6, 8, 10}));
  EXPECT_EQ(select({.all = false, .clean = true}, 0, &s), (std::vector<int>{1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(select({.all = false, .unknown = true}, 0, &s), (std::vector<int>{9}));
  EXPECT_EQ(select({.all = false, .clean = true, .unknown = true}, 0, &s),
            (std::vector<int>{1, 2, 3, 4, 5, 7, 9}));
  // The listing limit keeps the stalls first (fabric-bound, then longest,
  // then earliest: all four last 30 ms), then the latest other spans, in
  // start order, and counts the rest; the summary still counts every span.
  EXPECT_EQ(select(stalls_and_fabric, 2, &s), (std::vector<int>{6, 10}));
  EXPECT_EQ(s.over_limit, 3u);
  EXPECT_EQ(select(stalls_and_fabric, 4, &s), (std::vector<int>{6, 7, 9, 10}));  // not 8
  EXPECT_EQ(s.over_limit, 1u);
  EXPECT_EQ(select(SpanSelection{}, 6, &s), (std::vector<int>{5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(select({.all = false, .clean = true}, 2, &s), (std::vector<int>{5, 7}));
  EXPECT_EQ(s.not_selected, 4u);
  EXPECT_EQ(s.over_limit, 4u);
  EXPECT_EQ(s.spans, 10u);
  EXPECT_EQ(select(SpanSelection{}, 100, &s).size(), 10u);
  EXPECT_EQ(s.over_limit, 0u);
}

TEST(SelectSpansTest, BlamedSignalsAndGroupsAreBounded) {
  std::vector<CorrelatedSpan> v;
  for (uint8_t i = 1; i <= 8; ++i) {
    v.push_back(Judged(i, Verdict::kFabric, true, "pfc_pause_seconds", std::to_string(i % 8)));
  }
  for (uint8_t i = 9; i <= 30; ++i) {
    v.push_back(Judged(i, Verdict::kFabric, false, "cnp_sent", std::to_string(i % 12)));
  }
  const CorrelateSummary s = SelectSpans(SpanSelection{}, 0, &v);
  EXPECT_EQ(s.blamed.size(), CorrelateSummary::kMaxBlamed);
  ASSERT_EQ(s.fabric_groups.size(), CorrelateSummary::kMaxFabricGroups);
  EXPECT_EQ(s.fabric_groups_left_out, 2u);
  // Most spans first (i % 12 over 9..30: ten priorities hold 2 spans, two
  // hold 1): the two single-span groups are the ones left out.
  for (size_t i = 1; i < s.fabric_groups.size(); ++i) {
    EXPECT_GE(s.fabric_groups[i - 1].spans, s.fabric_groups[i].spans);
  }
  size_t grouped = 0;
  for (const FabricGroup& g : s.fabric_groups) grouped += g.spans;
  EXPECT_EQ(grouped, 20u);
}

// Over the limit the longest fabric-bound stall is listed, not the latest:
// a 622 ms stall early in the range must not be crowded out by later short
// ones, and a long clean stall ranks after a short fabric one.
TEST(SelectSpansTest, TheLimitKeepsTheMostFabricBoundLongestStalls) {
  std::vector<CorrelatedSpan> v;
  auto stall = [&](uint8_t id, Verdict verdict, int64_t ms) {
    CorrelatedSpan c =
        Judged(id, verdict, true, verdict == Verdict::kFabric ? "pfc_pause_seconds" : "");
    c.correlation.start_unix_nano = kT + id * kSec;
    c.correlation.end_unix_nano = kT + id * kSec + ms * kMs;
    v.push_back(std::move(c));
  };
  stall(1, Verdict::kFabric, 622);
  stall(2, Verdict::kClean, 2000);
  for (uint8_t i = 3; i <= 12; ++i) stall(i, Verdict::kFabric, 40);
  stall(13, Verdict::kUnknown, 900);
  CorrelateSummary s;
  std::vector<CorrelatedSpan> a = v;
  s = SelectSpans(SpanSelection{}, 1, &a);
  EXPECT_EQ(Ids(a), (std::vector<int>{1}));
  a = v;
  s = SelectSpans(SpanSelection{}, 12, &a);  // 11 fabric, then unknown before clean
  EXPECT_EQ(Ids(a), (std::vector<int>{1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(s.over_limit, 1u);
  EXPECT_TRUE(StallRanksBefore(Verdict::kFabric, 1, 5, Verdict::kClean, 100, 1));
  EXPECT_TRUE(StallRanksBefore(Verdict::kFabric, 100, 5, Verdict::kFabric, 1, 1));
  EXPECT_TRUE(StallRanksBefore(Verdict::kFabric, 100, 1, Verdict::kFabric, 100, 5));
  EXPECT_FALSE(StallRanksBefore(Verdict::kFabric, 100, 1, Verdict::kFabric, 100, 1));
}

TEST_F(QueryEngineTest, CorrelateAppliesTheSelectionAndReportsTheSummary) {
  CorrelateQuery q;
  q.selector = CorrelateQuery::Selector::kTimeRange;
  q.time_range = {kT, kT + 60 * kSec};
  q.selection = {.all = false, .clean = true};
  CorrelateSummary summary;
  auto got = engine_.Correlate(q, &summary);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].span->span_id[7], 2);
  EXPECT_EQ(summary.spans, 3u);
  EXPECT_EQ(summary.by_verdict[static_cast<int>(Verdict::kFabric)], 2u);
  EXPECT_EQ(summary.not_selected, 2u);
  // One fabric span stalled (blamed), the other did not (grouped).
  ASSERT_EQ(summary.blamed.size(), 1u);
  EXPECT_EQ(summary.blamed[0].signal, "pfc_pause_seconds");
  EXPECT_EQ(summary.blamed[0].spans, 1u);
  ASSERT_EQ(summary.fabric_groups.size(), 1u);
  EXPECT_EQ(summary.fabric_groups[0].signal, "pfc_pause_seconds");
  EXPECT_EQ(summary.fabric_groups[0].signal_class, SignalClass::kPause);
  EXPECT_EQ(summary.fabric_groups[0].spans, 1u);
  EXPECT_GT(summary.fabric_groups[0].peak, 0.3);  // a pause fraction

  q.selection = {.all = false, .fabric = true};
  q.max_listed = 1;
  got = engine_.Correlate(q, &summary);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(summary.over_limit, 1u);
}

TEST_F(QueryEngineTest, SeriesAndEventsSayHowManyTheLimitLeftOut) {
  SeriesQuery q;
  q.signal = "rx_prio3_pause_duration";
  q.time_range = {kT, kT + 30 * kSec};
  q.max_series = 1;
  size_t left_out = 99;
  auto got = engine_.Series(q, &left_out);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u);
  EXPECT_EQ(left_out, 1u);
  q.max_series = 0;
  got = engine_.Series(q, &left_out);
  EXPECT_EQ(left_out, 0u);

  EventsQuery e;
  e.time_range = {kT, kT + 60 * kSec};
  auto events = engine_.Events(e, &left_out);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(left_out, 0u);
  e.limit = 1;
  events = engine_.Events(e, &left_out);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 1u);
  EXPECT_EQ(left_out, 0u);
  // Two more, later: the limit keeps the latest and counts the earlier ones.
  for (int i = 0; i < 2; ++i) {
    DetectorEvent later;
    later.detector = "microburst";
    later.kind = "burst";
    later.netdev = "eth1";
    later.start_unix_nano = kT + (40 + i) * kSec;
    later.end_unix_nano = later.start_unix_nano + kSec;
    events_.Open(later);
  }
  e.limit = 2;
  events = engine_.Events(e, &left_out);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(left_out, 1u);
  EXPECT_EQ((*events)[0].detector, "microburst");
  EXPECT_EQ((*events)[1].start_unix_nano, kT + 41 * kSec);
}

}  // namespace
}  // namespace query_engine_test
}  // namespace fabricscope
