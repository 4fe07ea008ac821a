#include "store/counter_semantics.h"

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

TEST(CounterSemanticsTest, Counter64DeltasAndReset) {
  CounterTracker t({CounterKind::kCounter64, 64});
  EXPECT_EQ(t.Update(100).event, CounterEvent::kFirst);
  auto u = t.Update(150);
  EXPECT_EQ(u.event, CounterEvent::kNormal);
  EXPECT_EQ(u.delta, 50u);
  EXPECT_TRUE(u.rate_valid);
  u = t.Update(10);  // driver reload
  EXPECT_EQ(u.event, CounterEvent::kReset);
  EXPECT_EQ(u.delta, 0u);
  EXPECT_FALSE(u.rate_valid);
  u = t.Update(25);  // the delta restarts
  EXPECT_EQ(u.delta, 15u);
}

TEST(CounterSemanticsTest, Wrap32WrapsNearTheTop) {
  CounterTracker t({CounterKind::kWrap32, 32});
  t.Update(4294967000u);
  auto u = t.Update(100);
  EXPECT_EQ(u.event, CounterEvent::kWrapped);
  EXPECT_EQ(u.delta, 296u + 100u);
  EXPECT_TRUE(u.rate_valid);
}

TEST(CounterSemanticsTest, Wrap32LargeDropIsAReset) {
  CounterTracker t({CounterKind::kWrap32, 32});
  t.Update(1000);
  auto u = t.Update(5);
  EXPECT_EQ(u.event, CounterEvent::kReset);
  EXPECT_EQ(u.delta, 0u);
}

TEST(CounterSemanticsTest, Wrap32ThatTurnsOutWiderBecomes64) {
  CounterTracker t({CounterKind::kWrap32, 32});
  t.Update(5000000000ull);
  EXPECT_EQ(t.semantics().kind, CounterKind::kCounter64);
  EXPECT_EQ(t.Update(100).event, CounterEvent::kReset);
}

TEST(CounterSemanticsTest, SaturatingStopsGivingRates) {
  CounterTracker t({CounterKind::kSaturating, 16});
  t.Update(65000);
  auto u = t.Update(65535);
  EXPECT_EQ(u.event, CounterEvent::kSaturated);
  EXPECT_EQ(u.delta, 535u);  // the climb to the maximum is real
  EXPECT_FALSE(u.rate_valid);
  EXPECT_TRUE(t.saturated());
  u = t.Update(65535);
  EXPECT_EQ(u.event, CounterEvent::kSaturated);
  EXPECT_EQ(u.delta, 0u);
  EXPECT_FALSE(u.rate_valid);  // never an invented zero rate
  u = t.Update(3);             // cleared by a PMA Set
  EXPECT_EQ(u.event, CounterEvent::kReset);
  EXPECT_FALSE(t.saturated());
  u = t.Update(7);
  EXPECT_EQ(u.delta, 4u);
  EXPECT_TRUE(u.rate_valid);
}

TEST(CounterSemanticsTest, SaturatedFromTheStart) {
  CounterTracker t({CounterKind::kSaturating, 32});
  EXPECT_EQ(t.Update(4294967295u).event, CounterEvent::kSaturated);
  EXPECT_TRUE(t.saturated());
}

TEST(CounterSemanticsTest, FourBitCounter) {
  CounterTracker t({CounterKind::kSaturating, 4});
  t.Update(14);
  EXPECT_EQ(t.Update(15).event, CounterEvent::kSaturated);
}

TEST(CounterSemanticsTest, GaugeHasNoDelta) {
  CounterTracker t({CounterKind::kGauge, 64});
  EXPECT_EQ(t.Update(5).event, CounterEvent::kGauge);
  EXPECT_EQ(t.Update(1).event, CounterEvent::kGauge);
}

TEST(CounterSemanticsTest, DeltaOverARange) {
  const uint64_t values[] = {10, 20, 5, 15, 4294967290u};
  uint64_t resets = 0;
  bool saturated = true;
  EXPECT_EQ(CounterDeltaOver({CounterKind::kCounter64, 64}, values, 5, &resets, &saturated),
            10u + 10u + (4294967290u - 15u));
  EXPECT_EQ(resets, 1u);
  EXPECT_FALSE(saturated);
}

}  // namespace
}  // namespace fabricscope
