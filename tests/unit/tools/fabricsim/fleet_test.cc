// fabricsim fleet mode: the output layout, what each scenario does to which
// host and switch port, the ground truth, and determinism for a seed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/ingest/nccl_inspector.h"
#include "tools/fabricsim/fleet.h"
#include "tools/fabricsim/fleet_output.h"
#include "tools/fabricsim/fleet_run.h"
#include "tools/fabricsim/fleet_scenario.h"

namespace fabricsim {
namespace fleet_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kStart = 1'760'000'000'000'000'000;
constexpr int kPrio = 3;

FleetEpisodeTiming ShortEpisodes() {
  FleetEpisodeTiming t;
  t.first_start_ns = 2 * kSec;
  t.length_ns = 6 * kSec;
  t.period_ns = 20 * kSec;
  return t;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A 12-host leaf-spine:3,2,4 fleet stepped in-process; hosts 0..11, host 5
// (host-06) is leaf02's second host, on leaf02 Ethernet1/2.
struct FleetSim {
  FleetSim(const std::string& name, int origin, uint64_t seed = 1)
      : topology(*FleetTopology::Parse(12, "leaf-spine:3,2,4")),
        scenario(*FleetScenario::Make(name, topology, seed, ShortEpisodes(), origin)),
        fleet(topology, Options(seed), &scenario) {}
  static FleetOptions Options(uint64_t seed) {
    FleetOptions o;
    o.seed = seed;
    return o;
  }
  // Counters of every host at the episode start (2 s) and end (8 s).
  void RunEpisode() {
    fleet.AdvanceTo(2 * kSec);
    for (int h = 0; h < 12; ++h) before.push_back(fleet.counters(h));
    fleet.AdvanceTo(8 * kSec + fleet.options().step_ns);
    for (int h = 0; h < 12; ++h) after.push_back(fleet.counters(h));
  }
  // Share of the 6 s episode the leaf paused host h (rx) / host h paused its
  // leaf (tx), from the host's own counters (microseconds).
  double RxPause(int h) const {
    return (after[h].rx_prio_pause_duration[kPrio] - before[h].rx_prio_pause_duration[kPrio]) / 6e6;
  }
  double TxPause(int h) const {
    return (after[h].tx_prio_pause_duration[kPrio] - before[h].tx_prio_pause_duration[kPrio]) / 6e6;
  }
  std::string GroundTruth() const { return FleetGroundTruthJson(fleet, scenario, kStart, false); }
  FleetTopology topology;
  FleetScenario scenario;
  Fleet fleet;
  std::vector<PortCounters> before, after;
};

TEST(FleetTopology, ParsesLeafSpineAndNamesPorts) {
  auto t = FleetTopology::Parse(12, "leaf-spine:3,2,4");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->hosts_per_leaf, 4);
  EXPECT_EQ(t->HostName(0), "host-01");
  EXPECT_EQ(t->LeafOf(5), 1);
  EXPECT_EQ(FleetTopology::LeafName(t->LeafOf(5)), "leaf02");
  EXPECT_EQ(FleetTopology::LeafDownPort(t->SlotOf(5)), "Ethernet1/2");
  EXPECT_EQ(t->LeafUpPort(1), "Ethernet1/6");
  // HOSTS_PER_LEAF defaults to ceil(N / LEAVES).
  EXPECT_EQ(FleetTopology::Parse(13, "leaf-spine:3,2")->hosts_per_leaf, 5);
  EXPECT_EQ(FleetTopology::Parse(120, "leaf-spine:3,2")->HostName(119), "host-120");
  EXPECT_FALSE(FleetTopology::Parse(12, "leaf-spine:3,2,3").ok());  // 9 < 12
  EXPECT_FALSE(FleetTopology::Parse(12, "fat-tree:3,2").ok());
  EXPECT_FALSE(FleetTopology::Parse(12, "leaf-spine:3").ok());
  EXPECT_FALSE(FleetTopology::Parse(1, "leaf-spine:3,2").ok());
  EXPECT_FALSE(FleetScenario::Make("nope", *t, 1, {}, -1).ok());
}

TEST(FleetRun, WritesOneLiveHostPerDirectoryTopologyAndGroundTruth) {
  std::string dir = ::testing::TempDir() + "/fleet_layout_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  FleetRunOptions o;
  o.hosts = 12;
  o.fabric = "leaf-spine:3,2,4";
  o.scenario = "slow_receiver";
  o.out_dir = dir;
  o.timing = ShortEpisodes();
  o.origin = 5;
  o.duration_ns = 10 * kSec;
  o.fast = true;
  o.start_unix_ns = kStart;
  std::atomic<bool> stop{false};
  ASSERT_EQ(RunFleet(o, stop), 0);

  const std::regex line(
      R"(host=\* netdev=ens1f0np0 system=(leaf0[1-3]) port=(Ethernet1/[1-4]) chassis=02:fa:b0:01:00:0([1-3])\n)");
  for (int h = 0; h < 12; ++h) {
    char name[16];
    std::snprintf(name, sizeof name, "host-%02d", h + 1);
    std::string host = dir + "/" + name;
    std::string port = host + "/sys/class/infiniband/mlx5_0/ports/1";
    EXPECT_EQ(Slurp(port + "/state"), "4: ACTIVE\n") << name;
    EXPECT_EQ(Slurp(port + "/gid_attrs/ndevs/1"), "ens1f0np0\n") << name;
    for (const char* c :
         {"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "out_of_sequence"}) {
      EXPECT_TRUE(std::filesystem::exists(port + "/hw_counters/" + c)) << name << " " << c;
    }
    EXPECT_TRUE(std::filesystem::exists(port + "/counters/port_xmit_data")) << name;
    EXPECT_TRUE(std::filesystem::exists(host + "/sys/class/net/ens1f0np0/ecn/roce_np/enable/3"));
    std::string ethtool = Slurp(host + "/ethtool/ens1f0np0");
    for (const char* c : {"rx_prio3_pause:", "rx_prio3_pause_duration:", "tx_prio3_pause:",
                          "tx_prio3_pause_duration:", "rx_discards_phy:", "rx_corrected_bits_phy:",
                          "rx_symbol_err_phy:", "rx_bytes_phy:"}) {
      EXPECT_THAT(ethtool, HasSubstr(c)) << name;
    }
    // The topology file names the host's leaf and the leaf's port.
    std::string topo = Slurp(host + "/topology");
    std::smatch m;
    std::string last = topo.substr(topo.rfind("host=*"));
    ASSERT_TRUE(std::regex_match(last, m, line)) << topo;
    EXPECT_EQ(m[1].str(), "leaf0" + std::to_string(h / 4 + 1)) << name;
    EXPECT_EQ(m[2].str(), "Ethernet1/" + std::to_string(h % 4 + 1)) << name;
    // Decode-step spans, one JSON object a line.
    std::string spans = Slurp(host + "/spans.jsonl");
    EXPECT_THAT(spans, HasSubstr(R"("kind":"decode_step")")) << name;
    EXPECT_THAT(spans, HasSubstr(R"("gen_ai.latency.time_to_first_token")")) << name;
    EXPECT_EQ(spans.back(), '\n');
    // Each decode step's all-reduce in the host's Inspector dump, a record the
    // daemon's tailer parses into a collective span of that process.
    size_t steps = 0;
    for (size_t at = 0; (at = spans.find(R"("kind":"decode_step")", at)) != std::string::npos;
         ++at) {
      ++steps;
    }
    std::istringstream dump(Slurp(host + "/nccl-inspector/fabricsim-pid70000.log"));
    size_t records = 0;
    for (std::string rec; std::getline(dump, rec);) {
      fabricscope::Span span;
      std::string why;
      ASSERT_TRUE(fabricscope::NcclInspectorTailer::ParseRecord(rec, &span, &why)) << why << rec;
      EXPECT_EQ(span.pid, 70000u) << name;
      ++records;
    }
    EXPECT_GT(records, 0u) << name;
    EXPECT_EQ(records, steps) << name;
  }
  std::string gt = Slurp(dir + "/ground_truth.json");
  EXPECT_THAT(gt, HasSubstr(R"({"scenario":"slow_receiver","seed":1,"fabric":"leaf-spine:3,2,4",)"
                            R"("hosts":12,"leaves":3,"spines":2,"pfc_priority":3,)"));
  EXPECT_THAT(gt, HasSubstr(R"("end_unix_nano":1760000010000000000,"episode_timing")"));
  EXPECT_THAT(gt, HasSubstr(R"({"host":"host-06","netdev":"ens1f0np0","device":"mlx5_0",)"
                            R"("port":1,"leaf":"leaf02","leaf_port":"Ethernet1/2",)"
                            R"("leaf_chassis":"02:fa:b0:01:00:02"})"));
  EXPECT_THAT(gt, HasSubstr(R"({"index":0,"kind":"slow_receiver",)"
                            R"("start_unix_nano":1760000002000000000,)"
                            R"("end_unix_nano":1760000008000000000,"origin":{"host":"host-06",)"));
  EXPECT_THAT(gt, HasSubstr(R"("congested":[{"switch":"leaf02","port":"Ethernet1/2",)"
                            R"("toward":"host-06","paused_fraction":)"));
  EXPECT_THAT(gt, HasSubstr(R"("victims":["host-)"));
  std::filesystem::remove_all(dir);
}

TEST(FleetScenarios, SlowReceiverOriginatesPauseThatSpreadsToOtherLeaves) {
  FleetSim sim("slow_receiver", 5);
  sim.RunEpisode();
  EXPECT_GT(sim.TxPause(5), 0.9);   // the origin pauses its leaf ~98% of the time
  EXPECT_LT(sim.RxPause(5), 0.01);  // and is not paused itself
  int same_leaf = 0, other_leaf = 0;
  for (int h = 0; h < 12; ++h) {
    if (h == 5) continue;
    EXPECT_LT(sim.TxPause(h), 0.001) << h;  // no other host sends pause
    if (sim.RxPause(h) > 0.3) ++(h / 4 == 1 ? same_leaf : other_leaf);
  }
  EXPECT_GE(same_leaf, 1);
  EXPECT_GE(other_leaf, 1);
  std::string gt = sim.GroundTruth();
  EXPECT_THAT(gt, HasSubstr(R"("congested":[{"switch":"leaf02","port":"Ethernet1/2",)"));
  // Spines pause the other leaves' uplinks.
  EXPECT_THAT(gt, HasSubstr(R"({"switch":"spine01","port":"Ethernet1/1","toward":"leaf01",)"
                            R"("xoff_fraction":)"));
}

TEST(FleetScenarios, IncastCongestsTheTargetsLeafPortWithoutAnyHostSendingPause) {
  FleetSim sim("incast", 5);
  sim.RunEpisode();
  for (int h = 0; h < 12; ++h) EXPECT_LT(sim.TxPause(h), 0.001) << h;
  // Same-leaf senders see pause or ECN (CNPs handled by their reaction points).
  for (int h : {4, 6, 7}) {
    double cnps = sim.after[h].rp_cnp_handled - sim.before[h].rp_cnp_handled;
    EXPECT_TRUE(sim.RxPause(h) > 0 || cnps > 100) << h << " cnps " << cnps;
  }
  // The target counts the marks.
  EXPECT_GT(sim.after[5].np_ecn_marked_roce_packets - sim.before[5].np_ecn_marked_roce_packets,
            1000);
  std::string gt = sim.GroundTruth();
  EXPECT_THAT(gt, HasSubstr(R"("origin":null,"target":{"host":"host-06",)"));
  EXPECT_THAT(gt, HasSubstr(R"("congested":[{"switch":"leaf02","port":"Ethernet1/2",)"
                            R"("toward":"host-06",)"));
}

TEST(FleetScenarios, BadLinkRaisesFecErrorsOnlyOnThatHost) {
  FleetSim sim("bad_link", 5);
  sim.RunEpisode();
  for (int h = 0; h < 12; ++h) {
    double corrected = sim.after[h].rx_corrected_bits_phy - sim.before[h].rx_corrected_bits_phy;
    double symbols = sim.after[h].rx_symbol_err_phy - sim.before[h].rx_symbol_err_phy;
    if (h == 5) {
      EXPECT_GT(corrected, 1e6);
      EXPECT_GT(symbols, 1);
    } else {
      EXPECT_LT(corrected, 100) << h;
      EXPECT_LT(symbols, 1) << h;  // written out truncated: 0
    }
    EXPECT_LT(sim.RxPause(h), 0.001) << h;
    EXPECT_LT(sim.TxPause(h), 0.001) << h;
  }
  std::string gt = sim.GroundTruth();
  EXPECT_THAT(gt, HasSubstr(R"("congested":[],"pausing":[],"victims":[])"));
}

TEST(FleetScenarios, DeadlockFreeStormStaysInsideItsLeaf) {
  FleetSim sim("pause_storm_deadlock_free", 5);
  sim.RunEpisode();
  EXPECT_GT(sim.TxPause(5), 0.9);
  for (int h = 0; h < 12; ++h) {
    if (h / 4 == 1) continue;
    EXPECT_LT(sim.RxPause(h), 0.001) << h;
  }
  EXPECT_GT(sim.RxPause(4) + sim.RxPause(6) + sim.RxPause(7), 0.5);
  std::string gt = sim.GroundTruth();
  EXPECT_THAT(gt, Not(HasSubstr(R"("switch":"spine)")));
  EXPECT_THAT(gt, HasSubstr(R"("victims":["host-05","host-07","host-08"])"));
}

TEST(FleetScenarios, QuietHasNoPauseAnywhere) {
  FleetSim sim("quiet", -1);
  sim.RunEpisode();
  for (int h = 0; h < 12; ++h) {
    EXPECT_EQ(sim.RxPause(h), 0) << h;
    EXPECT_EQ(sim.TxPause(h), 0) << h;
    EXPECT_EQ(sim.after[h].rx_discards_phy, sim.before[h].rx_discards_phy) << h;
    EXPECT_GT(sim.after[h].rdma_rx_bytes - sim.before[h].rdma_rx_bytes, 1e9) << h;  // traffic
  }
  EXPECT_THAT(sim.GroundTruth(), HasSubstr(R"("episodes":[]})"));
}

std::map<std::string, std::string> RunToFiles(const std::string& dir, uint64_t seed) {
  std::filesystem::remove_all(dir);
  FleetRunOptions o;
  o.hosts = 12;
  o.fabric = "leaf-spine:3,2,4";
  o.scenario = "slow_receiver";
  o.out_dir = dir;
  o.seed = seed;
  o.timing = ShortEpisodes();
  o.duration_ns = 4 * kSec;
  o.fast = true;
  o.start_unix_ns = kStart;
  std::atomic<bool> stop{false};
  EXPECT_EQ(RunFleet(o, stop), 0);
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      files[std::filesystem::relative(e.path(), dir).string()] = Slurp(e.path().string());
    }
  }
  std::filesystem::remove_all(dir);
  return files;
}

TEST(FleetRun, SameSeedSameBytesDifferentSeedDiffers) {
  std::string base = ::testing::TempDir() + "/fleet_det_" + std::to_string(getpid());
  auto a = RunToFiles(base + "_a", 7);
  auto b = RunToFiles(base + "_b", 7);
  auto c = RunToFiles(base + "_c", 8);
  ASSERT_GT(a.size(), 12u * 50);
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a == c);
}

}  // namespace
}  // namespace fleet_test
}  // namespace fabricsim
