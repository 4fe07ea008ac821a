#include "daemon/store/store.h"

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
  for (int i = 0; i < 200000; ++i) store.Append(id, i, i);
  StoreStats st = store.Stats();
  EXPECT_LE(st.bytes, o.memory_bytes);
  EXPECT_GT(st.evicted_samples, 0u);
  EXPECT_EQ(st.samples + st.evicted_samples, 200000u);
  EXPECT_GT(st.oldest_ts_ns, 0);
}

TEST(StoreTest, PortInventoryUpserts) {
  Store store;
  store.UpsertPort({"mlx5_0", 1, "eth2", "Ethernet", "ACTIVE", "100 Gb/sec", true});
  store.UpsertPort({"mlx5_0", 1, "eth2", "Ethernet", "DOWN", "100 Gb/sec", true});
  auto ports = store.Ports();
  ASSERT_EQ(ports.size(), 1u);
  EXPECT_EQ(ports[0].state, "DOWN");
}

}  // namespace
}  // namespace fabricscope
