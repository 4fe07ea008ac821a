// The memory budget: never exceeded, oldest chunks evicted first, 10k series.
#include <random>

#include "gtest/gtest.h"
#include "store/store.h"

namespace fabricscope {
namespace store_budget_test {
namespace {

constexpr int64_t kMs = 1'000'000;

Signal Ecn() { return *MapCounter({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""}); }

SeriesKey Key(int i) {
  return {"hw_counters", "np_ecn_marked_roce_packets", "mlx5_" + std::to_string(i / 4),
          static_cast<uint32_t>(i % 4 + 1), ""};
}

TEST(StoreBudgetTest, TenThousandSeriesStayWithinBudget) {
  StoreOptions o;
  o.memory_bytes = 24ull << 20;
  Store store(o);
  const Signal sig = Ecn();
  std::vector<SeriesId> ids;
  for (int i = 0; i < 10000; ++i) {
    ids.push_back(store.Register(Key(i), sig));
    ASSERT_NE(ids.back(), kInvalidSeries);
  }
  StoreStats st = store.Stats();
  EXPECT_EQ(st.series, 10000u);
  EXPECT_LE(st.bytes, o.memory_bytes);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> v(ids.size(), 0);
  const int kTicks = 800;
  uint64_t max_bytes = 0;
  for (int t = 0; t < kTicks; ++t) {
    const int64_t ts = 1'700'000'000'000'000'000 + t * 10 * kMs;
    for (size_t i = 0; i < ids.size(); ++i) {
      v[i] += rng() % 2000;  // moving: ~2 bytes/sample
      store.Append(ids[i], ts, v[i]);
    }
    if (t % 100 == 0) {
      st = store.Stats();
      max_bytes = std::max(max_bytes, st.bytes);
      ASSERT_LE(st.bytes, o.memory_bytes) << "tick " << t;
    }
  }
  st = store.Stats();
  EXPECT_LE(st.bytes, o.memory_bytes);
  EXPECT_LE(max_bytes, o.memory_bytes);
  EXPECT_GT(st.evicted_samples, 0u);
  EXPECT_EQ(st.samples + st.evicted_samples, uint64_t{kTicks} * ids.size());
  // The store filled the budget, rather than evicting early.
  EXPECT_GT(st.bytes, o.memory_bytes * 8 / 10);
  // Oldest first: what is held is the most recent data of every series.
  const int64_t last_ts = 1'700'000'000'000'000'000 + (kTicks - 1) * 10 * kMs;
  for (SeriesId id : {ids[0], ids[5000], ids[9999]}) {
    auto r = store.ReadRange(id, 0, INT64_MAX);
    ASSERT_FALSE(r.empty());
    EXPECT_EQ(r.back().ts_ns, last_ts);
    EXPECT_EQ(r.back().value, v[id]);
  }
  EXPECT_GT(st.oldest_ts_ns, 1'700'000'000'000'000'000);
}

TEST(StoreBudgetTest, EvictsGloballyOldestChunksFirst) {
  StoreOptions o;
  o.memory_bytes = 256 << 10;
  Store store(o);
  const Signal sig = Ecn();
  // Series A is written long ago, series B afterwards and keeps going.
  SeriesId a = store.Register(Key(0), sig);
  SeriesId b = store.Register(Key(1), sig);
  std::mt19937_64 rng(1);
  uint64_t va = 0, vb = 0;
  for (int i = 0; i < 20000; ++i) store.Append(a, 1'000 * kMs + i * 10 * kMs, va += rng() % 5000);
  const uint64_t a_held_before = store.ReadRange(a, 0, INT64_MAX).size();
  ASSERT_GT(a_held_before, 0u);
  int64_t ts = 1'000'000 * kMs;
  // B's newer data pushes out A's older chunks before any of B's.
  // (Checked every 50 appends: decoding A's range on every append is quadratic.)
  while (store.ReadRange(a, 0, INT64_MAX).size() > 2000) {
    for (int k = 0; k < 50; ++k) store.Append(b, ts += 10 * kMs, vb += rng() % 5000);
    ASSERT_LT(ts, 2'000'000 * kMs);
  }
  auto rb = store.ReadRange(b, 0, INT64_MAX);
  ASSERT_FALSE(rb.empty());
  EXPECT_EQ(rb.front().ts_ns, 1'000'000 * kMs + 10 * kMs);  // none of B evicted yet
  EXPECT_LE(store.Stats().bytes, o.memory_bytes);
}

TEST(StoreBudgetTest, ConstantCountersAreCheap) {
  StoreOptions o;
  o.memory_bytes = 64ull << 20;
  Store store(o);
  SeriesId id = store.Register(Key(0), Ecn());
  const uint64_t base = store.Stats().bytes;
  for (int i = 0; i < 100000; ++i) store.Append(id, 1'000'000'000 + i * 10 * kMs, 123456789);
  StoreStats st = store.Stats();
  EXPECT_EQ(st.samples, 100000u);
  EXPECT_LT(static_cast<double>(st.bytes - base) / st.samples, 0.2);
  auto r = store.ReadRange(id, 0, INT64_MAX);
  ASSERT_EQ(r.size(), 100000u);
  EXPECT_EQ(r[77777], (Sample{1'000'000'000 + 77777 * 10 * kMs, 123456789}));
}

TEST(StoreBudgetTest, TinyBudgetRejectsSeriesInsteadOfGrowing) {
  StoreOptions o;
  o.memory_bytes = 16 << 10;  // the first 1024 lookup slots take 8 KiB
  Store store(o);
  int accepted = 0;
  for (int i = 0; i < 100; ++i) {
    SeriesId id = store.Register(Key(i), Ecn());
    if (id == kInvalidSeries) continue;
    ++accepted;
    for (int j = 0; j < 3000; ++j) store.Append(id, j * 10 * kMs, j * 977);
    ASSERT_LE(store.Stats().bytes, o.memory_bytes);
  }
  StoreStats st = store.Stats();
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 100);
  EXPECT_EQ(st.rejected_series, static_cast<uint64_t>(100 - accepted));
  EXPECT_LE(st.bytes, o.memory_bytes);
  store.Append(kInvalidSeries, 1, 1);  // a no-op
  EXPECT_FALSE(store.Get(kInvalidSeries).has_value());
}

}  // namespace
}  // namespace store_budget_test
}  // namespace fabricscope
