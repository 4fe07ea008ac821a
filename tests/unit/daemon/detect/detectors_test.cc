#include "daemon/detect/detectors.h"

#include <atomic>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/signals.h"
#include "daemon/detect/detector.h"
#include "daemon/detect/episode.h"
#include "daemon/detect/event_log.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"

namespace fabricscope {
namespace detectors_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT0 = 1'700'000'000 * kSec;

// ResolveSeries remembers a series' PortRef per series id; it must return
// what Resolve returns after every change of the pairings (Learn) and of the
// inventory (a refresh), and an id past the table still resolves.
TEST(DetectorContextTest, ResolveSeriesAgreesWithResolve) {
  DetectorOptions options;
  PortInventory ports;
  EventLog events(16, nullptr);
  DetectorContext ctx(options, &ports, &events, nullptr);
  const SeriesKey rdma{"hw_counters", "np_cnp_sent", "mlx5_0", 1, ""};
  const SeriesKey eth{"ethtool", "rx_prio3_pause", "", 0, "ens1f0"};
  auto same = [&](SeriesId id, const SeriesKey& key, int64_t now) {
    const PortRef want = ctx.Resolve(key, now);
    const PortRef& got = ctx.ResolveSeries(id, key, now);
    EXPECT_EQ(got.device, want.device) << id;
    EXPECT_EQ(got.port, want.port) << id;
    EXPECT_EQ(got.netdev, want.netdev) << id;
    EXPECT_EQ(got.link_bps, want.link_bps) << id;
    return got;
  };
  EXPECT_EQ(same(0, eth, kT0).device, "");  // nothing known yet
  EXPECT_EQ(same(1, rdma, kT0).netdev, "");
  const uint64_t before = ctx.generation();
  ctx.Learn({"counters", "port_rcv_data", "mlx5_0", 1, "ens1f0"});
  EXPECT_NE(ctx.generation(), before);
  EXPECT_EQ(same(0, eth, kT0).device, "mlx5_0");
  EXPECT_EQ(same(1, rdma, kT0).netdev, "ens1f0");
  EXPECT_EQ(same(1, rdma, kT0).link_bps, 0);  // no rate in the inventory yet
  ports.Upsert({"mlx5_0", 1, "ens1f0", "Ethernet", "ACTIVE", "100 Gb/sec (4X EDR)"});
  // The inventory is consulted at most once a second: a second later.
  EXPECT_EQ(same(1, rdma, kT0 + 2 * kSec).link_bps, 100e9);
  EXPECT_EQ(same(0, eth, kT0 + 2 * kSec).link_bps, 100e9);
  EXPECT_EQ(same(SeriesTable<int>::kMaxIds + 5, eth, kT0 + 2 * kSec).device, "mlx5_0");
  // Cached now: the same again without a change.
  const uint64_t settled = ctx.generation();
  EXPECT_EQ(same(0, eth, kT0 + 3 * kSec).netdev, "ens1f0");
  EXPECT_EQ(ctx.generation(), settled);
}

TEST(DebouncerTest, StartsAfterOnTimeAndEndsAfterOffTime) {
  Debouncer d(200 * kMs, 200 * kMs);
  using T = Debouncer::Transition;
  int64_t t = 0;
  auto step = [&](bool cond) {
    const T r = d.Update(t, t + 10 * kMs, cond);
    t += 10 * kMs;
    return r;
  };
  for (int i = 0; i < 19; ++i) EXPECT_EQ(step(true), T::kNone) << i;  // 190 ms
  EXPECT_EQ(step(false), T::kNone);                                   // the run broke: start over
  for (int i = 0; i < 19; ++i) EXPECT_EQ(step(true), T::kNone);
  EXPECT_EQ(step(true), T::kStarted);  // 200 ms of condition
  EXPECT_EQ(d.episode_start_ns(), 200 * kMs);
  // A 150 ms dip does not end it (no flapping within the restoration time).
  for (int i = 0; i < 15; ++i) EXPECT_EQ(step(false), T::kNone);
  EXPECT_EQ(step(true), T::kNone);
  EXPECT_TRUE(d.active());
  const int64_t calm_from = t;
  for (int i = 0; i < 19; ++i) EXPECT_EQ(step(false), T::kNone);
  EXPECT_EQ(step(false), T::kEnded);
  EXPECT_EQ(d.episode_end_ns(), calm_from);
  EXPECT_FALSE(d.active());
}

TEST(WindowSumTest, SumsTheTrailingWindowOnly) {
  WindowSum w(1 * kSec);
  for (int64_t t = 10 * kMs; t <= 3 * kSec; t += 10 * kMs) w.Add(t, 10 * kMs, 1);
  double v = 0, s = 0;
  w.Sum(3 * kSec, &v, &s);
  // 10 or 11 buckets of 100 ms, 10 samples each.
  EXPECT_GE(v, 100);
  EXPECT_LE(v, 110);
  EXPECT_NEAR(w.Rate(3 * kSec), 100, 1e-9);
  w.Sum(10 * kSec, &v, &s);
  EXPECT_EQ(v, 0);
}

DetectorEvent Ev(const std::string& detector, const std::string& kind, int64_t start) {
  DetectorEvent e;
  e.detector = detector;
  e.kind = kind;
  e.start_unix_nano = start;
  return e;
}

TEST(EventLogTest, BoundedRingListsOverlapsAndIgnoresEvicted) {
  EventLog log(2, nullptr);
  const uint64_t a = log.Open(Ev("pfc_storm", "storm", 100));
  log.Close(a, 200, 1, "a");
  const uint64_t b = log.Open(Ev("microburst", "burst", 300));
  EXPECT_EQ(log.List(0, 1000, "").size(), 2u);
  EXPECT_EQ(log.List(250, 1000, "").size(), 1u);          // a ended at 200
  EXPECT_EQ(log.List(5000, 6000, "").size(), 1u);         // b is active
  EXPECT_EQ(log.List(0, 1000, "microburst").size(), 1u);  // by detector
  const uint64_t c = log.Open(Ev("pfc_storm", "storm", 400));
  EXPECT_EQ(log.evicted(), 1u);
  log.Close(a, 999, 5, "gone");  // evicted: no effect, no crash
  auto all = log.List(0, 1000, "");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, b);
  EXPECT_EQ(all[1].id, c);
  EXPECT_TRUE(all[0].active());
}

// A store with the detectors attached and helpers that append whole series.
class DetectorsTest : public ::testing::Test {
 protected:
  DetectorsTest() : events_(1000, &metrics_) {}

  void Start(DetectorOptions options = {}) {
    engine_ = std::make_unique<DetectorEngine>(options, &ports_, &events_, &metrics_);
    store_.SetObserver(engine_.get());
    ports_.Upsert({"mlx5_0", 1, "eth2", "Ethernet", "ACTIVE", "100 Gb/sec (4X EDR)", true});
  }

  SeriesId Series(const std::string& source, const std::string& name, const std::string& device,
                  uint32_t port, const std::string& netdev) {
    SeriesKey k{source, name, device, port, netdev};
    auto sig = MapCounter(k);
    EXPECT_TRUE(sig.has_value()) << name;
    return store_.Register(k, *sig);
  }

  // Appends series values at `step` from t0 for `duration`; value(t) is the raw value.
  void Drive(const std::vector<std::pair<SeriesId, std::function<uint64_t(int64_t)>>>& series,
             int64_t t0, int64_t duration, int64_t step) {
    for (int64_t t = t0; t <= t0 + duration; t += step) {
      for (const auto& [id, value] : series) store_.Append(id, t, value(t - kT0));
    }
  }

  std::vector<DetectorEvent> Events(const std::string& detector) {
    return events_.List(0, INT64_MAX, detector);
  }
  // Including the events merged into another episode.
  std::vector<DetectorEvent> AllEvents(const std::string& detector) {
    std::vector<DetectorEvent> out;
    for (DetectorEvent& e : events_.All()) {
      if (e.detector == detector) out.push_back(std::move(e));
    }
    return out;
  }

  double Gauge(const std::string& name, const std::map<std::string, std::string>& labels) {
    for (const auto& fam : metrics_.registry()->Collect()) {
      if (fam.name != name) continue;
      for (const auto& m : fam.metric) {
        bool match = true;
        for (const auto& [k, v] : labels) {
          bool found = false;
          for (const auto& l : m.label) found |= l.name == k && l.value == v;
          match &= found;
        }
        if (match) return m.gauge.value;
      }
    }
    return -1;
  }

  MetricsRegistry metrics_;
  Store store_;
  PortInventory ports_;
  EventLog events_;
  std::unique_ptr<DetectorEngine> engine_;
};

// Pause microseconds accumulated by time t (ns since kT0) for a pause between
// [from, to) that pauses `fraction` of the time.
uint64_t PausedUs(int64_t t, int64_t from, int64_t to, double fraction) {
  if (t <= from) return 0;
  return static_cast<uint64_t>(static_cast<double>(std::min(t, to) - from) * fraction / 1000);
}

TEST_F(DetectorsTest, PfcStormNeedsDetectionTimeAndReportsStartEndAndPeak) {
  Start();
  const SeriesId rx3 = Series("ethtool", "rx_prio3_pause_duration", "", 0, "eth2");
  const SeriesId tx3 = Series("ethtool", "tx_prio3_pause_duration", "", 0, "eth2");
  // rx: a 150 ms full pause at 1 s (too short), then a 95% storm 3.0-3.6 s.
  auto rx = [](int64_t t) {
    return PausedUs(t, 1 * kSec, 1150 * kMs, 1.0) + PausedUs(t, 3 * kSec, 3600 * kMs, 0.95);
  };
  // tx: paused 50% all along: never a storm.
  auto tx = [](int64_t t) { return PausedUs(t, 0, INT64_MAX, 0.5); };
  Drive({{rx3, rx}, {tx3, tx}}, kT0, 5 * kSec, 10 * kMs);

  auto ev = Events("pfc_storm");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "storm");
  EXPECT_EQ(ev[0].netdev, "eth2");
  EXPECT_EQ(ev[0].device, "mlx5_0");  // from the port inventory
  EXPECT_EQ(ev[0].priority, "3");
  EXPECT_EQ(ev[0].direction, "rx");
  EXPECT_EQ(ev[0].start_unix_nano, kT0 + 3 * kSec);
  EXPECT_EQ(ev[0].end_unix_nano, kT0 + 3600 * kMs);
  EXPECT_NEAR(ev[0].peak, 0.95, 1e-6);
  EXPECT_FALSE(ev[0].summary.empty());
  EXPECT_EQ(engine_->ActiveCount("pfc_storm"), 0u);
  EXPECT_EQ(Gauge("fabricscope_pfc_storm_active",
                  {{"netdev", "eth2"}, {"priority", "3"}, {"direction", "rx"}}),
            0);
  EXPECT_EQ(Gauge("fabricscope_pfc_storm_active",
                  {{"netdev", "eth2"}, {"priority", "3"}, {"direction", "tx"}}),
            0);
}

TEST_F(DetectorsTest, PfcStormGaugeIsOneWhileActive) {
  Start();
  const SeriesId rx3 = Series("ethtool", "rx_prio3_pause_duration", "", 0, "eth2");
  Drive({{rx3, [](int64_t t) { return PausedUs(t, 1 * kSec, INT64_MAX, 1.0); }}}, kT0, 2 * kSec,
        10 * kMs);
  EXPECT_EQ(engine_->ActiveCount("pfc_storm"), 1u);
  EXPECT_EQ(Gauge("fabricscope_pfc_storm_active",
                  {{"netdev", "eth2"}, {"priority", "3"}, {"direction", "rx"}}),
            1);
  auto ev = Events("pfc_storm");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].active());
}

// The slow receiver: its NIC pauses the switch (tx) most of the time while
// it is not paused itself: an originator, not a receiver; a victim that is
// paused (rx) and passes pause on (tx) is a receiver, never an originator.
TEST_F(DetectorsTest, PauseRoleOriginatorNeedsItsOwnRxClear) {
  Start();
  const SeriesId tx3 = Series("ethtool", "tx_prio3_pause_duration", "", 0, "eth2");
  const SeriesId rx3 = Series("ethtool", "rx_prio3_pause_duration", "", 0, "eth2");
  const std::map<std::string, std::string> orig = {
      {"netdev", "eth2"}, {"priority", "3"}, {"role", "originator"}};
  const std::map<std::string, std::string> recv = {
      {"netdev", "eth2"}, {"priority", "3"}, {"role", "receiver"}};
  // tx: 90% from 1 s to 4 s; rx: clear until 6 s, then 80% from 6 s with tx
  // 90% again from 6 s (a victim passing pause upstream).
  auto tx = [](int64_t t) {
    return PausedUs(t, 1 * kSec, 4 * kSec, 0.9) + PausedUs(t, 6 * kSec, INT64_MAX, 0.9);
  };
  auto rx = [](int64_t t) { return PausedUs(t, 6 * kSec, INT64_MAX, 0.8); };
  // Before the detection time (1 s) nothing holds; the series exist at 0.
  Drive({{tx3, tx}, {rx3, rx}}, kT0, 1900 * kMs, 100 * kMs);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role", orig), 0);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role", recv), 0);
  Drive({{tx3, tx}, {rx3, rx}}, kT0 + 2 * kSec, 1900 * kMs, 100 * kMs);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role", orig), 1);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role", recv), 0);
  // tx stops at 4 s: the role ends after the restoration time (2 s).
  Drive({{tx3, tx}, {rx3, rx}}, kT0 + 4 * kSec, 9 * kSec, 100 * kMs);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role", orig), 0);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role", recv), 1);
  // The roles are part of the PFC storms on the port (merged into them).
  auto ev = AllEvents("pause_role");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(Events("pause_role").empty());
  for (const DetectorEvent& e : ev) {
    ASSERT_NE(e.merged_into, 0u);
    EXPECT_EQ(events_.All()[e.merged_into - 1].kind, "storm");
  }
  EXPECT_EQ(ev[0].kind, "pause_originator");
  EXPECT_EQ(ev[0].netdev, "eth2");
  EXPECT_EQ(ev[0].device, "mlx5_0");
  EXPECT_EQ(ev[0].priority, "3");
  EXPECT_EQ(ev[0].direction, "tx");
  EXPECT_EQ(ev[0].start_unix_nano, kT0 + 1 * kSec);
  EXPECT_EQ(ev[0].end_unix_nano, kT0 + 4 * kSec);
  EXPECT_NEAR(ev[0].peak, 0.9, 1e-3);
  EXPECT_EQ(ev[1].kind, "pause_receiver");
  EXPECT_EQ(ev[1].direction, "rx");
  EXPECT_EQ(ev[1].start_unix_nano, kT0 + 6 * kSec);
  EXPECT_TRUE(ev[1].active());
}

// Below the role fraction, or with only a short burst, no role holds; the
// thresholds are the options.
TEST_F(DetectorsTest, PauseRoleThresholdsAreTheOptions) {
  DetectorOptions o;
  ASSERT_TRUE(o.Set("pause-role-fraction", "0.95").ok());
  Start(o);
  const SeriesId tx3 = Series("ethtool", "tx_prio3_pause_duration", "", 0, "eth2");
  Drive({{tx3, [](int64_t t) { return PausedUs(t, 0, INT64_MAX, 0.9); }}}, kT0, 5 * kSec,
        100 * kMs);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role",
                  {{"netdev", "eth2"}, {"priority", "3"}, {"role", "originator"}}),
            0);
  EXPECT_TRUE(Events("pause_role").empty());
  ASSERT_TRUE(o.Set("pause-role-clear-fraction", "0.96").ok());
  EXPECT_NE(o.Validate().message().find("pause-role-clear-fraction"), std::string::npos);
}

// The NIC's own pause-storm counters make it an originator (priority "").
TEST_F(DetectorsTest, PauseRoleNicPauseStormEventsMakeAnOriginator) {
  Start();
  const SeriesId warn = Series("ethtool", "tx_pause_storm_warning_events", "", 0, "eth2");
  Drive({{warn,
          [](int64_t t) {
            return static_cast<uint64_t>(std::max<int64_t>(0, t - kSec) / (100 * kMs));
          }}},
        kT0, 2 * kSec, 100 * kMs);
  EXPECT_EQ(Gauge("fabricscope_pfc_pause_role",
                  {{"netdev", "eth2"}, {"priority", ""}, {"role", "originator"}}),
            1);
  auto ev = AllEvents("pause_role");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "pause_originator");
  EXPECT_EQ(ev[0].priority, "");
  // Part of the NIC's pause-storm episode on the port.
  auto storm = Events("pfc_storm");
  ASSERT_EQ(storm.size(), 1u);
  EXPECT_EQ(storm[0].kind, "nic_pause_storm");
  EXPECT_EQ(ev[0].merged_into, storm[0].id);
  EXPECT_EQ(storm[0].signals, (std::vector<std::string>{"pause_storm_events", "pause_originator"}));
}

TEST_F(DetectorsTest, EcnMarkingTooLateButNotWhenMarksRise) {
  Start();
  const SeriesId oob = Series("hw_counters", "out_of_buffer", "mlx5_0", 1, "eth2");
  const SeriesId marks = Series("hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, "eth2");
  // 0-3 s: drops at 5000/s with marks at 20000/s (ECN working); 3-6 s: drops
  // at 5000/s and marks flat.
  auto drops = [](int64_t t) { return static_cast<uint64_t>(t / kMs * 5); };
  auto mark = [](int64_t t) { return static_cast<uint64_t>(std::min(t, 3 * kSec) / kMs * 20); };
  Drive({{oob, drops}, {marks, mark}}, kT0, 6 * kSec, 10 * kMs);
  auto ev = Events("ecn_mistuning");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "marking_too_late");
  EXPECT_EQ(ev[0].device, "mlx5_0");
  EXPECT_EQ(ev[0].port, 1u);
  // The 1 s window needs marks to fade before the condition holds.
  EXPECT_GT(ev[0].start_unix_nano, kT0 + 3 * kSec);
  EXPECT_LT(ev[0].start_unix_nano, kT0 + 4500 * kMs);
  EXPECT_TRUE(ev[0].active());
  EXPECT_EQ(Gauge("fabricscope_ecn_mistuning_active",
                  {{"device", "mlx5_0"}, {"port", "1"}, {"kind", "marking_too_late"}}),
            1);
}

TEST_F(DetectorsTest, EcnTooAggressiveOnlyAtLowUtilization) {
  Start();
  const SeriesId cnp = Series("hw_counters", "rp_cnp_handled", "mlx5_0", 1, "eth2");
  const SeriesId rx = Series("counters", "port_rcv_data", "mlx5_0", 1, "eth2");
  // CNPs at 10000/s throughout. 0-3 s: 90 Gb/s; 3-6 s: 5 Gb/s.
  auto cnps = [](int64_t t) { return static_cast<uint64_t>(t / kMs * 10); };
  auto bytes_over_4 = [](int64_t t) {
    const double busy = static_cast<double>(std::min(t, 3 * kSec)) * 1e-9 * 90e9 / 8;
    const double idle = static_cast<double>(std::max<int64_t>(0, t - 3 * kSec)) * 1e-9 * 5e9 / 8;
    return static_cast<uint64_t>((busy + idle) / 4);
  };
  Drive({{cnp, cnps}, {rx, bytes_over_4}}, kT0, 6 * kSec, 10 * kMs);
  auto ev = Events("ecn_mistuning");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "too_aggressive");
  EXPECT_GT(ev[0].start_unix_nano, kT0 + 3 * kSec);
  EXPECT_NEAR(ev[0].peak, 10000, 500);
}

TEST_F(DetectorsTest, EcnDisabledOnPfcPriority) {
  Start();
  const SeriesId pfc3 = Series("dcb_config", "pfc_enabled_prio3", "", 0, "eth2");
  const SeriesId np3 = Series("dcb_config", "ecn_roce_np_enable_3", "", 0, "eth2");
  const SeriesId rp3 = Series("dcb_config", "ecn_roce_rp_enable_3", "", 0, "eth2");
  store_.Append(pfc3, kT0, 1);
  store_.Append(np3, kT0, 1);
  store_.Append(rp3, kT0, 1);
  EXPECT_TRUE(Events("ecn_mistuning").empty());
  store_.Append(np3, kT0 + 10 * kSec, 0);  // someone turned ECN off on priority 3
  auto ev = Events("ecn_mistuning");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "ecn_disabled_on_pfc_priority");
  EXPECT_EQ(ev[0].priority, "3");
  EXPECT_EQ(ev[0].netdev, "eth2");
  EXPECT_EQ(ev[0].device, "mlx5_0");
  store_.Append(np3, kT0 + 20 * kSec, 1);
  ev = Events("ecn_mistuning");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_FALSE(ev[0].active());
}

TEST_F(DetectorsTest, RetransmitSpikeAgainstItsBaseline) {
  Start();
  const SeriesId oos = Series("hw_counters", "out_of_sequence", "mlx5_0", 1, "eth2");
  const SeriesId seq = Series("hw_counters", "packet_seq_err", "mlx5_0", 1, "eth2");
  // out_of_sequence: 2/s, then 500/s during 40-42 s. packet_seq_err: a steady
  // 50/s (above the floor but its own baseline): never a spike.
  auto o = [](int64_t t) {
    return static_cast<uint64_t>(t / (500 * kMs) +
                                 (std::clamp(t, 40 * kSec, 42 * kSec) - 40 * kSec) / (2 * kMs));
  };
  auto s = [](int64_t t) { return static_cast<uint64_t>(t / (20 * kMs)); };
  Drive({{oos, o}, {seq, s}}, kT0, 50 * kSec, 10 * kMs);
  auto ev = Events("retransmit_spike");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "out_of_sequence");
  EXPECT_GE(ev[0].start_unix_nano, kT0 + 40 * kSec);
  EXPECT_LT(ev[0].start_unix_nano, kT0 + 41 * kSec);
  EXPECT_FALSE(ev[0].active());
  EXPECT_GT(ev[0].end_unix_nano, kT0 + 42 * kSec);
}

TEST_F(DetectorsTest, LinkDownedAndFecCorrectedRising) {
  Start();
  const SeriesId down = Series("ethtool", "link_down_events_phy", "", 0, "eth2");
  const SeriesId bits = Series("ethtool", "rx_corrected_bits_phy", "", 0, "eth2");
  // One link-down at 5 s; corrected bits 100/s, then 1e6/s from 20 s to 25 s.
  auto d = [](int64_t t) { return static_cast<uint64_t>(t >= 5 * kSec ? 1 : 0); };
  auto b = [](int64_t t) {
    return static_cast<uint64_t>(t / (10 * kMs) +
                                 (std::clamp(t, 20 * kSec, 25 * kSec) - 20 * kSec) / 1000);
  };
  Drive({{down, d}, {bits, b}}, kT0, 40 * kSec, 100 * kMs);
  auto ev = Events("link_degradation");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, "link_downed");
  EXPECT_EQ(ev[0].device, "mlx5_0");
  EXPECT_EQ(ev[0].netdev, "eth2");
  EXPECT_EQ(ev[0].start_unix_nano, kT0 + 4900 * kMs);
  EXPECT_FALSE(ev[0].active());
  EXPECT_EQ(ev[1].kind, "fec_corrected_rising");
  EXPECT_GE(ev[1].start_unix_nano, kT0 + 19900 * kMs);
  EXPECT_LT(ev[1].start_unix_nano, kT0 + 21 * kSec);
  EXPECT_FALSE(ev[1].active());
}

TEST_F(DetectorsTest, MicroburstsCloseTogetherAreOneEpisode) {
  Start();
  const SeriesId rx = Series("counters", "port_rcv_data", "mlx5_0", 1, "eth2");
  // 1 GB/s background (octets/4), with 20 ms bursts at 12 GB/s at 2.0 s and
  // 2.1 s (one episode) and at 4.0 s (another).
  auto v = [](int64_t t) {
    double bytes = static_cast<double>(t) * 1e-9 * 1e9;
    for (int64_t b : {2000 * kMs, 2100 * kMs, 4000 * kMs}) {
      bytes += static_cast<double>(std::clamp(t, b, b + 20 * kMs) - b) * 1e-9 * 11e9;
    }
    return static_cast<uint64_t>(bytes / 4);
  };
  Drive({{rx, v}}, kT0, 5 * kSec, 10 * kMs);
  auto ev = Events("microburst");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, "burst");
  EXPECT_EQ(ev[0].device, "mlx5_0");
  EXPECT_EQ(ev[0].direction, "rx");
  EXPECT_EQ(ev[0].start_unix_nano, kT0 + 2000 * kMs);
  EXPECT_EQ(ev[0].end_unix_nano, kT0 + 2120 * kMs);
  EXPECT_NEAR(ev[0].peak, 12e9, 1e8);
  EXPECT_EQ(ev[1].start_unix_nano, kT0 + 4000 * kMs);
}

// A tick's events through OnAppends (Store::Append(tick, readings): one
// engine lock per up to 32 events) and one OnAppend per reading give the same
// episodes: microbursts, a PFC storm, a retransmit spike and a link flap on
// two ports, with series of families no detector reads among them.
TEST(DetectorEngineBatchTest, OnAppendsIsOnAppendPerEvent) {
  struct World {
    MetricsRegistry metrics;
    Store store;
    PortInventory ports;
    EventLog events{1000, &metrics};
    DetectorEngine engine{DetectorOptions{}, &ports, &events, &metrics};
    TickColumn* column = nullptr;
    World() {
      store.SetObserver(&engine);
      ports.Upsert({"mlx5_0", 1, "eth2", "Ethernet", "ACTIVE", "100 Gb/sec (4X EDR)", true});
      ports.Upsert({"mlx5_1", 1, "eth3", "Ethernet", "ACTIVE", "100 Gb/sec (4X EDR)", true});
      column = store.AddTickColumn(absl::Milliseconds(10));
    }
  };
  World one;
  World batch;
  const std::vector<SeriesKey> keys = {
      {"counters", "port_rcv_data", "mlx5_0", 1, "eth2"},
      {"counters", "port_xmit_data", "mlx5_1", 1, "eth3"},
      {"ethtool", "rx_prio3_pause_duration", "", 0, "eth2"},
      {"ethtool", "tx_prio3_pause_duration", "", 0, "eth3"},
      {"hw_counters", "out_of_sequence", "mlx5_0", 1, "eth2"},
      {"hw_counters", "np_ecn_marked_roce_packets", "mlx5_1", 1, "eth3"},
      {"hw_counters", "np_cnp_sent", "mlx5_1", 1, "eth3"},
      {"counters", "link_downed", "mlx5_1", 1, "eth3"},
      {"counters", "port_rcv_packets", "mlx5_0", 1, "eth2"},
      {"hw_counters", "rx_write_requests", "mlx5_0", 1, "eth2"},
  };
  for (const SeriesKey& k : keys) {
    const std::optional<Signal> sig = MapCounter(k);
    ASSERT_TRUE(sig.has_value()) << k.name;
    ASSERT_EQ(one.store.Register(k, *sig), batch.store.Register(k, *sig));
  }
  std::vector<uint64_t> v(keys.size());
  std::mt19937_64 rng(7);
  std::vector<SeriesReading> readings;
  for (int64_t t = 0; t <= 60 * kSec; t += 10 * kMs) {
    const bool burst = (t / (1300 * kMs)) % 3 == 0 && t % (1300 * kMs) < 30 * kMs;
    const bool storm = t > 20 * kSec && t < 23 * kSec;
    v[0] += 2'500'000 + rng() % 100'000 + (burst ? 30'000'000 : 0);
    v[1] += 2'000'000 + rng() % 100'000 + (t % (7 * kSec) < 20 * kMs ? 40'000'000 : 0);
    v[2] += storm ? 9'500 + rng() % 400 : rng() % 50;
    v[3] += 4'000 + rng() % 100;
    v[4] += (t > 40 * kSec && t < 42 * kSec) ? 5 + rng() % 3 : (rng() % 50 == 0 ? 1 : 0);
    v[5] += rng() % 20 + (burst ? 500 : 0);
    v[6] += rng() % 10;
    if (t == 30 * kSec || t == 30 * kSec + 200 * kMs) ++v[7];
    v[8] += 10'000 + rng() % 100;
    v[9] += rng() % 1000;
    readings.clear();
    for (size_t i = 0; i < keys.size(); ++i) {
      readings.push_back({static_cast<SeriesId>(i), v[i]});
    }
    const TickRef t_one = one.store.Tick(one.column, kT0 + t);
    const TickRef t_batch = batch.store.Tick(batch.column, kT0 + t);
    for (const SeriesReading& r : readings) one.store.Append(r.id, t_one, r.raw);
    batch.store.Append(t_batch, readings);
  }
  const std::vector<DetectorEvent> a = one.events.All();
  const std::vector<DetectorEvent> b = batch.events.All();
  ASSERT_EQ(a.size(), b.size());
  std::set<std::string> detectors;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    detectors.insert(a[i].detector);
    EXPECT_EQ(a[i].detector, b[i].detector);
    EXPECT_EQ(a[i].kind, b[i].kind);
    EXPECT_EQ(a[i].device, b[i].device);
    EXPECT_EQ(a[i].netdev, b[i].netdev);
    EXPECT_EQ(a[i].direction, b[i].direction);
    EXPECT_EQ(a[i].start_unix_nano, b[i].start_unix_nano);
    EXPECT_EQ(a[i].end_unix_nano, b[i].end_unix_nano);
    EXPECT_EQ(a[i].detected_unix_nano, b[i].detected_unix_nano);
    EXPECT_EQ(a[i].peak, b[i].peak);
    EXPECT_EQ(a[i].summary, b[i].summary);
    EXPECT_EQ(a[i].signals, b[i].signals);
    EXPECT_EQ(a[i].merged_into, b[i].merged_into);
  }
  // The scenario reached several detectors (else it would prove little).
  EXPECT_GE(detectors.size(), 3u) << absl::StrJoin(detectors, ",");
  EXPECT_EQ(one.engine.ActiveCount(""), batch.engine.ActiveCount(""));
}

TEST_F(DetectorsTest, DisabledDetectorsSeeNothingAndBadOptionsAreNamed) {
  DetectorOptions o;
  o.enabled = {"microburst"};
  Start(o);
  const SeriesId rx3 = Series("ethtool", "rx_prio3_pause_duration", "", 0, "eth2");
  Drive({{rx3, [](int64_t t) { return PausedUs(t, 0, INT64_MAX, 1.0); }}}, kT0, 2 * kSec, 10 * kMs);
  EXPECT_TRUE(Events("pfc_storm").empty());

  DetectorOptions bad;
  bad.enabled = {"pfc_storm", "nope"};
  EXPECT_NE(bad.Validate().message().find("nope"), std::string::npos);
  // A detector's own options are parsed and bounded by its declaration.
  bad = {};
  absl::Status s = bad.Set("microburst-signals", "port_bytes,no_such_signal");
  EXPECT_NE(s.message().find("no_such_signal"), std::string::npos) << s;
  s = bad.Set("pfc-storm-fraction", "0");
  EXPECT_NE(s.message().find("pfc-storm-fraction"), std::string::npos) << s;
  EXPECT_EQ(bad.Set("no-such-option", "1").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(bad.Validate().ok());  // the refused values changed nothing
  EXPECT_TRUE(DetectorOptions{}.Validate().ok());
}

// A storm whose counters stop (the device vanished mid-storm) must not stay
// active, its gauge at 1, forever: it ends at its last sample once it has
// not been judged for 5 s, and a storm after the device returns is a new one.
TEST_F(DetectorsTest, AnEpisodeWhoseCountersStopEndsAtItsLastSample) {
  Start();
  const SeriesId rx3 = Series("ethtool", "rx_prio3_pause_duration", "", 0, "eth2");
  const SeriesId rx4 = Series("ethtool", "rx_prio4_pause_duration", "", 0, "eth3");
  auto storm = [](int64_t t) { return PausedUs(t, 1 * kSec, INT64_MAX, 1.0); };
  auto quiet = [](int64_t) { return uint64_t{0}; };
  const std::map<std::string, std::string> labels = {
      {"netdev", "eth2"}, {"priority", "3"}, {"direction", "rx"}};
  Drive({{rx3, storm}, {rx4, quiet}}, kT0, 2 * kSec, 10 * kMs);
  ASSERT_EQ(engine_->ActiveCount("pfc_storm"), 1u);
  ASSERT_EQ(Gauge("fabricscope_pfc_storm_active", labels), 1);

  // eth2's counters stop; eth3's go on (and drive the detectors' clock).
  Drive({{rx4, quiet}}, kT0 + 2010 * kMs, 3900 * kMs, 10 * kMs);  // to 5.91 s
  EXPECT_EQ(engine_->ActiveCount("pfc_storm"), 1u) << "ended before 5 s without input";
  Drive({{rx4, quiet}}, kT0 + 5920 * kMs, 2500 * kMs, 10 * kMs);  // to 8.42 s
  EXPECT_EQ(engine_->ActiveCount("pfc_storm"), 0u);
  EXPECT_EQ(Gauge("fabricscope_pfc_storm_active", labels), 0);
  auto ev = Events("pfc_storm");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_FALSE(ev[0].active());
  EXPECT_EQ(ev[0].start_unix_nano, kT0 + 1 * kSec);
  EXPECT_EQ(ev[0].end_unix_nano, kT0 + 2 * kSec) << "ends at the last sample it saw";
  EXPECT_NE(ev[0].summary.find("stopped reporting"), std::string::npos) << ev[0].summary;

  // eth2 comes back (its counters restarted from 0) still storming: a new
  // episode, after the detection time again.
  Drive({{rx3, [](int64_t t) { return PausedUs(t, 9 * kSec, INT64_MAX, 1.0); }}, {rx4, quiet}},
        kT0 + 9 * kSec, 1 * kSec, 10 * kMs);
  ev = Events("pfc_storm");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_TRUE(ev[1].active());
  EXPECT_GE(ev[1].start_unix_nano, kT0 + 9 * kSec);
  EXPECT_EQ(Gauge("fabricscope_pfc_storm_active", labels), 1);
}

// With no input appended at all (the host's only device vanished), the
// daemon's tick calls Sweep.
TEST_F(DetectorsTest, SweepEndsStaleEpisodesWithoutAnyAppend) {
  Start();
  const SeriesId rx3 = Series("ethtool", "rx_prio3_pause_duration", "", 0, "eth2");
  Drive({{rx3, [](int64_t t) { return PausedUs(t, 1 * kSec, INT64_MAX, 1.0); }}}, kT0, 2 * kSec,
        10 * kMs);
  ASSERT_EQ(engine_->ActiveCount("pfc_storm"), 1u);
  engine_->Sweep(kT0 + 6 * kSec);
  EXPECT_EQ(engine_->ActiveCount("pfc_storm"), 1u);
  engine_->Sweep(kT0 + 7500 * kMs);
  EXPECT_EQ(engine_->ActiveCount("pfc_storm"), 0u);
  EXPECT_EQ(Events("pfc_storm")[0].end_unix_nano, kT0 + 2 * kSec);
}

// Inputs polled slowly (the configuration tier, every 10 s) are stale only
// after 5 of their own intervals, not after 5 s.
TEST_F(DetectorsTest, SlowInputsAreJudgedStaleByTheirOwnInterval) {
  Start();
  const SeriesId pfc3 = Series("dcb_config", "pfc_enabled_prio3", "", 0, "eth2");
  const SeriesId np3 = Series("dcb_config", "ecn_roce_np_enable_3", "", 0, "eth2");
  const SeriesId rp3 = Series("dcb_config", "ecn_roce_rp_enable_3", "", 0, "eth2");
  const SeriesId hot = Series("ethtool", "rx_prio4_pause_duration", "", 0, "eth3");
  auto run = [&](int64_t from, int64_t to, bool config) {
    for (int64_t t = from; t < to; t += 100 * kMs) {
      if (config && (t - kT0) % (10 * kSec) == 0) {
        store_.Append(pfc3, t, 1);
        store_.Append(np3, t, 0);  // PFC on, ECN off: misconfigured from the start
        store_.Append(rp3, t, 1);
      }
      store_.Append(hot, t, 0);
    }
  };
  run(kT0, kT0 + 61 * kSec, true);
  ASSERT_EQ(Events("ecn_mistuning").size(), 1u);
  EXPECT_EQ(engine_->ActiveCount("ecn_mistuning"), 1u) << "ended while still polled";
  run(kT0 + 61 * kSec, kT0 + 100 * kSec, false);  // the config reads stop after 60 s
  EXPECT_EQ(engine_->ActiveCount("ecn_mistuning"), 1u) << "ended before 5 x 10 s";
  run(kT0 + 100 * kSec, kT0 + 115 * kSec, false);
  EXPECT_EQ(engine_->ActiveCount("ecn_mistuning"), 0u);
  auto ev = Events("ecn_mistuning");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].end_unix_nano, kT0 + 60 * kSec);
}

// Tier threads append different series concurrently while readers list
// events: every series still gets exactly its one storm (run under TSan too).
TEST_F(DetectorsTest, ConcurrentAppendersAndReaders) {
  Start();
  constexpr int kThreads = 4;
  std::vector<SeriesId> ids;
  for (int i = 0; i < kThreads; ++i) {
    ids.push_back(Series("ethtool", absl::StrCat("rx_prio", i, "_pause_duration"), "", 0, "eth2"));
  }
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      (void)events_.List(0, INT64_MAX, "");
      (void)engine_->ActiveCount("");
    }
  });
  std::vector<std::thread> writers;
  for (int i = 0; i < kThreads; ++i) {
    writers.emplace_back([&, i] {
      for (int64_t t = 0; t <= 3 * kSec; t += 10 * kMs) {
        store_.Append(ids[i], kT0 + t, PausedUs(t, 1 * kSec, 2 * kSec, 1.0));
      }
    });
  }
  for (auto& w : writers) w.join();
  done.store(true);
  reader.join();
  // One port: the storms of its priorities are one episode (the others
  // merged into the first).
  ASSERT_EQ(Events("pfc_storm").size(), 1u);
  auto ev = AllEvents("pfc_storm");
  ASSERT_EQ(ev.size(), static_cast<size_t>(kThreads));
  const std::vector<std::string> signals = Events("pfc_storm")[0].signals;
  EXPECT_EQ(std::count_if(signals.begin(), signals.end(),
                          [](const std::string& s) { return s.starts_with("pfc_pause_seconds"); }),
            kThreads);
  for (const DetectorEvent& e : ev) {
    EXPECT_EQ(e.start_unix_nano, kT0 + 1 * kSec) << e.priority;
    EXPECT_EQ(e.end_unix_nano, kT0 + 2 * kSec) << e.priority;
  }
}

}  // namespace
}  // namespace detectors_test
}  // namespace fabricscope

namespace fabricscope {
namespace detectors_test {
namespace {

// --- Episodes (issue #16): one port's events of one cause are one episode ---

DetectorEvent PortEv(const std::string& detector, const std::string& kind, int rank,
                     const std::string& signal, int64_t start, const std::string& netdev = "eth2") {
  DetectorEvent e = Ev(detector, kind, start);
  e.device = netdev == "eth2" ? "mlx5_0" : "mlx5_1";
  e.port = 1;
  e.netdev = netdev;
  e.merge_rank = rank;
  e.signals = {signal};
  return e;
}

TEST(EventLogMergeTest, SimultaneousSignalsOfOnePortAreOneEpisode) {
  EventLog log(100, nullptr);
  const uint64_t a = log.Open(PortEv("microburst", "burst", 0, "discards rx_discards_phy", 100));
  const uint64_t b = log.Open(PortEv("microburst", "burst", 0, "pfc_pause_frames tx prio 3", 110));
  const uint64_t c =
      log.Open(PortEv("microburst", "burst", 0, "discards out_of_buffer", 120, "eth3"));
  log.Close(a, 200, 1, "a");
  log.Close(b, 300, 1, "b");  // the episode lasts as long as its last part
  auto all = log.List(0, 1000, "");
  ASSERT_EQ(all.size(), 2u) << "the other port's burst stays its own";
  EXPECT_EQ(all[0].id, a);
  EXPECT_EQ(all[0].signals,
            (std::vector<std::string>{"discards rx_discards_phy", "pfc_pause_frames tx prio 3"}));
  EXPECT_EQ(all[0].end_unix_nano, 300);
  EXPECT_EQ(all[1].id, c);
  // A burst that starts after the episode ended is a new episode.
  const uint64_t d =
      log.Open(PortEv("microburst", "burst", 0, "discards rx_discards_phy", 1'000'000'000));
  EXPECT_EQ(log.List(0, INT64_MAX, "").size(), 3u);
  EXPECT_EQ(log.All()[d - 1].merged_into, 0u);
  EXPECT_EQ(log.All()[b - 1].merged_into, a);
}

TEST(EventLogMergeTest, ALaterHigherRankedEpisodeAbsorbsWhatLedUpToIt) {
  EventLog log(100, nullptr);
  constexpr int64_t kS = 1'000'000'000;
  const uint64_t burst =
      log.Open(PortEv("microburst", "burst", 0, "pfc_pause_frames rx prio 3", 10 * kS));
  const uint64_t role =
      log.Open(PortEv("pause_role", "pause_originator", 1, "pause_originator", 10 * kS + 100));
  // Too early to belong to the storm (more than kMergeLeadNs before it).
  const uint64_t old =
      log.Open(PortEv("microburst", "burst", 0, "discards rx_discards_phy", 8 * kS));
  log.Close(old, 8 * kS + 10, 1, "old");
  // The storm is declared after its detection time, starting at 10.05 s.
  const uint64_t storm =
      log.Open(PortEv("pfc_storm", "storm", 6, "pfc_pause_seconds rx prio 3", 10 * kS + 50));
  auto all = log.List(0, INT64_MAX, "");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, old);
  EXPECT_EQ(all[1].id, storm);
  EXPECT_EQ(all[1].start_unix_nano, 10 * kS) << "the episode starts with its first sign";
  EXPECT_EQ(all[1].signals,
            (std::vector<std::string>{"pfc_pause_frames rx prio 3", "pause_originator",
                                      "pfc_pause_seconds rx prio 3"}));
  EXPECT_EQ(log.All()[burst - 1].merged_into, storm);
  EXPECT_EQ(log.All()[role - 1].merged_into, storm);
  // A lower rank joins the running storm; a higher one does not.
  log.Open(PortEv("microburst", "burst", 0, "cnp_sent", 10 * kS + 300));
  EXPECT_EQ(log.List(0, INT64_MAX, "").size(), 2u);
}

TEST(EventLogMergeTest, OnlyConsequencesJoinTheTailOfAnEpisode) {
  EventLog log(100, nullptr);
  constexpr int64_t kS = 1'000'000'000;
  const uint64_t flap =
      log.Open(PortEv("link_degradation", "link_downed", 5, "link_down_events", 1 * kS));
  log.Close(flap, 3 * kS, 1, "flap");
  DetectorEvent acks = PortEv("retransmit_spike", "local_ack_timeout_err", 2,
                              "rdma_errors local_ack_timeout_err", 4 * kS);
  acks.merge_tail = true;
  const uint64_t a = log.Open(acks);
  log.Close(a, 6 * kS, 1, "acks");
  // A burst after the episode (with its ACK timeouts) ended is not its
  // consequence, even within the tail.
  log.Open(PortEv("microburst", "burst", 0, "discards rx_discards_phy", 6500 * kMs));
  auto all = log.List(0, INT64_MAX, "");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, flap);
  EXPECT_EQ(all[0].signals,
            (std::vector<std::string>{"link_down_events", "rdma_errors local_ack_timeout_err"}));
  EXPECT_EQ(all[0].end_unix_nano, 6 * kS);
  EXPECT_EQ(all[1].detector, "microburst");
  // Beyond the tail: its own episode.
  DetectorEvent late = acks;
  late.start_unix_nano = 9 * kS;
  log.Open(late);
  EXPECT_EQ(log.List(0, INT64_MAX, "retransmit_spike").size(), 1u);
}

TEST(EventLogMergeTest, TheObserverHearsOfEpisodesOnly) {
  struct Recorder : EventObserver {
    std::vector<std::string> heard;
    void OnEventOpened(const DetectorEvent& e) override { heard.push_back("open " + e.detector); }
    void OnEventClosed(const DetectorEvent& e) override { heard.push_back("close " + e.detector); }
  } rec;
  EventLog log(100, nullptr);
  log.SetObserver(&rec);
  constexpr int64_t kS = 1'000'000'000;
  const uint64_t burst = log.Open(PortEv("microburst", "burst", 0, "pfc_pause_frames", 10 * kS));
  const uint64_t joined = log.Open(PortEv("microburst", "burst", 0, "discards", 10 * kS));
  const uint64_t storm = log.Open(PortEv("pfc_storm", "storm", 6, "pfc_pause_seconds", 10 * kS));
  log.Close(joined, 11 * kS, 1, "");
  log.Close(burst, 11 * kS, 1, "");  // reported at its open, before the storm absorbed it
  log.Close(storm, 12 * kS, 1, "");
  EXPECT_EQ(rec.heard, (std::vector<std::string>{"open microburst", "open pfc_storm",
                                                 "close microburst", "close pfc_storm"}));
}

TEST(EventLogMergeTest, ConfigurationStatesNeverMerge) {
  EventLog log(100, nullptr);
  log.Open(PortEv("ecn_mistuning", "marking_too_late", 4, "marking_too_late", 100));
  log.Open(PortEv("ecn_mistuning", "ecn_disabled_on_pfc_priority", -1, "x", 100));
  EXPECT_EQ(log.List(0, 1000, "").size(), 2u);
}

// Drives a counter that moves at `base` per second and at `burst` per second
// during [from, from + len) (t since kT0).
std::function<uint64_t(int64_t)> Bursty(double base, double burst, int64_t from, int64_t len) {
  return [=](int64_t t) {
    const double in = static_cast<double>(std::clamp(t, from, from + len) - from) * 1e-9;
    return static_cast<uint64_t>(static_cast<double>(t) * 1e-9 * base + in * (burst - base));
  };
}

TEST_F(DetectorsTest, MicroburstsOfSeveralSignalsOnOnePortAreOneEpisode) {
  Start();
  const SeriesId disc = Series("ethtool", "rx_discards_phy", "", 0, "eth2");
  const SeriesId pause = Series("ethtool", "tx_prio3_pause", "", 0, "eth2");
  const SeriesId marks = Series("hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, "eth2");
  Drive({{disc, Bursty(0, 1e6, 2 * kSec, 20 * kMs)},
         {pause, Bursty(0, 1e5, 2 * kSec, 20 * kMs)},
         {marks, Bursty(100, 1e6, 2 * kSec, 20 * kMs)}},
        kT0, 3 * kSec, 10 * kMs);
  auto ev = Events("microburst");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].device, "mlx5_0");
  EXPECT_EQ(ev[0].start_unix_nano, kT0 + 2 * kSec);
  EXPECT_EQ(ev[0].signals,
            (std::vector<std::string>{"discards rx_discards_phy", "pfc_pause_frames tx prio 3",
                                      "ecn_marked_packets"}));
  EXPECT_NE(ev[0].summary.find("discards rx_discards_phy"), std::string::npos) << ev[0].summary;
  // Each signal keeps its own gauge series.
  EXPECT_EQ(Gauge("fabricscope_microburst_active", {{"signal", "pfc_pause_frames"}}), 0);
  EXPECT_EQ(Gauge("fabricscope_microburst_active", {{"signal", "ecn_marked_packets"}}), 0);
}

TEST_F(DetectorsTest, EcnAndCnpBurstsAloneAreNotEvents) {
  DetectorOptions o;
  o.enabled = {"microburst"};  // CNPs at no utilization would also be ECN "too aggressive"
  Start(o);
  const SeriesId marks = Series("hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, "eth2");
  const SeriesId cnps = Series("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth2");
  const SeriesId pause = Series("ethtool", "tx_prio3_pause", "", 0, "eth2");
  // 2.0 s: marks and CNPs burst, DCQCN copes (no pause, no drop). 4.0 s: the
  // same, but the NIC also had to pause its switch (below the pause-frame
  // burst floor: 50 frames in one 100 ms poll).
  auto m = [](int64_t t) {
    return Bursty(100, 1e6, 2 * kSec, 20 * kMs)(t) + Bursty(0, 1e6, 4 * kSec, 20 * kMs)(t);
  };
  auto c = [](int64_t t) {
    return Bursty(10, 1e5, 2 * kSec, 20 * kMs)(t) + Bursty(0, 1e5, 4 * kSec, 20 * kMs)(t);
  };
  auto p = [](int64_t t) { return static_cast<uint64_t>(t > 4 * kSec ? 50 : 0); };
  for (int64_t t = kT0; t <= kT0 + 3 * kSec; t += 10 * kMs) {
    store_.Append(marks, t, m(t - kT0));
    store_.Append(cnps, t, c(t - kT0));
    if ((t - kT0) % (100 * kMs) == 0) store_.Append(pause, t, p(t - kT0));
    if (t == kT0 + 2010 * kMs) {
      EXPECT_EQ(Gauge("fabricscope_microburst_active", {{"signal", "ecn_marked_packets"}}), 1)
          << "the burst stays visible on /metrics";
    }
  }
  EXPECT_TRUE(Events("microburst").empty()) << Events("microburst")[0].summary;
  for (int64_t t = kT0 + 3010 * kMs; t <= kT0 + 5 * kSec; t += 10 * kMs) {
    store_.Append(marks, t, m(t - kT0));
    store_.Append(cnps, t, c(t - kT0));
    if ((t - kT0) % (100 * kMs) == 0) store_.Append(pause, t, p(t - kT0));
  }
  auto ev = Events("microburst");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].start_unix_nano, kT0 + 4 * kSec);
  EXPECT_GE(ev[0].detected_unix_nano, kT0 + 4100 * kMs) << "once the pause frames are seen";
  EXPECT_NE(ev[0].summary.find("not contained by DCQCN: pfc_pause_frames tx prio 3 rose"),
            std::string::npos)
      << ev[0].summary;
  EXPECT_EQ(ev[0].signals, (std::vector<std::string>{"ecn_marked_packets", "cnp_sent"}));
}

TEST_F(DetectorsTest, RetransmitsOnTheTailOfALinkFlapAreThatEpisode) {
  Start();
  const SeriesId down = Series("ethtool", "link_down_events_phy", "", 0, "eth2");
  const SeriesId acks = Series("hw_counters", "local_ack_timeout_err", "mlx5_0", 1, "eth2");
  const SeriesId oos = Series("hw_counters", "out_of_sequence", "mlx5_0", 1, "eth2");
  // The link goes down at 5 s; ACK timeouts at 100/s from 5.5 s to 8 s,
  // outlasting it. Out-of-sequence at 200/s from
  // 20 s: a retransmit spike of its own.
  auto d = [](int64_t t) { return static_cast<uint64_t>(t >= 5 * kSec ? 1 : 0); };
  auto a = [](int64_t t) {
    return static_cast<uint64_t>((std::clamp(t, 5500 * kMs, 8 * kSec) - 5500 * kMs) / (10 * kMs));
  };
  auto o = [](int64_t t) {
    return static_cast<uint64_t>((std::clamp(t, 20 * kSec, 22 * kSec) - 20 * kSec) / (5 * kMs));
  };
  Drive({{down, d}, {acks, a}, {oos, o}}, kT0, 25 * kSec, 10 * kMs);
  auto link = Events("link_degradation");
  ASSERT_EQ(link.size(), 1u);
  EXPECT_EQ(link[0].signals,
            (std::vector<std::string>{"link_down_events", "rdma_errors local_ack_timeout_err"}));
  auto rt = Events("retransmit_spike");
  ASSERT_EQ(rt.size(), 1u) << "only the later spike stands alone";
  EXPECT_EQ(rt[0].kind, "out_of_sequence");
  EXPECT_GE(rt[0].start_unix_nano, kT0 + 20 * kSec);
}

TEST_F(DetectorsTest, DropsWithEcnDisabledAreNotMarkingTooLate) {
  Start();
  const SeriesId pfc3 = Series("dcb_config", "pfc_enabled_prio3", "", 0, "eth2");
  const SeriesId np3 = Series("dcb_config", "ecn_roce_np_enable_3", "", 0, "eth2");
  const SeriesId rp3 = Series("dcb_config", "ecn_roce_rp_enable_3", "", 0, "eth2");
  const SeriesId oob = Series("hw_counters", "out_of_buffer", "mlx5_0", 1, "eth2");
  const SeriesId marks = Series("hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, "eth2");
  store_.Append(pfc3, kT0, 1);
  store_.Append(np3, kT0, 0);
  store_.Append(rp3, kT0, 0);
  // Drops at 5000/s with flat marks for 3 s, none from 3 s to 10 s, again
  // from 10 s to 13 s.
  auto drops = [](int64_t t) {
    return static_cast<uint64_t>((std::min(t, 3 * kSec) + std::max<int64_t>(0, t - 10 * kSec)) /
                                 kMs * 5);
  };
  auto flat = [](int64_t) { return uint64_t{7}; };
  Drive({{oob, drops}, {marks, flat}}, kT0 + 10 * kMs, 3 * kSec, 10 * kMs);
  auto ev = Events("ecn_mistuning");
  std::vector<std::string> kinds;
  for (const auto& e : ev) kinds.push_back(e.kind);
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"ecn_disabled_on_pfc_priority", "drops_ecn_disabled"}));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_NE(ev[1].summary.find("ECN disabled on priority 3 (np off, rp off)"), std::string::npos)
      << ev[1].summary;
  EXPECT_EQ(Gauge("fabricscope_ecn_mistuning_active",
                  {{"device", "mlx5_0"}, {"port", "1"}, {"kind", "drops_ecn_disabled"}}),
            1);
  EXPECT_EQ(Gauge("fabricscope_ecn_mistuning_active",
                  {{"device", "mlx5_0"}, {"port", "1"}, {"kind", "marking_too_late"}}),
            0);
  // ECN turned on at 6 s; the drops come back with marks still flat: now
  // it is marking too late.
  Drive({{oob, drops}, {marks, flat}}, kT0 + 3010 * kMs, 2990 * kMs, 10 * kMs);
  store_.Append(np3, kT0 + 6 * kSec, 1);
  store_.Append(rp3, kT0 + 6 * kSec, 1);
  Drive({{oob, drops}, {marks, flat}}, kT0 + 6010 * kMs, 7 * kSec, 10 * kMs);
  ev = Events("ecn_mistuning");
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().kind, "marking_too_late");
}

}  // namespace
}  // namespace detectors_test
}  // namespace fabricscope
