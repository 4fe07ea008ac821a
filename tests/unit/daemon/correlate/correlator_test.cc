#include "daemon/correlate/correlator.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace correlator_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT = 1'700'000'000 * kSec;  // an arbitrary unix time

Signal SignalFor(const SeriesKey& key) {
  auto s = MapCounter(key);
  EXPECT_TRUE(s.has_value()) << key.source << "/" << key.name;
  return *s;
}

SeriesKey PauseKey(const std::string& netdev, int prio) {
  return {"ethtool", absl::StrCat("rx_prio", prio, "_pause_duration"), "", 0, netdev};
}
SeriesKey EcnKey(const std::string& device) {
  return {"hw_counters", "np_ecn_marked_roce_packets", device, 1, ""};
}
SeriesKey BytesKey(const std::string& device) {
  return {"counters", "port_xmit_data", device, 1, ""};
}

// A store with ports mlx5_0/1 (eth0) and mlx5_1/1 (eth1).
class CorrelatorTest : public ::testing::Test {
 protected:
  CorrelatorTest() {
    ports_.Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "100 Gb/sec", true});
    ports_.Upsert({"mlx5_1", 1, "eth1", "Ethernet", "ACTIVE", "100 Gb/sec", true});
  }

  SeriesId Add(const SeriesKey& key) { return store_.Register(key, SignalFor(key)); }

  // Appends samples every `step` from `from` to `to` (inclusive) with a value
  // given by f(ts).
  template <typename F>
  void Fill(SeriesId id, int64_t from, int64_t to, int64_t step, F f) {
    for (int64_t ts = from; ts <= to; ts += step) store_.Append(id, ts, f(ts));
  }

  Span MakeSpan(int64_t t0, int64_t t1, const std::string& name = "decode_step") {
    Span s;
    s.trace_id[0] = 1;
    s.span_id[0] = 2;
    s.name = name;
    s.kind = SpanKind::kDecodeStep;
    s.start_unix_nano = t0;
    s.end_unix_nano = t1;
    return s;
  }

  Correlator MakeCorrelator(CorrelationOptions o = {}) {
    return Correlator(&store_, &ports_, o, {});
  }

  Store store_;
  PortInventory ports_;
};

// Pause microseconds accumulated: paused for the whole of [burst_from, burst_to).
uint64_t PauseUs(int64_t ts, int64_t burst_from, int64_t burst_to) {
  const int64_t paused = std::clamp(ts, burst_from, burst_to) - burst_from;
  return static_cast<uint64_t>(paused / 1000);
}

TEST(WindowStatsTest, ConstantRateWithFullCoverage) {
  std::vector<Sample> s;
  for (int i = 0; i <= 200; ++i) s.push_back({kT + i * 10 * kMs, uint64_t(i) * 50});  // 5000/s
  WindowStats w = ComputeWindowStats({}, 1.0, s, kT + 1 * kSec, kT + 1200 * kMs, kSec, 3 * kSec);
  EXPECT_NEAR(w.delta, 1000, 1e-6);
  EXPECT_NEAR(w.rate, 5000, 1e-6);
  EXPECT_NEAR(w.baseline_rate, 5000, 1e-6);
  EXPECT_NEAR(w.peak_rate, 5000, 1e-6);
  EXPECT_DOUBLE_EQ(w.coverage, 1.0);
  EXPECT_DOUBLE_EQ(w.baseline_coverage, 1.0);
  EXPECT_EQ(w.resets, 0u);
}

TEST(WindowStatsTest, SpanShorterThanOnePollIntervalGetsTheIntervalsRate) {
  // 100 ms polls; the interval [100ms, 200ms] holds 50 ms of pause.
  std::vector<Sample> s = {{kT, 0}, {kT + 100 * kMs, 0}, {kT + 200 * kMs, 50'000}};
  WindowStats w =
      ComputeWindowStats({}, 1e-6, s, kT + 120 * kMs, kT + 150 * kMs, 100 * kMs, 3 * kSec);
  EXPECT_DOUBLE_EQ(w.coverage, 1.0);
  EXPECT_NEAR(w.rate, 0.5, 1e-9);           // paused half the time
  EXPECT_NEAR(w.delta, 0.05 * 0.3, 1e-12);  // 30% of the interval's 50 ms
  EXPECT_NEAR(w.peak_rate, 0.5, 1e-9);
  // Baseline [20 ms, 120 ms]: 80 ms quiet, then 20 ms of the half-paused interval.
  EXPECT_NEAR(w.baseline_rate, 0.5 * 20 / 100, 1e-9);
  EXPECT_GE(w.baseline_coverage, 0.999);
}

TEST(WindowStatsTest, ZeroLengthSpanIsTreatedAsOneNanosecond) {
  std::vector<Sample> s = {{kT, 0}, {kT + 10 * kMs, 100}};
  WindowStats w = ComputeWindowStats({}, 1.0, s, kT + 5 * kMs, kT + 5 * kMs, 0, 3 * kSec);
  EXPECT_DOUBLE_EQ(w.coverage, 1.0);
  EXPECT_NEAR(w.rate, 10000, 1e-6);
}

TEST(WindowStatsTest, CounterResetInsideTheWindowContributesNoDelta) {
  // 64-bit counter: +100 per 10 ms, reset to 5 at 50 ms, then +100 again.
  std::vector<Sample> s = {{kT, 1000},
                           {kT + 10 * kMs, 1100},
                           {kT + 20 * kMs, 1200},
                           {kT + 30 * kMs, 1300},
                           {kT + 40 * kMs, 1400},
                           {kT + 50 * kMs, 5},
                           {kT + 60 * kMs, 105},
                           {kT + 70 * kMs, 205},
                           {kT + 80 * kMs, 305}};
  WindowStats w = ComputeWindowStats({CounterKind::kCounter64, 64}, 1.0, s, kT + 20 * kMs,
                                     kT + 80 * kMs, 20 * kMs, 3 * kSec);
  EXPECT_EQ(w.resets, 1u);
  EXPECT_NEAR(w.delta, 500, 1e-9);  // 5 valid intervals of 100, never the reset's garbage
  EXPECT_NEAR(w.coverage, 50.0 / 60.0, 1e-9);
  EXPECT_NEAR(w.rate, 10000, 1e-6);  // over the covered 50 ms
}

TEST(WindowStatsTest, Wrap32IsUnwrapped) {
  std::vector<Sample> s = {{kT, 0xFFFFFF00u}, {kT + 10 * kMs, 0x100}};
  WindowStats w =
      ComputeWindowStats({CounterKind::kWrap32, 32}, 1.0, s, kT, kT + 10 * kMs, 0, 3 * kSec);
  EXPECT_NEAR(w.delta, 0x200, 1e-9);
  EXPECT_EQ(w.resets, 0u);
}

TEST(WindowStatsTest, GapsAndMissingSamplesAreNotCovered) {
  std::vector<Sample> s = {{kT, 0}, {kT + 10 * kSec, 100}};
  WindowStats w = ComputeWindowStats({}, 1.0, s, kT + kSec, kT + 2 * kSec, kSec, 3 * kSec);
  EXPECT_DOUBLE_EQ(w.coverage, 0.0);
  EXPECT_DOUBLE_EQ(w.rate, 0.0);
  w = ComputeWindowStats({}, 1.0, {}, kT, kT + kSec, kSec, 3 * kSec);
  EXPECT_DOUBLE_EQ(w.coverage, 0.0);
}

TEST_F(CorrelatorTest, PauseBurstDuringTheSpanIsFabricNamingPortAndPriority) {
  SeriesId p3 = Add(PauseKey("eth1", 3));
  SeriesId p0 = Add(PauseKey("eth1", 0));
  SeriesId e0 = Add(EcnKey("mlx5_0"));
  const int64_t burst_from = kT + 20 * kSec, burst_to = kT + 20 * kSec + 150 * kMs;
  Fill(p3, kT, kT + 30 * kSec, 100 * kMs,
       [&](int64_t ts) { return PauseUs(ts, burst_from, burst_to); });
  Fill(p0, kT, kT + 30 * kSec, 100 * kMs, [](int64_t) { return 7; });
  Fill(e0, kT, kT + 30 * kSec, 10 * kMs, [](int64_t ts) { return (ts - kT) / kMs; });  // 1000/s

  Correlator c = MakeCorrelator();
  SpanCorrelation hit = c.Correlate(MakeSpan(burst_from - 50 * kMs, burst_to + 50 * kMs));
  EXPECT_EQ(hit.verdict, Verdict::kFabric) << hit.reason;
  ASSERT_EQ(hit.Anomalous().size(), 1u);
  const SeriesCorrelation& top = hit.Anomalous()[0];
  EXPECT_EQ(top.signal, "pfc_pause_seconds");
  EXPECT_EQ(top.signal_class, SignalClass::kPause);
  EXPECT_EQ(top.netdev, "eth1");
  EXPECT_EQ(top.priority, "3");
  EXPECT_EQ(top.direction, "rx");
  EXPECT_NEAR(top.pause_fraction, 0.6, 0.01);  // 150 ms of 250 ms
  EXPECT_NEAR(top.stats.delta, 0.15, 0.001);
  EXPECT_GE(top.score, 1.0);
  EXPECT_EQ(hit.series.size(), 3u);

  SpanCorrelation quiet = c.Correlate(MakeSpan(kT + 25 * kSec, kT + 25 * kSec + 250 * kMs));
  EXPECT_EQ(quiet.verdict, Verdict::kClean) << quiet.reason;
  EXPECT_TRUE(quiet.Anomalous().empty());
  EXPECT_EQ(quiet.congestion_series, 3u);
  EXPECT_EQ(quiet.covered_series, 3u);
}

// The correlator remembers each series' class by id across spans: a series
// registered after the first span is classified when first met, and the
// classes of the others stay theirs.
TEST_F(CorrelatorTest, SeriesRegisteredBetweenSpansAreClassified) {
  const int64_t burst_from = kT + 20 * kSec, burst_to = kT + 20 * kSec + 150 * kMs;
  SeriesId e0 = Add(EcnKey("mlx5_0"));
  SeriesId b0 = Add(BytesKey("mlx5_0"));
  Fill(e0, kT, kT + 30 * kSec, 10 * kMs, [](int64_t ts) { return (ts - kT) / kMs; });  // 1000/s
  Fill(b0, kT, kT + 30 * kSec, 10 * kMs, [](int64_t ts) { return (ts - kT) / kMs; });
  Correlator c = MakeCorrelator();
  const Span span = MakeSpan(burst_from - 50 * kMs, burst_to + 50 * kMs);
  SpanCorrelation before = c.Correlate(span);
  EXPECT_EQ(before.verdict, Verdict::kClean) << before.reason;
  const size_t congestion_before = before.congestion_series;

  SeriesId p3 = Add(PauseKey("eth1", 3));
  Fill(p3, kT, kT + 30 * kSec, 100 * kMs,
       [&](int64_t ts) { return PauseUs(ts, burst_from, burst_to); });
  SpanCorrelation after = c.Correlate(span);
  EXPECT_EQ(after.verdict, Verdict::kFabric) << after.reason;
  EXPECT_EQ(after.congestion_series, congestion_before + 1);
  ASSERT_EQ(after.Anomalous().size(), 1u);
  EXPECT_EQ(after.Anomalous()[0].signal_class, SignalClass::kPause);
  EXPECT_EQ(after.Anomalous()[0].netdev, "eth1");
  // The same answer as a correlator that meets every series for the first time.
  SpanCorrelation fresh = MakeCorrelator().Correlate(span);
  ASSERT_EQ(fresh.series.size(), after.series.size());
  for (size_t i = 0; i < fresh.series.size(); ++i) {
    EXPECT_EQ(fresh.series[i].signal, after.series[i].signal) << i;
    EXPECT_EQ(fresh.series[i].signal_class, after.series[i].signal_class) << i;
    EXPECT_EQ(fresh.series[i].score, after.series[i].score) << i;
  }
}

TEST_F(CorrelatorTest, RateIsJudgedAgainstBaselineAndFloor) {
  SeriesId e = Add(EcnKey("mlx5_0"));
  // 2000/s steadily (above the 1000/s floor), 20000/s in [20s, 20.5s].
  uint64_t v = 0;
  for (int64_t ts = kT; ts <= kT + 30 * kSec; ts += 10 * kMs) {
    store_.Append(e, ts, v);
    const bool burst = ts >= kT + 20 * kSec && ts < kT + 20 * kSec + 500 * kMs;
    v += burst ? 200 : 20;
  }
  Correlator c = MakeCorrelator();
  SpanCorrelation steady = c.Correlate(MakeSpan(kT + 15 * kSec, kT + 15 * kSec + 500 * kMs));
  EXPECT_EQ(steady.verdict, Verdict::kClean) << steady.reason;
  ASSERT_FALSE(steady.series.empty());
  EXPECT_NEAR(steady.series[0].stats.rate, 2000, 1);
  EXPECT_NEAR(steady.series[0].stats.baseline_rate, 2000, 1);
  EXPECT_NEAR(steady.series[0].score, 2000.0 / 6000.0, 0.01);

  SpanCorrelation burst = c.Correlate(MakeSpan(kT + 20 * kSec, kT + 20 * kSec + 500 * kMs));
  EXPECT_EQ(burst.verdict, Verdict::kFabric) << burst.reason;
  EXPECT_EQ(burst.Anomalous()[0].signal, "ecn_marked_packets");
  EXPECT_EQ(burst.Anomalous()[0].device, "mlx5_0");
  EXPECT_NEAR(burst.Anomalous()[0].stats.rate, 20000, 50);
  EXPECT_NEAR(burst.Anomalous()[0].stats.peak_rate, 20000, 50);

  // A higher floor silences it.
  CorrelationOptions o;
  ASSERT_TRUE(ParseFloors("ecn=50000", &o.floors).ok());
  EXPECT_EQ(
      MakeCorrelator(o).Correlate(MakeSpan(kT + 20 * kSec, kT + 20 * kSec + 500 * kMs)).verdict,
      Verdict::kClean);
}

TEST_F(CorrelatorTest, SignalsAreRankedByScore) {
  SeriesId p3 = Add(PauseKey("eth0", 3));
  SeriesId p5 = Add(PauseKey("eth0", 5));
  Fill(p3, kT, kT + 20 * kSec, 100 * kMs,
       [](int64_t ts) { return PauseUs(ts, kT + 10 * kSec, kT + 10 * kSec + 100 * kMs); });
  Fill(p5, kT, kT + 20 * kSec, 100 * kMs,
       [](int64_t ts) { return PauseUs(ts, kT + 10 * kSec, kT + 10 * kSec + 400 * kMs); });
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(kT + 10 * kSec, kT + 10500 * kMs));
  ASSERT_EQ(r.Anomalous().size(), 2u);
  EXPECT_EQ(r.Anomalous()[0].priority, "5");
  EXPECT_EQ(r.Anomalous()[1].priority, "3");
  EXPECT_GT(r.Anomalous()[0].score, r.Anomalous()[1].score);
}

// The storm of issue 35: eth0 paused 94 % of the span on priority 3 while
// xmit_wait, idle before (baseline 0/s), counts 124M ticks/s: judged only
// against its floor, its score (124x the floor) is far above the pause's
// (0.94 / 0.05 = 18.8), yet the pause leads, in every run; both are anomalous.
TEST_F(CorrelatorTest, AZeroBaselineNeverOutranksThePauseThatExplainsTheStall) {
  SeriesId pause = Add(PauseKey("eth0", 3));
  SeriesKey wait_key{"counters", "port_xmit_wait", "mlx5_0", 1, ""};
  SeriesId wait = Add(wait_key);
  const int64_t s0 = kT + 10 * kSec, s1 = kT + 10 * kSec + 622 * kMs;
  Fill(pause, kT, kT + 20 * kSec, 10 * kMs, [&](int64_t ts) {
    // 94 % of each 10 ms inside the span.
    const int64_t in = std::clamp(ts, s0, s1) - s0;
    return static_cast<uint64_t>(in / 1000 * 94 / 100);
  });
  Fill(wait, kT, kT + 20 * kSec, 10 * kMs, [&](int64_t ts) {
    const int64_t in = std::clamp(ts, s0, s1) - s0;
    return static_cast<uint64_t>(static_cast<double>(in) * 0.124);  // 124M ticks/s
  });
  const SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(s0, s1));
  EXPECT_EQ(r.verdict, Verdict::kFabric) << r.reason;
  const auto top = r.Anomalous();
  ASSERT_EQ(top.size(), 2u) << r.reason;
  EXPECT_EQ(top[0].signal, "pfc_pause_seconds");
  EXPECT_FALSE(top[0].no_baseline);
  EXPECT_EQ(top[1].raw_name, "port_xmit_wait");
  EXPECT_TRUE(top[1].no_baseline);
  EXPECT_GT(top[1].score, top[0].score);  // its score alone would have led
}

// The demo's storm as it came out once the learner had a baseline: xmit_wait
// at 217k ticks/s before the span (an earlier episode in its baseline
// window) and 119M/s in it scores ~180 against that baseline, the pause
// (95 % of the span) ~19: the pause fraction still leads, whatever the
// baseline window held; the rate follows.
TEST_F(CorrelatorTest, APauseFractionLeadsRatesJudgedAgainstABaseline) {
  SeriesId pause = Add(PauseKey("eth0", 3));
  SeriesKey wait_key{"counters", "port_xmit_wait", "mlx5_0", 1, ""};
  SeriesId wait = Add(wait_key);
  const int64_t s0 = kT + 10 * kSec, s1 = kT + 10 * kSec + 630 * kMs;
  Fill(pause, kT, kT + 20 * kSec, 10 * kMs, [&](int64_t ts) {
    const int64_t in = std::clamp(ts, s0, s1) - s0;
    return static_cast<uint64_t>(in / 1000 * 95 / 100);
  });
  Fill(wait, kT, kT + 20 * kSec, 10 * kMs, [&](int64_t ts) {
    const int64_t in = std::clamp(ts, s0, s1) - s0;
    const double before = static_cast<double>(std::min(ts, s0) - kT) * 217e3 / 1e9;
    const double after = static_cast<double>(std::max(ts, s1) - s1) * 217e3 / 1e9;
    return static_cast<uint64_t>(before + after + static_cast<double>(in) * 0.119);
  });
  const SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(s0, s1));
  EXPECT_EQ(r.verdict, Verdict::kFabric) << r.reason;
  const auto top = r.Anomalous();
  ASSERT_EQ(top.size(), 2u) << r.reason;
  EXPECT_EQ(top[0].signal, "pfc_pause_seconds");
  EXPECT_EQ(top[1].raw_name, "port_xmit_wait");
  EXPECT_FALSE(top[1].no_baseline);  // judged against its own baseline
  EXPECT_GT(top[1].score, 5 * top[0].score);
}

TEST_F(CorrelatorTest, SpanShorterThanOnePollInterval) {
  SeriesId p = Add(PauseKey("eth0", 3));
  // Paused 80 ms of the interval [10.0 s, 10.1 s].
  Fill(p, kT, kT + 20 * kSec, 100 * kMs,
       [](int64_t ts) { return PauseUs(ts, kT + 10 * kSec, kT + 10 * kSec + 80 * kMs); });
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(kT + 10020 * kMs, kT + 10030 * kMs));
  EXPECT_EQ(r.verdict, Verdict::kFabric) << r.reason;
  ASSERT_EQ(r.Anomalous().size(), 1u);
  EXPECT_NEAR(r.Anomalous()[0].pause_fraction, 0.8, 1e-6);
  EXPECT_DOUBLE_EQ(r.Anomalous()[0].stats.coverage, 1.0);
}

TEST_F(CorrelatorTest, SpanStraddlingACounterResetStaysCleanWithoutBogusDelta) {
  SeriesId e = Add(EcnKey("mlx5_0"));
  // 1500/s, driver reload at 10.05 s drops the raw value to 3.
  uint64_t v = 1'000'000;
  for (int64_t ts = kT; ts <= kT + 20 * kSec; ts += 10 * kMs) {
    if (ts == kT + 10050 * kMs) v = 3;
    store_.Append(e, ts, v);
    v += 15;
  }
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(kT + 10 * kSec, kT + 10200 * kMs));
  ASSERT_EQ(r.series.size(), 1u);
  const SeriesCorrelation& s = r.series[0];
  EXPECT_EQ(s.stats.resets, 1u);
  EXPECT_NEAR(s.stats.delta, 15 * 19, 1e-6);  // 20 intervals minus the reset one
  EXPECT_NEAR(s.stats.rate, 1500, 1);
  EXPECT_NEAR(s.stats.coverage, 0.95, 1e-9);
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;  // 95% >= the 90% default

  CorrelationOptions strict;
  strict.min_coverage = 1.0;
  SpanCorrelation strict_r =
      MakeCorrelator(strict).Correlate(MakeSpan(kT + 10 * kSec, kT + 10200 * kMs));
  EXPECT_EQ(strict_r.verdict, Verdict::kUnknown);
  ASSERT_EQ(strict_r.blind.size(), 1u);
  EXPECT_EQ(strict_r.blind[0].why, "reset");
}

TEST_F(CorrelatorTest, SpanOlderThanRetentionIsUnknown) {
  StoreOptions tiny;
  tiny.memory_bytes = 64 << 10;  // a few thousand samples: the oldest are evicted
  Store store(tiny);
  PortInventory ports;
  ports.Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "", true});
  SeriesKey k = EcnKey("mlx5_0");
  SeriesId e = store.Register(k, SignalFor(k));
  for (int64_t i = 0; i < 100000; ++i) store.Append(e, kT + i * 10 * kMs, uint64_t(i));
  ASSERT_GT(store.ReadRange(e, 0, INT64_MAX).front().ts_ns, kT + 10 * kSec);
  Correlator c(&store, &ports, {}, {});
  SpanCorrelation old = c.Correlate(MakeSpan(kT + kSec, kT + 2 * kSec));
  EXPECT_EQ(old.verdict, Verdict::kUnknown);
  EXPECT_THAT(old.reason, ::testing::HasSubstr("outside retention"));
  ASSERT_EQ(old.blind.size(), 1u);
  EXPECT_EQ(old.blind[0].why, "outside retention");
  // A recent span is still judged.
  SpanCorrelation recent = c.Correlate(MakeSpan(kT + 990 * kSec, kT + 991 * kSec));
  EXPECT_EQ(recent.verdict, Verdict::kClean) << recent.reason;
  // A span in the future (not polled yet) is unknown too.
  SpanCorrelation future = c.Correlate(MakeSpan(kT + 5000 * kSec, kT + 5001 * kSec));
  EXPECT_EQ(future.verdict, Verdict::kUnknown);
  ASSERT_EQ(future.blind.size(), 1u);
  EXPECT_EQ(future.blind[0].why, "not polled");
}

TEST_F(CorrelatorTest, NoSeriesInScopeIsUnknown) {
  Correlator c = MakeCorrelator();
  SpanCorrelation r = c.Correlate(MakeSpan(kT, kT + kSec));
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_EQ(r.reason, "no congestion series in scope");

  // Only context series (bytes) in scope: still unknown, bytes are not a verdict.
  SeriesId b = Add(BytesKey("mlx5_0"));
  Fill(b, kT - 20 * kSec, kT + 20 * kSec, 10 * kMs, [](int64_t ts) { return (ts - kT) / 1000; });
  r = c.Correlate(MakeSpan(kT, kT + kSec));
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  ASSERT_EQ(r.series.size(), 1u);
  EXPECT_EQ(r.series[0].signal_class, SignalClass::kContext);
  EXPECT_FALSE(r.series[0].anomalous);

  // A hint naming a device without series.
  Span hinted = MakeSpan(kT, kT + kSec);
  hinted.rdma_device = "mlx5_9";
  EXPECT_EQ(c.Correlate(hinted).verdict, Verdict::kUnknown);
}

TEST_F(CorrelatorTest, HintedScopeRestrictsSeries) {
  SeriesId p0 = Add(PauseKey("eth0", 3));
  SeriesId p1 = Add(PauseKey("eth1", 3));
  SeriesId e0 = Add(EcnKey("mlx5_0"));
  SeriesId e1 = Add(EcnKey("mlx5_1"));
  const int64_t bf = kT + 10 * kSec, bt = kT + 10 * kSec + 200 * kMs;
  Fill(p0, kT, kT + 20 * kSec, 100 * kMs, [](int64_t) { return 0; });
  Fill(p1, kT, kT + 20 * kSec, 100 * kMs, [&](int64_t ts) { return PauseUs(ts, bf, bt); });
  Fill(e0, kT, kT + 20 * kSec, 10 * kMs, [](int64_t) { return 0; });
  Fill(e1, kT, kT + 20 * kSec, 10 * kMs, [](int64_t) { return 0; });
  Correlator c = MakeCorrelator();

  Span all = MakeSpan(bf, bt);
  SpanCorrelation r = c.Correlate(all);
  EXPECT_EQ(r.verdict, Verdict::kFabric);
  EXPECT_EQ(r.series.size(), 4u);
  EXPECT_EQ(r.Anomalous()[0].netdev, "eth1");

  Span on0 = all;
  on0.rdma_device = "mlx5_0";
  on0.rdma_port = 1;
  r = c.Correlate(on0);
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;
  ASSERT_EQ(r.series.size(), 2u);  // mlx5_0's ECN and eth0's pause (via the inventory)
  for (const auto& s : r.series) EXPECT_TRUE(s.device == "mlx5_0" || s.netdev == "eth0");

  Span on1 = all;
  on1.rdma_device = "mlx5_1";
  r = c.Correlate(on1);
  EXPECT_EQ(r.verdict, Verdict::kFabric);
  EXPECT_EQ(r.series.size(), 2u);

  Span by_netdev = all;
  by_netdev.netdev = "eth1";
  r = c.Correlate(by_netdev);
  EXPECT_EQ(r.verdict, Verdict::kFabric);
  ASSERT_EQ(r.series.size(), 2u);  // eth1's pause and mlx5_1's ECN (the port on eth1)
  EXPECT_EQ(r.Anomalous()[0].priority, "3");
}

TEST_F(CorrelatorTest, RetransmitsAreCongestionOtherRdmaErrorsAreContext) {
  SeriesKey oos{"hw_counters", "out_of_sequence", "mlx5_0", 1, ""};
  SeriesKey other{"hw_counters", "req_cqe_error", "mlx5_0", 1, ""};
  EXPECT_EQ(ClassifySignal(SignalFor(oos)), SignalClass::kRetransmits);
  EXPECT_EQ(ClassifySignal(SignalFor(other)), SignalClass::kContext);
  EXPECT_EQ(ClassifySignal(SignalFor({"hw_counters", "roce_adp_retrans_to", "mlx5_0", 1, ""})),
            SignalClass::kRetransmits);
  EXPECT_EQ(ClassifySignal(SignalFor({"netdev", "rx_dropped", "", 0, "eth0"})),
            SignalClass::kDrops);
  EXPECT_EQ(ClassifySignal(SignalFor({"netdev", "rx_bytes", "", 0, "eth0"})),
            SignalClass::kContext);
  EXPECT_EQ(ClassifySignal(SignalFor({"counters", "symbol_error", "mlx5_0", 1, ""})),
            SignalClass::kPortErrors);
  EXPECT_EQ(ClassifySignal(SignalFor({"hw_counters", "np_cnp_sent", "mlx5_0", 1, ""})),
            SignalClass::kCnp);
  EXPECT_EQ(ClassifySignal(SignalFor({"hw_counters", "out_of_buffer", "mlx5_0", 1, ""})),
            SignalClass::kDiscards);

  SeriesId o = Add(oos);
  SeriesId x = Add(other);
  // Five out-of-sequence events and many CQE errors inside [10s, 10.1s].
  Fill(o, kT, kT + 20 * kSec, 10 * kMs, [](int64_t ts) { return ts >= kT + 10050 * kMs ? 5 : 0; });
  Fill(x, kT, kT + 20 * kSec, 10 * kMs,
       [](int64_t ts) { return ts >= kT + 10050 * kMs ? 5000 : 0; });
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(kT + 10 * kSec, kT + 10100 * kMs));
  EXPECT_EQ(r.verdict, Verdict::kFabric);
  ASSERT_EQ(r.Anomalous().size(), 1u);
  EXPECT_EQ(r.Anomalous()[0].counter, "out_of_sequence");
  EXPECT_NEAR(r.Anomalous()[0].stats.delta, 5, 1e-9);
}

TEST(StallPolicyTest, FlagOrPerNameThreshold) {
  auto t = StallPolicy::Parse("decode_step=200ms, kv_transfer=1s");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ(StallPolicy::Format(*t), "decode_step=200ms,kv_transfer=1s");
  StallPolicy p(*t);
  Span s;
  s.name = "decode_step";
  s.start_unix_nano = kT;
  s.end_unix_nano = kT + 199 * kMs;
  EXPECT_FALSE(p.IsStall(s));
  s.end_unix_nano = kT + 200 * kMs;
  EXPECT_TRUE(p.IsStall(s));
  s.name = "prefill";
  EXPECT_FALSE(p.IsStall(s));
  s.stall_flag = true;
  EXPECT_TRUE(p.IsStall(s));

  EXPECT_FALSE(StallPolicy::Parse("decode_step").ok());
  EXPECT_FALSE(StallPolicy::Parse("decode_step=fast").ok());
  EXPECT_FALSE(StallPolicy::Parse("decode_step=-1s").ok());
  EXPECT_TRUE(StallPolicy::Parse("").ok());
}

TEST(FloorsTest, ParseValidatesClassAndValue) {
  auto f = CorrelationOptions::DefaultFloors();
  ASSERT_TRUE(ParseFloors("ecn=5, cnp=7.5", &f).ok());
  EXPECT_EQ(f[static_cast<int>(SignalClass::kEcn)], 5);
  EXPECT_EQ(f[static_cast<int>(SignalClass::kCnp)], 7.5);
  EXPECT_FALSE(ParseFloors("bytes=5", &f).ok());
  EXPECT_FALSE(ParseFloors("context=5", &f).ok());
  EXPECT_FALSE(ParseFloors("ecn=0", &f).ok());
  EXPECT_FALSE(ParseFloors("ecn", &f).ok());
  EXPECT_THAT(FormatFloors(CorrelationOptions::DefaultFloors()), ::testing::HasSubstr("ecn=1000"));
}

// ---------------------------------------------------------------------------
// GPU scope.

// Ports mlx5_0/1 (eth0), mlx5_0/2 (eth0b), mlx5_1/1 (eth1), mlx5_2/1 (eth2),
// mlx5_3/1 (eth3); GPU 0 at 1b:00.0 is PIX to mlx5_0, GPU 1 at 3d:00.0 is PXB
// to mlx5_1 and mlx5_2 and NODE to mlx5_0, GPU 2 at 9a:00.0 has no affinity
// entries, GPU 3 at b0:00.0 is PIX to mlx5_9 (not in the inventory).
class GpuScopeTest : public ::testing::Test {
 protected:
  GpuScopeTest() {
    ports_ = {{"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "", true},
              {"mlx5_0", 2, "eth0b", "Ethernet", "ACTIVE", "", true},
              {"mlx5_1", 1, "eth1", "Ethernet", "ACTIVE", "", true},
              {"mlx5_2", 1, "eth2", "Ethernet", "ACTIVE", "", true},
              {"mlx5_3", 1, "eth3", "Ethernet", "ACTIVE", "", true}};
    topo_.gpus = {{"0000:1b:00.0", 0, "nvidia", "H100", 0},
                  {"0000:3d:00.0", 1, "nvidia", "H100", 0},
                  {"0000:9a:00.0", 2, "nvidia", "H100", 1},
                  {"0000:b0:00.0", 3, "nvidia", "H100", 1}};
    auto add = [this](const char* gpu, int index, const char* device, PciRelation r) {
      topo_.affinity.push_back({gpu, index, device, r});
    };
    // Listed farthest first: the order of the entries must not matter.
    add("0000:1b:00.0", 0, "mlx5_3", PciRelation::kSys);
    add("0000:1b:00.0", 0, "mlx5_2", PciRelation::kSys);
    add("0000:1b:00.0", 0, "mlx5_1", PciRelation::kNode);
    add("0000:1b:00.0", 0, "mlx5_0", PciRelation::kPix);
    add("0000:3d:00.0", 1, "mlx5_3", PciRelation::kSys);
    add("0000:3d:00.0", 1, "mlx5_0", PciRelation::kNode);
    add("0000:3d:00.0", 1, "mlx5_1", PciRelation::kPxb);
    add("0000:3d:00.0", 1, "mlx5_2", PciRelation::kPxb);
    add("0000:b0:00.0", 3, "mlx5_9", PciRelation::kPix);
  }

  static Span WithGpu(const std::string& gpu) {
    Span s;
    s.gpu = gpu;
    return s;
  }
  static SeriesKey Dev(const std::string& device, uint32_t port) {
    return {"hw_counters", "np_ecn_marked_roce_packets", device, port, ""};
  }
  static SeriesKey Net(const std::string& netdev) {
    return {"ethtool", "rx_prio3_pause_duration", "", 0, netdev};
  }
  // Which of the inventory's ports (by device/port and by netdev) are in scope.
  std::vector<std::string> InScope(const SpanScope& scope) const {
    std::vector<std::string> out;
    for (const PortInfo& p : ports_) {
      if (scope.Contains(Dev(p.device, p.port))) out.push_back(absl::StrCat(p.device, "/", p.port));
      if (scope.Contains(Net(p.netdev))) out.push_back(p.netdev);
    }
    return out;
  }

  std::vector<PortInfo> ports_;
  HostTopology topo_;
};

TEST_F(GpuScopeTest, GpuHintScopesToThePixNicAndItsNetdevs) {
  const SpanScope scope(WithGpu("0000:1b:00.0"), ports_, &topo_);
  EXPECT_THAT(InScope(scope), ::testing::ElementsAre("mlx5_0/1", "eth0", "mlx5_0/2", "eth0b"));
  EXPECT_EQ(scope.description(), "NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1, mlx5_0/2");
}

TEST_F(GpuScopeTest, EveryBusIdFormAndTheIndexNameTheSameGpu) {
  for (const char* form : {"0000:1b:00.0", "1b:00.0", "00000000:1B:00.0", "0000:1B:00.0", "0"}) {
    const SpanScope scope(WithGpu(form), ports_, &topo_);
    EXPECT_THAT(InScope(scope), ::testing::ElementsAre("mlx5_0/1", "eth0", "mlx5_0/2", "eth0b"))
        << form;
    EXPECT_EQ(scope.description(), "NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1, mlx5_0/2")
        << form;
  }
  const SpanScope by_index(WithGpu("1"), ports_, &topo_);
  EXPECT_THAT(InScope(by_index), ::testing::ElementsAre("mlx5_1/1", "eth1", "mlx5_2/1", "eth2"));
}

TEST_F(GpuScopeTest, PxbBeatsNodeAndEveryDeviceOfTheClosestClassIsInScope) {
  const SpanScope scope(WithGpu("3d:00.0"), ports_, &topo_);
  EXPECT_THAT(InScope(scope), ::testing::ElementsAre("mlx5_1/1", "eth1", "mlx5_2/1", "eth2"));
  EXPECT_EQ(scope.description(), "NICs nearest GPU 0000:3d:00.0 (PXB): mlx5_1/1, mlx5_2/1");
}

TEST_F(GpuScopeTest, RdmaPortNarrowsTheNearestDevicesToThatPort) {
  Span s = WithGpu("0000:1b:00.0");
  s.rdma_port = 2;
  const SpanScope scope(s, ports_, &topo_);
  EXPECT_THAT(InScope(scope), ::testing::ElementsAre("mlx5_0/2", "eth0b"));
  EXPECT_EQ(scope.description(), "NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/2");
}

TEST_F(GpuScopeTest, ExplicitNicHintWinsOverTheGpu) {
  Span by_netdev = WithGpu("0000:1b:00.0");
  by_netdev.netdev = "eth3";
  EXPECT_FALSE(SpanScope::UsesGpuHint(by_netdev));
  const SpanScope a(by_netdev, ports_, &topo_);
  EXPECT_THAT(InScope(a), ::testing::ElementsAre("mlx5_3/1", "eth3"));
  EXPECT_EQ(a.description(),
            "span hint: eth3 (fabricscope.gpu 0000:1b:00.0 not used: an explicit NIC hint wins)");

  Span by_device = WithGpu("0");
  by_device.rdma_device = "mlx5_2";
  by_device.rdma_port = 1;
  const SpanScope b(by_device, ports_, &topo_);
  EXPECT_THAT(InScope(b), ::testing::ElementsAre("mlx5_2/1", "eth2"));
  EXPECT_THAT(b.description(), ::testing::StartsWith("span hint: mlx5_2/1 (fabricscope.gpu 0 "));
  EXPECT_TRUE(SpanScope::UsesGpuHint(WithGpu("0")));
}

TEST_F(GpuScopeTest, UnknownGpuFallsBackToEveryPortAndSaysSo) {
  const std::vector<std::string> every = {"mlx5_0/1", "eth0", "mlx5_0/2", "eth0b",
                                          "mlx5_1/1", "eth1", "mlx5_2/1", "eth2",
                                          "mlx5_3/1", "eth3"};
  const SpanScope by_index(WithGpu("7"), ports_, &topo_);
  EXPECT_EQ(InScope(by_index), every);
  EXPECT_EQ(by_index.description(), "GPU 7 unknown to the topology: every port");

  const SpanScope by_bus(WithGpu("0000:ff:00.0"), ports_, &topo_);
  EXPECT_EQ(InScope(by_bus), every);
  EXPECT_EQ(by_bus.description(), "GPU 0000:ff:00.0 unknown to the topology: every port");

  const SpanScope no_topology(WithGpu("0"), ports_, nullptr);
  EXPECT_EQ(InScope(no_topology), every);
  EXPECT_EQ(no_topology.description(), "GPU 0 unknown to the topology: every port");

  const SpanScope no_affinity(WithGpu("2"), ports_, &topo_);
  EXPECT_EQ(InScope(no_affinity), every);
  EXPECT_EQ(no_affinity.description(), "no NIC placement known for GPU 0000:9a:00.0: every port");
}

TEST_F(GpuScopeTest, NearestDeviceMissingFromTheInventoryIsMatchedByName) {
  const SpanScope scope(WithGpu("3"), ports_, &topo_);
  EXPECT_TRUE(scope.Contains(Dev("mlx5_9", 1)));
  EXPECT_TRUE(InScope(scope).empty());
  EXPECT_EQ(scope.description(), "NICs nearest GPU 0000:b0:00.0 (PIX): mlx5_9");
}

TEST_F(GpuScopeTest, DescriptionsOfTheOtherScopes) {
  EXPECT_EQ(SpanScope(Span{}, ports_, &topo_).description(), "every port");
  EXPECT_EQ(SpanScope(Span{}, {}, nullptr).description(), "every series");
  Span both;
  both.rdma_device = "mlx5_0";
  both.netdev = "eth1";
  EXPECT_EQ(SpanScope(both, ports_, &topo_).description(), "span hint: mlx5_0, eth1");
}

// The correlator reads the topology from the inventory: a burst on the far
// NIC does not make a GPU-scoped span fabric; an unknown GPU sees every port.
TEST_F(CorrelatorTest, GpuHintScopesTheVerdictToTheNearestNic) {
  HostTopology topo;
  topo.gpus = {{"0000:1b:00.0", 0, "nvidia", "H100", 0}};
  topo.affinity = {{"0000:1b:00.0", 0, "mlx5_0", PciRelation::kPix},
                   {"0000:1b:00.0", 0, "mlx5_1", PciRelation::kSys}};
  ports_.SetTopology(topo);
  SeriesId p0 = Add(PauseKey("eth0", 3));
  SeriesId p1 = Add(PauseKey("eth1", 3));
  const int64_t bf = kT + 10 * kSec, bt = kT + 10 * kSec + 200 * kMs;
  Fill(p0, kT, kT + 20 * kSec, 100 * kMs, [](int64_t) { return 0; });
  Fill(p1, kT, kT + 20 * kSec, 100 * kMs, [&](int64_t ts) { return PauseUs(ts, bf, bt); });
  Correlator c = MakeCorrelator();

  Span near = MakeSpan(bf, bt);
  near.gpu = "00000000:1B:00.0";
  SpanCorrelation r = c.Correlate(near);
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;
  ASSERT_EQ(r.series.size(), 1u);
  EXPECT_EQ(r.series[0].netdev, "eth0");
  EXPECT_EQ(r.scope, "NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1");

  Span unknown = MakeSpan(bf, bt);
  unknown.gpu = "5";
  r = c.Correlate(unknown);
  EXPECT_EQ(r.verdict, Verdict::kFabric);
  EXPECT_EQ(r.series.size(), 2u);
  EXPECT_EQ(r.scope, "GPU 5 unknown to the topology: every port");

  r = c.Correlate(MakeSpan(bf, bt));
  EXPECT_EQ(r.verdict, Verdict::kFabric);
  EXPECT_EQ(r.scope, "every port");
}

// ---------------------------------------------------------------------------
// Blind series (correlator.h "Blind series").

constexpr uint64_t kSat32 = 4294967295u;

SeriesKey XmitWaitKey(const std::string& device) {
  return {"counters", "port_xmit_wait", device, 1, ""};
}
SeriesKey CnpKey(const std::string& device) {
  return {"hw_counters", "np_cnp_sent", device, 1, ""};
}

// A 64-bit source of the same signal as counters/port_xmit_wait (the IB
// PortCountersExtended form; no collector reads it yet, the correlator must
// prefer it all the same).
Signal XmitWait64Signal() {
  Signal s = SignalFor(XmitWaitKey("mlx5_0"));
  s.semantics = CounterSemantics{CounterKind::kCounter64, 64};
  return s;
}

TEST(WindowStatsTest, UncoveredPartsSayWhy) {
  const CounterSemantics sat{CounterKind::kSaturating, 32};
  // Saturated throughout.
  std::vector<Sample> s;
  for (int64_t ts = kT; ts <= kT + 3 * kSec; ts += 100 * kMs) s.push_back({ts, kSat32});
  WindowStats w = ComputeWindowStats(sat, 1.0, s, kT + kSec, kT + 2 * kSec, kSec, 3 * kSec);
  EXPECT_DOUBLE_EQ(w.coverage, 0.0);
  EXPECT_EQ(w.saturated_ns, kSec);
  EXPECT_EQ(w.reset_ns + w.gap_ns + w.before_first_ns + w.after_last_ns, 0);
  // A reset in the interval [1.0 s, 1.1 s] of a 64-bit counter.
  s.clear();
  for (int64_t ts = kT; ts <= kT + 3 * kSec; ts += 100 * kMs) {
    s.push_back({ts, static_cast<uint64_t>(ts >= kT + 1100 * kMs ? (ts - kT) / kMs : 1000000)});
  }
  w = ComputeWindowStats({}, 1.0, s, kT + kSec, kT + 1200 * kMs, kSec, 3 * kSec);
  EXPECT_EQ(w.reset_ns, 100 * kMs);
  EXPECT_NEAR(w.coverage, 0.5, 1e-9);
  // A gap, data ending inside the window, data starting inside it.
  s = {{kT, 0}, {kT + 10 * kSec, 100}};
  w = ComputeWindowStats({}, 1.0, s, kT + kSec, kT + 2 * kSec, kSec, 3 * kSec);
  EXPECT_EQ(w.gap_ns, kSec);
  w = ComputeWindowStats({}, 1.0, s, kT + 9 * kSec, kT + 11 * kSec, kSec, 20 * kSec);
  EXPECT_EQ(w.after_last_ns, kSec);
  EXPECT_NEAR(w.coverage, 0.5, 1e-9);
  w = ComputeWindowStats({}, 1.0, s, kT - kSec, kT + kSec, kSec, 20 * kSec);
  EXPECT_EQ(w.before_first_ns, kSec);
  w = ComputeWindowStats({}, 1.0, {}, kT, kT + kSec, kSec, 3 * kSec);
  EXPECT_EQ(w.before_first_ns, kSec);
}

TEST(SignalClassTest, BlindGroups) {
  EXPECT_EQ(BlindGroupName(SignalClass::kXmitWait), "pause");
  EXPECT_EQ(BlindGroupName(SignalClass::kPause), "pause");
  EXPECT_EQ(BlindGroupName(SignalClass::kPauseFrames), "pause");
  EXPECT_EQ(BlindGroupName(SignalClass::kCnp), "ecn");
  EXPECT_EQ(BlindGroupName(SignalClass::kDrops), "drops");
  EXPECT_EQ(BlindGroupName(SignalClass::kFec), "port_errors");
  EXPECT_EQ(BlindGroupName(SignalClass::kContext), "");
}

// A RoCE port as real hosts have it: PFC pause time on eth0, ECN on mlx5_0,
// and the 32-bit PMA port_xmit_wait that sits saturated.
class BlindTest : public CorrelatorTest {
 protected:
  void SetUpPort(int64_t burst_from = 0, int64_t burst_to = 0) {
    pause_ = Add(PauseKey("eth0", 3));
    ecn_ = Add(EcnKey("mlx5_0"));
    xmit_ = Add(XmitWaitKey("mlx5_0"));
    Fill(pause_, kT, kT + 30 * kSec, 100 * kMs,
         [&](int64_t ts) { return burst_to > burst_from ? PauseUs(ts, burst_from, burst_to) : 0; });
    Fill(ecn_, kT, kT + 30 * kSec, 10 * kMs, [](int64_t) { return 5; });
    Fill(xmit_, kT, kT + 30 * kSec, 200 * kMs, [](int64_t) { return kSat32; });
  }
  SeriesId pause_ = kInvalidSeries, ecn_ = kInvalidSeries, xmit_ = kInvalidSeries;
};

TEST_F(BlindTest, OnlyASaturatedXmitWaitIsOddCleanWithTheCaveat) {
  SetUpPort();
  Span span = MakeSpan(kT + 20 * kSec, kT + 20 * kSec + 300 * kMs);
  span.rdma_device = "mlx5_0";
  span.rdma_port = 1;
  SpanCorrelation r = MakeCorrelator().Correlate(span);
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;
  ASSERT_EQ(r.blind.size(), 1u);
  EXPECT_EQ(r.blind[0].signal, "ib_port_xmit_wait_ticks");
  EXPECT_EQ(r.blind[0].raw_name, "port_xmit_wait");
  EXPECT_EQ(r.blind[0].device, "mlx5_0");
  EXPECT_EQ(r.blind[0].port, 1u);
  EXPECT_EQ(r.blind[0].why, "saturated");
  EXPECT_THAT(r.reason, ::testing::HasSubstr("mlx5_0/1 port_xmit_wait saturated: blind"));
  EXPECT_THAT(r.reason, ::testing::HasSubstr("2 congestion series covered"));
  EXPECT_EQ(r.congestion_series, 3u);
  EXPECT_EQ(r.covered_series, 2u);
  // The series list says it too.
  bool listed = false;
  for (const SeriesCorrelation& s : r.series) {
    if (s.raw_name == "port_xmit_wait") {
      listed = true;
      EXPECT_EQ(s.blind, "saturated");
      EXPECT_FALSE(s.anomalous);
    } else {
      EXPECT_EQ(s.blind, "");
    }
  }
  EXPECT_TRUE(listed);
  // Without hints (every port) the same.
  EXPECT_EQ(MakeCorrelator().Correlate(MakeSpan(kT + 20 * kSec, kT + 21 * kSec)).verdict,
            Verdict::kClean);
}

TEST_F(BlindTest, TheSameSaturatedCounterDuringAPfcStormIsFabric) {
  const int64_t bf = kT + 20 * kSec, bt = kT + 20 * kSec + 200 * kMs;
  SetUpPort(bf, bt);
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(bf, bt));
  EXPECT_EQ(r.verdict, Verdict::kFabric) << r.reason;
  ASSERT_EQ(r.Anomalous().size(), 1u);
  EXPECT_EQ(r.Anomalous()[0].signal, "pfc_pause_seconds");
  EXPECT_EQ(r.Anomalous()[0].netdev, "eth0");
  ASSERT_EQ(r.blind.size(), 1u);  // still named as a caveat
  EXPECT_EQ(r.blind[0].why, "saturated");
  EXPECT_THAT(r.reason, ::testing::HasSubstr("port_xmit_wait saturated: blind"));
}

TEST_F(BlindTest, AWholeBlindPauseClassIsUnknownNamingWhy) {
  // eth0's pause file became unreadable for [15 s, 25 s] (no samples: a gap)
  // while port_xmit_wait sits saturated: nothing tells whether the port was
  // paused. ECN is still sighted.
  pause_ = Add(PauseKey("eth0", 3));
  ecn_ = Add(EcnKey("mlx5_0"));
  xmit_ = Add(XmitWaitKey("mlx5_0"));
  Fill(pause_, kT, kT + 15 * kSec, 100 * kMs, [](int64_t) { return 0; });
  Fill(pause_, kT + 25 * kSec, kT + 30 * kSec, 100 * kMs, [](int64_t) { return 0; });
  Fill(ecn_, kT, kT + 30 * kSec, 10 * kMs, [](int64_t) { return 5; });
  Fill(xmit_, kT, kT + 30 * kSec, 200 * kMs, [](int64_t) { return kSat32; });
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(kT + 20 * kSec, kT + 21 * kSec));
  EXPECT_EQ(r.verdict, Verdict::kUnknown) << r.reason;
  EXPECT_THAT(r.reason, ::testing::HasSubstr("pause class of mlx5_0/1 is blind"));
  EXPECT_THAT(r.reason, ::testing::HasSubstr("mlx5_0/1 port_xmit_wait saturated"));
  EXPECT_THAT(r.reason, ::testing::HasSubstr("eth0 rx_prio3_pause_duration gap"));
  ASSERT_EQ(r.blind.size(), 2u);
  // Once the pause file reads again the port is clean, with the caveat.
  r = MakeCorrelator().Correlate(MakeSpan(kT + 27 * kSec, kT + 28 * kSec));
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;
  ASSERT_EQ(r.blind.size(), 1u);
}

TEST_F(BlindTest, A64BitSourceOfTheSameSignalIsJudgedOverTheSaturatedOne) {
  // An IB port: port_xmit_wait is its only backpressure signal. Alone and
  // saturated, the port's pause class is blind.
  ecn_ = Add(EcnKey("mlx5_0"));
  xmit_ = Add(XmitWaitKey("mlx5_0"));
  Fill(ecn_, kT, kT + 30 * kSec, 10 * kMs, [](int64_t) { return 5; });
  Fill(xmit_, kT, kT + 30 * kSec, 200 * kMs, [](int64_t) { return kSat32; });
  const Span quiet = MakeSpan(kT + 10 * kSec, kT + 11 * kSec);
  SpanCorrelation r = MakeCorrelator().Correlate(quiet);
  EXPECT_EQ(r.verdict, Verdict::kUnknown) << r.reason;
  EXPECT_THAT(r.reason, ::testing::HasSubstr("pause class of mlx5_0/1 is blind"));

  // The same ticks from a 64-bit source: 1e5/s, 2e6/s during [20 s, 20.5 s].
  const SeriesKey wide{"counters_ext", "port_xmit_wait_64", "mlx5_0", 1, ""};
  const SeriesId w = store_.Register(wide, XmitWait64Signal());
  uint64_t v = 1ull << 40;  // far beyond 32 bits
  for (int64_t ts = kT; ts <= kT + 40 * kSec; ts += 100 * kMs) {
    store_.Append(w, ts, v);
    v += ts >= kT + 20 * kSec && ts < kT + 20500 * kMs ? 200000 : 10000;
  }
  r = MakeCorrelator().Correlate(quiet);
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;
  EXPECT_TRUE(r.blind.empty()) << "the saturated one is superseded, not a caveat";
  EXPECT_EQ(r.congestion_series, 2u);
  const SeriesCorrelation* sat = nullptr;
  for (const SeriesCorrelation& s : r.series) {
    if (s.raw_name == "port_xmit_wait") sat = &s;
  }
  ASSERT_NE(sat, nullptr);
  EXPECT_EQ(sat->superseded_by, "counters_ext/port_xmit_wait_64");
  EXPECT_EQ(sat->blind, "saturated");                     // shown with the series, not judged
  EXPECT_EQ(r.series.back().raw_name, "port_xmit_wait");  // ranked after the judged ones

  r = MakeCorrelator().Correlate(MakeSpan(kT + 20 * kSec, kT + 20500 * kMs));
  EXPECT_EQ(r.verdict, Verdict::kFabric) << r.reason;
  ASSERT_EQ(r.Anomalous().size(), 1u);
  EXPECT_EQ(r.Anomalous()[0].raw_name, "port_xmit_wait_64");
  EXPECT_NEAR(r.Anomalous()[0].stats.rate, 2e6, 1e4);

  // Both sighted (the PMA counter cleared and counting again): the 64-bit
  // one is judged all the same.
  store_.Append(xmit_, kT + 30 * kSec + 100 * kMs, 0);
  for (int64_t ts = kT + 30200 * kMs; ts <= kT + 40 * kSec; ts += 100 * kMs) {
    store_.Append(xmit_, ts, static_cast<uint64_t>((ts - kT - 30 * kSec) / kMs));
  }
  Fill(ecn_, kT + 30 * kSec + 10 * kMs, kT + 40 * kSec, 10 * kMs, [](int64_t) { return 5; });
  r = MakeCorrelator().Correlate(MakeSpan(kT + 31 * kSec, kT + 32 * kSec));
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;
  EXPECT_EQ(r.congestion_series, 2u);
  for (const SeriesCorrelation& s : r.series) {
    if (s.raw_name == "port_xmit_wait") {
      EXPECT_EQ(s.blind, "");
      EXPECT_EQ(s.superseded_by, "counters_ext/port_xmit_wait_64");
    }
  }
}

TEST_F(BlindTest, AResetInsideTheWindowIsBlindReset) {
  // np_cnp_sent counts on; np_ecn_marked resets (driver reload) inside the
  // 100 ms poll interval that holds the whole span.
  SeriesId cnp = Add(CnpKey("mlx5_0"));
  ecn_ = Add(EcnKey("mlx5_0"));
  Fill(cnp, kT, kT + 30 * kSec, 100 * kMs, [](int64_t ts) { return (ts - kT) / kMs; });
  Fill(ecn_, kT, kT + 30 * kSec, 100 * kMs,
       [](int64_t ts) { return ts < kT + 20100 * kMs ? 1000000 + (ts - kT) / kMs : 7; });
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(kT + 20020 * kMs, kT + 20080 * kMs));
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;
  ASSERT_EQ(r.blind.size(), 1u);
  EXPECT_EQ(r.blind[0].signal, "ecn_marked_packets");
  EXPECT_EQ(r.blind[0].why, "reset");
  EXPECT_THAT(r.reason, ::testing::HasSubstr("np_ecn_marked_roce_packets reset: blind"));
}

TEST_F(BlindTest, NotPolledVanishedAndRetention) {
  SeriesId e = Add(EcnKey("mlx5_0"));
  SeriesId c = Add(CnpKey("mlx5_0"));
  Fill(e, kT, kT + 10 * kSec, 100 * kMs, [](int64_t) { return 0; });
  Fill(c, kT, kT + 20 * kSec, 100 * kMs, [](int64_t) { return 0; });
  // A span past the ECN series' last sample: not polled (yet).
  SpanCorrelation r = MakeCorrelator().Correlate(MakeSpan(kT + 10050 * kMs, kT + 10150 * kMs));
  ASSERT_EQ(r.blind.size(), 1u);
  EXPECT_EQ(r.blind[0].why, "not polled");
  EXPECT_EQ(r.verdict, Verdict::kClean) << r.reason;  // CNP covers the ECN group
  // The series is gone (its device vanished).
  store_.SetPresent(e, false);
  r = MakeCorrelator().Correlate(MakeSpan(kT + 10050 * kMs, kT + 10150 * kMs));
  ASSERT_EQ(r.blind.size(), 1u);
  EXPECT_EQ(r.blind[0].why, "vanished");
  // Nothing sighted at all: a span after both series' data.
  store_.SetPresent(e, true);
  r = MakeCorrelator().Correlate(MakeSpan(kT + 50 * kSec, kT + 51 * kSec));
  EXPECT_EQ(r.verdict, Verdict::kUnknown);
  EXPECT_THAT(r.reason, ::testing::HasSubstr("none of the 2 congestion series covers the window"));
}

}  // namespace
}  // namespace correlator_test
}  // namespace fabricscope
