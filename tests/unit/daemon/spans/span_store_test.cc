#include "daemon/spans/span_store.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace fabricscope {
namespace span_store_test {
namespace {

constexpr int64_t kNow = 1'700'000'000'000'000'000;
constexpr int64_t kMs = 1'000'000;

Span MakeSpan(uint8_t trace, uint8_t id, int64_t start, int64_t end, std::string name = "decode") {
  Span s;
  s.trace_id[0] = trace;
  s.trace_id[15] = 1;
  s.span_id[0] = id;
  s.span_id[7] = 1;
  s.name = std::move(name);
  s.start_unix_nano = start;
  s.end_unix_nano = end;
  s.protocol = "native";
  return s;
}

TraceId Trace(uint8_t t) {
  TraceId id{};
  id[0] = t;
  id[15] = 1;
  return id;
}
SpanId Id(uint8_t t) {
  SpanId id{};
  id[0] = t;
  id[7] = 1;
  return id;
}

TEST(SpanStoreTest, LookupByTraceSpanAndTime) {
  FakeClock clock(kNow);
  SpanStore store({}, &clock, nullptr);
  EXPECT_EQ(store.Add(MakeSpan(1, 1, kNow - 50 * kMs, kNow - 40 * kMs, "prefill")), 0u);
  EXPECT_EQ(store.Add({MakeSpan(1, 2, kNow - 30 * kMs, kNow - 20 * kMs),
                       MakeSpan(2, 3, kNow - 35 * kMs, kNow - 5 * kMs),
                       MakeSpan(1, 4, kNow - 60 * kMs, kNow - 55 * kMs)}),
            1u);

  auto trace1 = store.FindByTraceId(Trace(1));
  ASSERT_EQ(trace1.size(), 3u);
  // Ordered by start.
  EXPECT_EQ(trace1[0]->span_id, Id(4));
  EXPECT_EQ(trace1[1]->span_id, Id(1));
  EXPECT_EQ(trace1[2]->span_id, Id(2));
  EXPECT_EQ(store.FindByTraceId(Trace(1), 2).size(), 2u);
  EXPECT_TRUE(store.FindByTraceId(Trace(9)).empty());

  auto by_id = store.FindBySpanId(Id(3));
  ASSERT_EQ(by_id.size(), 1u);
  EXPECT_EQ(by_id[0]->trace_id, Trace(2));
  EXPECT_TRUE(store.FindBySpanId(Id(9)).empty());

  // Overlap [kNow-25ms, kNow-21ms]: span 2 ([-30,-20]) and span 3 ([-35,-5]),
  // including span 3 that started before the window.
  auto overlap = store.FindOverlapping(kNow - 25 * kMs, kNow - 21 * kMs);
  ASSERT_EQ(overlap.size(), 2u);
  EXPECT_EQ(overlap[0]->span_id, Id(3));
  EXPECT_EQ(overlap[1]->span_id, Id(2));
  // Name filter (exact).
  auto prefill = store.FindOverlapping(kNow - 100 * kMs, kNow, "prefill");
  ASSERT_EQ(prefill.size(), 1u);
  EXPECT_EQ(prefill[0]->span_id, Id(1));
  EXPECT_TRUE(store.FindOverlapping(kNow - 100 * kMs, kNow, "prefil").empty());
  // Touching the window edge counts; outside does not.
  EXPECT_EQ(store.FindOverlapping(kNow - 40 * kMs, kNow - 40 * kMs, "prefill").size(), 1u);
  EXPECT_TRUE(store.FindOverlapping(kNow - 4 * kMs, kNow).empty());
  // Limit keeps the latest starts, ascending.
  auto latest = store.FindOverlapping(kNow - 100 * kMs, kNow, {}, 2);
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0]->span_id, Id(3));
  EXPECT_EQ(latest[1]->span_id, Id(2));
}

TEST(SpanStoreTest, BudgetEvictsOldestFirstAndCounts) {
  FakeClock clock(kNow);
  MetricsRegistry metrics;
  const uint64_t per_span = SpanStore::EstimateBytes(MakeSpan(1, 1, kNow - kMs, kNow));
  SpanStore store({.memory_bytes = per_span * 10 + per_span / 2}, &clock, &metrics);
  for (int i = 1; i <= 25; ++i) {
    store.Add(MakeSpan(static_cast<uint8_t>(i), static_cast<uint8_t>(i), kNow - kMs, kNow));
  }
  SpanStoreStats st = store.Stats();
  EXPECT_EQ(st.spans, 10u);
  EXPECT_LE(st.bytes, per_span * 10 + per_span / 2);
  EXPECT_EQ(st.evicted_budget, 15u);
  EXPECT_EQ(st.evicted_age, 0u);
  EXPECT_EQ(st.added_total, 25u);
  EXPECT_EQ(st.first_seq, 15u);
  // The oldest went: spans 1..15 gone, 16..25 present.
  EXPECT_TRUE(store.FindBySpanId(Id(15)).empty());
  EXPECT_EQ(store.FindBySpanId(Id(16)).size(), 1u);
  EXPECT_EQ(store.FindBySpanId(Id(25)).size(), 1u);
  EXPECT_TRUE(store.FindByTraceId(Trace(1)).empty());
  EXPECT_EQ(store.FindOverlapping(kNow - 10 * kMs, kNow).size(), 10u);
  // The counter moved.
  bool found = false;
  for (const auto& family : metrics.registry()->Collect()) {
    if (family.name != "fabricscope_span_store_evictions_total") continue;
    for (const auto& m : family.metric) {
      if (m.label[0].value == "budget") {
        EXPECT_EQ(m.counter.value, 15);
        found = true;
      }
    }
  }
  EXPECT_TRUE(found);
}

TEST(SpanStoreTest, HeldSpansSurviveEviction) {
  FakeClock clock(kNow);
  const uint64_t per_span = SpanStore::EstimateBytes(MakeSpan(1, 1, kNow - kMs, kNow));
  SpanStore store({.memory_bytes = per_span}, &clock, nullptr);
  store.Add(MakeSpan(1, 1, kNow - kMs, kNow));
  auto held = store.FindBySpanId(Id(1));
  ASSERT_EQ(held.size(), 1u);
  store.Add(MakeSpan(2, 2, kNow - kMs, kNow));
  EXPECT_TRUE(store.FindBySpanId(Id(1)).empty());
  EXPECT_EQ(held[0]->name, "decode");  // still valid for the reader
}

TEST(SpanStoreTest, AgeEviction) {
  FakeClock clock(kNow);
  MetricsRegistry metrics;
  SpanStore store({.max_age = absl::Seconds(10)}, &clock, &metrics);
  store.Add(MakeSpan(1, 1, kNow - 2000 * kMs, kNow - 1000 * kMs));
  store.Add(MakeSpan(1, 2, kNow - 500 * kMs, kNow));
  clock.SetRealtimeNs(kNow + 9500 * kMs);  // span 1 is now 10.5 s old, span 2 9.5 s
  EXPECT_EQ(store.EvictExpired(), 1u);
  EXPECT_TRUE(store.FindBySpanId(Id(1)).empty());
  EXPECT_EQ(store.FindBySpanId(Id(2)).size(), 1u);
  EXPECT_EQ(store.Stats().evicted_age, 1u);
  clock.SetRealtimeNs(kNow + 20000 * kMs);
  store.Add(MakeSpan(3, 3, kNow + 19000 * kMs, kNow + 19500 * kMs));  // Add evicts too
  EXPECT_EQ(store.Stats().evicted_age, 2u);
  EXPECT_EQ(store.Stats().spans, 1u);
}

TEST(SpanStoreTest, ReadFromTailsInArrivalOrderAndReportsMissed) {
  FakeClock clock(kNow);
  const uint64_t per_span = SpanStore::EstimateBytes(MakeSpan(1, 1, kNow - kMs, kNow));
  SpanStore store({.memory_bytes = per_span * 4}, &clock, nullptr);
  for (int i = 0; i < 3; ++i) {
    store.Add(MakeSpan(1, static_cast<uint8_t>(i + 1), kNow - kMs, kNow));
  }
  auto r = store.ReadFrom(0, 2);
  ASSERT_EQ(r.spans.size(), 2u);
  EXPECT_EQ(r.spans[0]->span_id, Id(1));
  EXPECT_EQ(r.next_seq, 2u);
  EXPECT_EQ(r.missed, 0u);
  r = store.ReadFrom(r.next_seq, 100);
  ASSERT_EQ(r.spans.size(), 1u);
  EXPECT_EQ(r.next_seq, 3u);
  r = store.ReadFrom(r.next_seq, 100);  // caught up
  EXPECT_TRUE(r.spans.empty());
  EXPECT_EQ(r.next_seq, 3u);
  // Six more: seqs 3..8; the ring keeps 4 (5..8), so a reader at 3 missed 2.
  for (int i = 0; i < 6; ++i) {
    store.Add(MakeSpan(2, static_cast<uint8_t>(10 + i), kNow - kMs, kNow));
  }
  r = store.ReadFrom(3, 100);
  EXPECT_EQ(r.missed, 2u);
  ASSERT_EQ(r.spans.size(), 4u);
  EXPECT_EQ(r.spans[0]->span_id, Id(12));
  EXPECT_EQ(r.next_seq, 9u);
}

TEST(SpanStoreTest, ConcurrentWritersAndReaders) {
  FakeClock clock(kNow);
  SpanStore store({.memory_bytes = 1 << 20}, &clock, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      uint64_t seq = 0;
      while (!stop.load()) {
        auto r = store.ReadFrom(seq, 64);
        for (const auto& s : r.spans) ASSERT_FALSE(s->name.empty());
        seq = r.next_seq;
        store.FindOverlapping(kNow - 1000 * kMs, kNow);
        store.FindByTraceId(Trace(3));
        reads.fetch_add(1);
      }
    });
  }
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        store.Add(MakeSpan(static_cast<uint8_t>(i % 7), static_cast<uint8_t>(t * 100 + i % 100),
                           kNow - (i % 50) * kMs, kNow));
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  for (auto& r : readers) r.join();
  SpanStoreStats st = store.Stats();
  EXPECT_EQ(st.added_total, 4000u);
  EXPECT_EQ(st.spans + st.evicted_budget, 4000u);
  EXPECT_LE(st.bytes, 1u << 20);
  EXPECT_GT(reads.load(), 0u);
}

}  // namespace
}  // namespace span_store_test
}  // namespace fabricscope
