// Peak window expiry, burst factor / floor, and pause fraction through the store.
#include "store/aggregates.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "store/store.h"

namespace fabricscope {
namespace aggregates_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

TEST(PeakGeometryTest, CoversAtLeastTheWindow) {
  PeakGeometry g = PeakGeometry::For(absl::Seconds(15));
  EXPECT_EQ(g.width_ns, kSec);
  EXPECT_EQ(g.buckets, 16u);
  PeakGeometry big = PeakGeometry::For(absl::Minutes(10));
  EXPECT_GE(big.width_ns * (big.buckets - 1), 600 * kSec);
  EXPECT_LE(big.buckets, 18u);
}

TEST(PeakWindowTest, PeakHoldsForTheWindowThenExpires) {
  PeakWindow w(PeakGeometry::For(absl::Seconds(15)));
  double peak = -1;
  EXPECT_FALSE(w.peak(&peak));
  int64_t t = 100 * kSec;
  for (int i = 0; i < 100; ++i) w.Add(t += 10 * kMs, 10, true);
  w.Add(t += 10 * kMs, 5000, true);  // the burst
  const int64_t burst_ts = t;
  ASSERT_TRUE(w.peak(&peak));
  EXPECT_EQ(peak, 5000);
  // Still visible for the whole window.
  while (t < burst_ts + 15 * kSec) {
    w.Add(t += 10 * kMs, 10, true);
    ASSERT_TRUE(w.peak(&peak));
    ASSERT_EQ(peak, 5000) << "at +" << (t - burst_ts) / kMs << " ms";
  }
  // Gone at most one bucket (1 s) after the window.
  while (t < burst_ts + 16 * kSec + 10 * kMs) w.Add(t += 10 * kMs, 10, true);
  ASSERT_TRUE(w.peak(&peak));
  EXPECT_EQ(peak, 10);
}

TEST(PeakWindowTest, InvalidIntervalsDoNotCount) {
  PeakWindow w(PeakGeometry::For(absl::Seconds(2)));
  double peak;
  w.Add(kSec, 1e9, false);
  EXPECT_FALSE(w.peak(&peak));
  w.Add(kSec + 10 * kMs, 3, true);
  ASSERT_TRUE(w.peak(&peak));
  EXPECT_EQ(peak, 3);
  // After the window with only invalid intervals: no peak at all.
  w.Add(10 * kSec, 0, false);
  EXPECT_FALSE(w.peak(&peak));
}

// Buckets are [k x width, (k + 1) x width): a peak leaves the window exactly
// when an interval ends in the bucket that pushes its own out, also for
// timestamps before the epoch and after a step backwards.
TEST(PeakWindowTest, BucketBoundariesAreExact) {
  for (const int64_t base : {int64_t{0}, -10 * kSec, 1'700'000'000 * kSec}) {
    PeakWindow w(PeakGeometry::For(absl::Seconds(2)));  // 1 s buckets, 3 of them
    double peak = 0;
    w.Add(base + 1500 * kMs, 7, true);  // bucket 1
    w.Add(base + 2 * kSec, 1, true);
    w.Add(base + 3 * kSec - 1, 1, true);
    w.Add(base + 1 * kSec, 1, true);  // a step back: counted in the current bucket
    w.Add(base + 3 * kSec, 1, true);  // bucket 3: buckets 1..3 in the window
    w.Add(base + 4 * kSec - 1, 1, true);
    ASSERT_TRUE(w.peak(&peak));
    EXPECT_EQ(peak, 7) << base;
    w.Add(base + 4 * kSec, 1, true);  // bucket 4: bucket 1 is out
    ASSERT_TRUE(w.peak(&peak));
    EXPECT_EQ(peak, 1) << base;
  }
}

TEST(BurstWindowTest, FactorAndFloor) {
  BurstWindow b;
  int64_t t = 50 * kSec;
  const int64_t dt = 10 * kMs;
  // 1 s of a steady 1000/s (10 per interval).
  for (int i = 0; i < 150; ++i) EXPECT_FALSE(b.Add(t += dt, dt, 10, 1000, true, 8, 100));
  double mean;
  ASSERT_TRUE(b.last_mean(&mean));
  EXPECT_NEAR(mean, 1000, 1);
  // 7x the mean: not a burst; 9x: a burst.
  EXPECT_FALSE(b.Add(t += dt, dt, 70, 7000, true, 8, 100));
  EXPECT_TRUE(b.Add(t += dt, dt, 90, 9000, true, 8, 100));
  // 9x but under the absolute floor: not a burst.
  EXPECT_FALSE(b.Add(t += dt, dt, 90, 9000, true, 8, 1e6));
  // Invalid intervals are never bursts.
  EXPECT_FALSE(b.Add(t += dt, dt, 1e9, 1e11, false, 8, 100));
}

TEST(BurstWindowTest, NeedsHalfASecondOfHistory) {
  BurstWindow b;
  int64_t t = 7 * kSec;
  const int64_t dt = 10 * kMs;
  for (int i = 0; i < 20; ++i) b.Add(t += dt, dt, 0, 0, true, 8, 1);
  EXPECT_FALSE(b.Add(t += dt, dt, 1000, 1e5, true, 8, 1));  // only 200 ms before it
  for (int i = 0; i < 60; ++i) b.Add(t += dt, dt, 0, 0, true, 8, 1);
  EXPECT_TRUE(b.Add(t += dt, dt, 1000, 1e5, true, 8, 1));
}

// The window as it was before its sums were kept between Adds: the ring
// scanned whole on every Add. The kept sums must give the same mean to the bit.
class ScanningBurstWindow {
 public:
  bool Add(int64_t ts_ns, int64_t dt_ns, double delta, double rate, bool valid, double factor,
           double floor) {
    const int64_t hi = FloorDiv(ts_ns - dt_ns, BurstWindow::kBucketNs);
    const int64_t lo = hi - 10;
    double sum = 0;
    int64_t covered = 0;
    for (const Bucket& b : ring_) {
      if (b.index == INT64_MIN || b.index < lo || b.index > hi) continue;
      sum += b.delta;
      covered += b.dt_ns;
    }
    last_mean_valid_ = covered >= BurstWindow::kBucketNs * 5;
    last_mean_ = covered > 0 ? sum * 1e9 / static_cast<double>(covered) : 0;
    if (!valid || dt_ns <= 0) return false;
    const bool burst = last_mean_valid_ && rate > factor * last_mean_ && rate > floor;
    const int64_t idx = FloorDiv(ts_ns, BurstWindow::kBucketNs);
    int64_t m = idx % BurstWindow::kBuckets;
    Bucket& slot = ring_[m < 0 ? m + BurstWindow::kBuckets : m];
    if (slot.index != idx) slot = {idx, 0, 0};
    slot.delta += delta;
    slot.dt_ns += dt_ns;
    return burst;
  }
  bool last_mean(double* out) const {
    *out = last_mean_;
    return last_mean_valid_;
  }

 private:
  static int64_t FloorDiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
  struct Bucket {
    int64_t index = INT64_MIN;
    double delta = 0;
    int64_t dt_ns = 0;
  };
  Bucket ring_[BurstWindow::kBuckets];
  double last_mean_ = 0;
  bool last_mean_valid_ = false;
};

// Random runs of intervals: poll periods from 1 ms to 1.5 s (mostly 10 ms),
// clock steps back and forth, invalid intervals, integer deltas small and
// beyond 2^47, fractional deltas (scaled counters), NaN and infinity. Every
// Add's verdict and mean equal the scanning window's, to the bit.
TEST(BurstWindowTest, KeptSumsEqualAScanOfTheRing) {
  std::mt19937_64 rng(20261202);
  for (int run = 0; run < 400; ++run) {
    BurstWindow kept;
    ScanningBurstWindow scan;
    int64_t ts = static_cast<int64_t>(rng() % (1000 * kSec)) - 500 * kSec;
    const int mode = run % 5;  // 0, 1: integers; 2: fractions; 3: mixed; 4: huge and odd
    for (int i = 0; i < 3000; ++i) {
      int64_t dt = 10 * kMs;
      const uint64_t r = rng() % 100;
      if (r < 5)
        dt = static_cast<int64_t>(rng() % (1500 * kMs)) + 1;
      else if (r < 8)
        dt = static_cast<int64_t>(rng() % kMs) + 1;
      else if (r == 8)
        dt = -static_cast<int64_t>(rng() % (3 * kSec));  // clock step back
      else if (r == 9)
        dt = 0;
      ts += dt;
      double delta = static_cast<double>(rng() % 1000);
      if (mode == 1 && rng() % 50 == 0) delta = static_cast<double>(rng() % (uint64_t{1} << 50));
      if (mode == 2) delta = static_cast<double>(rng() % 100000) * 0.001;
      if (mode == 3 && rng() % 20 == 0) delta += 0.25;
      if (mode == 4) {
        const uint64_t k = rng() % 40;
        if (k == 0)
          delta = std::numeric_limits<double>::quiet_NaN();
        else if (k == 1)
          delta = std::numeric_limits<double>::infinity();
        else if (k == 2)
          delta = 140737488355328.0 - static_cast<double>(rng() % 3);  // ~2^47
        else if (k == 3)
          delta = -static_cast<double>(rng() % 5);
        else if (k == 4)
          delta = 1e300;
      }
      const bool valid = rng() % 50 != 0;
      const double rate = dt > 0 ? delta * 1e9 / static_cast<double>(dt) : 0;
      const double factor = 2 + static_cast<double>(rng() % 3);
      const bool a = kept.Add(ts, dt, delta, rate, valid, factor, 10);
      const bool b = scan.Add(ts, dt, delta, rate, valid, factor, 10);
      ASSERT_EQ(a, b) << "run " << run << " add " << i;
      double ma, mb;
      ASSERT_EQ(kept.last_mean(&ma), scan.last_mean(&mb)) << "run " << run << " add " << i;
      if (std::isnan(mb)) {
        ASSERT_TRUE(std::isnan(ma)) << "run " << run << " add " << i;
      } else {
        ASSERT_EQ(std::memcmp(&ma, &mb, sizeof(double)), 0)
            << "run " << run << " add " << i << ": " << ma << " vs " << mb;
      }
    }
  }
}

Signal EcnSignal() {
  return *MapCounter({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""});
}

TEST(StoreAggregatesTest, FortyMillisecondBurstIsPeakAndCountsIntervals) {
  Store store;
  SeriesId id =
      store.Register({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""}, EcnSignal());
  int64_t t = 1000 * kSec;
  uint64_t v = 1000;
  for (int i = 0; i < 200; ++i) store.Append(id, t += 10 * kMs, v += 1);   // 100/s
  for (int i = 0; i < 4; ++i) store.Append(id, t += 10 * kMs, v += 5000);  // 500k/s
  for (int i = 0; i < 300; ++i) store.Append(id, t += 10 * kMs, v += 1);
  SeriesState st = store.Get(id)->state;
  ASSERT_TRUE(st.peak_valid);
  EXPECT_DOUBLE_EQ(st.peak_rate, 500000);
  EXPECT_EQ(st.microbursts, 4u);
  // Several readers: reading changes nothing.
  EXPECT_EQ(store.Get(id)->state.microbursts, 4u);
  EXPECT_EQ(store.Snapshot()[0].state.peak_rate, 500000);
  // 16 s later the peak has expired.
  for (int i = 0; i < 1700; ++i) store.Append(id, t += 10 * kMs, v += 1);
  st = store.Get(id)->state;
  EXPECT_NEAR(st.peak_rate, 100, 1e-6);
  EXPECT_EQ(st.microbursts, 4u);
}

TEST(StoreAggregatesTest, GaugesHaveNoAggregates) {
  Store store;
  Signal g = EcnSignal();
  g.semantics = {CounterKind::kGauge, 64};
  SeriesId id = store.Register({"x", "g", "", 0, ""}, g);
  for (int i = 0; i < 100; ++i) store.Append(id, (i + 1) * 10 * kMs, i % 2 ? 1000000 : 0);
  SeriesState st = store.Get(id)->state;
  EXPECT_FALSE(st.peak_valid);
  EXPECT_EQ(st.microbursts, 0u);
}

TEST(StoreAggregatesTest, PauseSecondsRateIsTheFraction) {
  // Pause time in microseconds, scaled 1e-6: its rate in s/s is the paused fraction.
  Signal pause = EcnSignal();
  pause.name = "pfc_pause_seconds";
  pause.scale = 1e-6;
  Store store;
  SeriesId id = store.Register({"ethtool", "rx_prio3_pause_duration", "", 0, "eth0"}, pause);
  int64_t t = 10 * kSec;
  uint64_t us = 0;
  for (int i = 0; i < 100; ++i) store.Append(id, t += 10 * kMs, us += 100);  // 1 % paused
  store.Append(id, t += 10 * kMs, us += 7500);                               // 75 %
  for (int i = 0; i < 10; ++i) store.Append(id, t += 10 * kMs, us += 100);
  SeriesState st = store.Get(id)->state;
  ASSERT_TRUE(st.peak_valid);
  EXPECT_NEAR(st.peak_rate, 0.75, 1e-9);
  EXPECT_EQ(st.microbursts, 1u);  // 75 % > 8 x 1 % and > the 5 % floor
}

TEST(BurstFloorTest, TableAndDefault) {
  EXPECT_EQ(BurstFloorFor("ecn_marked_packets"), 1e3);
  EXPECT_EQ(BurstFloorFor("pfc_pause_seconds"), 0.05);
  EXPECT_EQ(BurstFloorFor("no_such_signal"), kDefaultBurstFloor);
}

}  // namespace
}  // namespace aggregates_test
}  // namespace fabricscope
