#include "store/store.h"

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

Signal Bytes() {
  SeriesKey k{"counters", "port_xmit_data", "mlx5_0", 1, ""};
  return *MapCounter(k);
}

TEST(StoreTest, RegisterIsIdempotent) {
  Store store;
  SeriesKey k{"counters", "port_xmit_data", "mlx5_0", 1, ""};
  SeriesId a = store.Register(k, Bytes());
  SeriesId b = store.Register(k, Bytes());
  EXPECT_EQ(a, b);
  EXPECT_EQ(store.Find(k), a);
  k.port = 2;
  EXPECT_NE(store.Register(k, Bytes()), a);
}

TEST(StoreTest, TotalsAreScaledAndMonotonicAcrossResets) {
  Store store;
  SeriesKey k{"counters", "port_xmit_data", "mlx5_0", 1, ""};
  SeriesId id = store.Register(k, Bytes());
  store.Append(id, 1'000'000'000, 100);  // octets/4
  store.Append(id, 1'010'000'000, 150);
  auto s = store.Get(id)->state;
  EXPECT_DOUBLE_EQ(s.total, 600);  // (100 + 50) * 4
  EXPECT_TRUE(s.rate_valid);
  EXPECT_DOUBLE_EQ(s.last_rate, 50 * 4 / 0.01);
  store.Append(id, 1'020'000'000, 10);  // reset
  s = store.Get(id)->state;
  EXPECT_DOUBLE_EQ(s.total, 600);
  EXPECT_EQ(s.resets, 1u);
  EXPECT_FALSE(s.rate_valid);
  store.Append(id, 1'030'000'000, 20);
  EXPECT_DOUBLE_EQ(store.Get(id)->state.total, 640);
}

TEST(StoreTest, RangeReadsAreInclusiveAndOrdered) {
  Store store;
  SeriesId id = store.Register({"counters", "port_xmit_data", "mlx5_0", 1, ""}, Bytes());
  for (int i = 0; i < 10; ++i) store.Append(id, 1000 + i * 10, i);
  auto r = store.ReadRange(id, 1020, 1050);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.front(), (Sample{1020, 2}));
  EXPECT_EQ(r.back(), (Sample{1050, 5}));
  EXPECT_TRUE(store.ReadRange(id, 0, 999).empty());
  EXPECT_TRUE(store.ReadRange(kInvalidSeries, 0, 99999).empty());
}

TEST(StoreTest, BudgetBoundsSamplesAndCountsEvictions) {
  StoreOptions o;
  o.memory_bytes = 1 << 20;
  Store store(o);
  SeriesId id = store.Register({"counters", "port_xmit_data", "mlx5_0", 1, ""}, Bytes());
  // Large irregular jumps (~6 bytes/sample compressed): 200k samples overflow 1 MiB.
  uint64_t v = 0;
  for (int i = 0; i < 200000; ++i)
    store.Append(id, i, v += (uint64_t(i) * 2654435761u) % 1000000007u);
  StoreStats st = store.Stats();
  EXPECT_LE(st.bytes, o.memory_bytes);
  EXPECT_GT(st.evicted_samples, 0u);
  EXPECT_EQ(st.samples + st.evicted_samples, 200000u);
  EXPECT_GT(st.oldest_ts_ns, 0);
}

TEST(StoreTest, RangeReadsSpanSealedChunksAndHead) {
  Store store;
  SeriesId id = store.Register({"counters", "port_xmit_data", "mlx5_0", 1, ""}, Bytes());
  const int n = 3 * kMaxChunkSamples + 123;
  for (int i = 0; i < n; ++i) store.Append(id, 1000 + i * 10, i % 7 == 0 ? 5 : i);
  EXPECT_GE(store.Stats().chunks, 3u);
  auto all = store.ReadRange(id, 0, INT64_MAX);
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(all[i], (Sample{1000 + i * 10, i % 7 == 0 ? 5u : i}));
  auto mid = store.ReadRange(id, 1000 + 8000 * 10, 1000 + 8400 * 10);
  ASSERT_EQ(mid.size(), 401u);
  EXPECT_EQ(mid.front().ts_ns, 1000 + 8000 * 10);
  EXPECT_TRUE(store.ReadRange(id, 5, 1).empty());
}

Signal Ecn() { return *MapCounter({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""}); }

TEST(StoreDeltaTest, BaselineAtOrBeforeFromAndCoverage) {
  Store store;
  SeriesId id = store.Register({"counters", "port_xmit_data", "mlx5_0", 1, ""}, Bytes());
  for (int i = 0; i < 100; ++i) store.Append(id, 1000 + i * 10, 100 + i * 2);  // 1000..1990
  auto d = store.Delta(id, 1055, 1500);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->first_ts_ns, 1050);  // baseline: last sample at or before `from`
  EXPECT_EQ(d->last_ts_ns, 1500);
  EXPECT_EQ(d->raw_delta, (1500u - 1050u) / 10 * 2);
  EXPECT_DOUBLE_EQ(d->delta, d->raw_delta * 4.0);  // octets/4
  EXPECT_TRUE(d->covers_from);
  EXPECT_TRUE(d->covers_to);
  // Before the first sample: not covered at the start.
  d = store.Delta(id, 0, 1100);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->covers_from);
  EXPECT_EQ(d->first_ts_ns, 1000);
  EXPECT_EQ(d->raw_delta, 20u);
  // After the last sample: not covered at the end.
  d = store.Delta(id, 1900, 5000);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->covers_from);
  EXPECT_FALSE(d->covers_to);
  EXPECT_EQ(d->last_ts_ns, 1990);
  // Nothing held at all in the range.
  d = store.Delta(id, 0, 999);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->samples, 0u);
  EXPECT_FALSE(d->covers_from);
  // Errors.
  EXPECT_EQ(store.Delta(id, 10, 5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Delta(kInvalidSeries, 0, 5).status().code(), absl::StatusCode::kNotFound);
  Signal g = Bytes();
  g.semantics = {CounterKind::kGauge, 64};
  SeriesId gid = store.Register({"x", "gauge", "", 0, ""}, g);
  EXPECT_EQ(store.Delta(gid, 0, 5).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StoreDeltaTest, ResetsWrapsAndSaturation) {
  Store store;
  SeriesId id = store.Register({"counters", "port_xmit_data", "mlx5_0", 1, ""}, Bytes());
  const uint64_t v[] = {100, 150, 10, 30};  // reset between 150 and 10
  for (int i = 0; i < 4; ++i) store.Append(id, (i + 1) * 1000, v[i]);
  auto d = store.Delta(id, 1000, 4000);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->raw_delta, 50u + 20u);
  EXPECT_EQ(d->resets, 1u);

  Signal w = Ecn();
  w.semantics = {CounterKind::kWrap32, 32};
  SeriesId wid = store.Register({"hw_counters", "wrapping", "mlx5_0", 1, ""}, w);
  store.Append(wid, 1000, 4294967000u);
  store.Append(wid, 2000, 4294967295u);
  store.Append(wid, 3000, 700);  // wrapped
  d = store.Delta(wid, 1000, 3000);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->raw_delta, 295u + 1u + 700u);
  EXPECT_EQ(d->resets, 0u);

  Signal s = Ecn();
  s.semantics = {CounterKind::kSaturating, 16};
  SeriesId sid = store.Register({"counters", "symbol_error", "mlx5_0", 1, ""}, s);
  store.Append(sid, 1000, 65000);
  store.Append(sid, 2000, 65535);
  store.Append(sid, 3000, 65535);
  d = store.Delta(sid, 1000, 3000);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->saturated);
  EXPECT_EQ(d->raw_delta, 535u);
}

}  // namespace
}  // namespace fabricscope
