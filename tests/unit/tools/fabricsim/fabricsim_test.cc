// fabricsim: determinism for a seed, model sanity per scenario, and the
// formats of the live tree, the recording, spans and ground truth.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tools/fabricsim/model.h"
#include "tools/fabricsim/scenario.h"
#include "tools/fabricsim/writer.h"

namespace fabricsim {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kStart = 1'760'000'000'000'000'000;

struct Sim {
  explicit Sim(const std::string& scenario_name, uint64_t seed = 1)
      : scenario(*Scenario::Make(scenario_name, 2)), fabric(Options(seed), &scenario) {}
  static FabricOptions Options(uint64_t seed) {
    FabricOptions o;
    o.seed = seed;
    return o;
  }
  const PortCounters& At(int64_t t_ms, int port) {
    fabric.AdvanceTo(t_ms * kMs);
    return fabric.counters(port);
  }
  Scenario scenario;
  Fabric fabric;
};

// Runs a scenario as fast as possible into a recording, the way
// `fabricsim --record` does, and returns the recording's text.
std::string Record(const std::string& scenario_name, uint64_t seed, int64_t duration_ms) {
  Sim sim(scenario_name, seed);
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  RecordingWriter rec(out, kStart);
  for (int64_t t = 0; t <= duration_ms * kMs; t += 10 * kMs) {
    sim.fabric.AdvanceTo(t);
    for (const SpanRecord& s : sim.fabric.TakeSpans()) {
      rec.Span(SpanJson(s, sim.fabric.ports()[s.port_index], kStart, scenario_name));
    }
    rec.Sample(sim.fabric);
  }
  std::fclose(out);
  std::string text(buf, len);
  free(buf);
  return text;
}

TEST(FabricsimDeterminism, SameSeedSameRecordingDifferentSeedDiffers) {
  std::string a = Record("mixed", 42, 3'000);
  std::string b = Record("mixed", 42, 3'000);
  std::string c = Record("mixed", 43, 3'000);
  ASSERT_GT(a.size(), 100'000u);
  EXPECT_TRUE(a == b) << "same seed gave different recordings";
  EXPECT_FALSE(a == c) << "a different seed gave the same recording";
}

TEST(FabricsimDeterminism, LiveTreeIsIdenticalForASeed) {
  auto tree_of = [](uint64_t seed, const std::string& dir) {
    Sim sim("pfc_storm", seed);
    TreeWriter tree(dir + "/sys", dir + "/ethtool");
    sim.fabric.AdvanceTo(1'300 * kMs);
    EXPECT_TRUE(tree.Write(sim.fabric).ok());
  };
  std::string base = ::testing::TempDir() + "/fabricsim_det_" + std::to_string(getpid());
  tree_of(5, base + "/a");
  tree_of(5, base + "/b");
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  int compared = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(base + "/a")) {
    if (!e.is_regular_file()) continue;
    std::string rel = std::filesystem::relative(e.path(), base + "/a").string();
    EXPECT_EQ(read(e.path().string()), read(base + "/b/" + rel)) << rel;
    ++compared;
  }
  EXPECT_GT(compared, 100);
  std::filesystem::remove_all(base);
}

TEST(FabricsimModel, QuietHasNoPausesMarksDropsOrRetransmits) {
  Sim sim("quiet", 3);
  PortCounters before[2] = {sim.At(0, 0), sim.At(0, 1)};
  sim.fabric.AdvanceTo(5'000 * kMs);
  for (int p = 0; p < 2; ++p) {
    const PortCounters& a = before[p];
    const PortCounters& b = sim.fabric.counters(p);
    EXPECT_EQ(b.rx_prio_pause_duration[3], a.rx_prio_pause_duration[3]) << p;
    EXPECT_EQ(b.tx_prio_pause_duration[3], a.tx_prio_pause_duration[3]) << p;
    EXPECT_EQ(b.np_ecn_marked_roce_packets, a.np_ecn_marked_roce_packets) << p;
    EXPECT_EQ(b.rp_cnp_handled, a.rp_cnp_handled) << p;
    EXPECT_EQ(b.rx_discards_phy, a.rx_discards_phy) << p;
    EXPECT_EQ(b.out_of_sequence, a.out_of_sequence) << p;
    EXPECT_EQ(b.packet_seq_err, a.packet_seq_err) << p;
    EXPECT_EQ(b.link_down_events_phy, a.link_down_events_phy) << p;
    // Traffic flows.
    EXPECT_GT(b.port_xmit_data, a.port_xmit_data + 1e8) << p;
    EXPECT_GT(b.port_rcv_data, a.port_rcv_data + 1e8) << p;
  }
}

TEST(FabricsimModel, PfcStormRxPausesAtAboutTheIntervalRate) {
  Sim sim("pfc_storm", 1);
  double d0 = sim.At(900, 0).rx_prio_pause_duration[3];
  double d1 = sim.At(1'100, 0).rx_prio_pause_duration[3];
  double frames1 = sim.fabric.counters(0).rx_prio_pause[3];
  double d2 = sim.At(1'500, 0).rx_prio_pause_duration[3];
  double frames2 = sim.fabric.counters(0).rx_prio_pause[3];
  EXPECT_EQ(d1 - d0 > 0, true) << "storm starts at 1.0 s";
  // 400 ms of storm: pause duration (us) grows by ~400'000.
  EXPECT_NEAR(d2 - d1, 400'000, 20'000);
  EXPECT_GT(frames2 - frames1, 1'000);  // XOFF refreshed every ~84 us
  EXPECT_TRUE(sim.fabric.status(0).rx_paused);
  // Nothing on the other direction or the other port.
  EXPECT_EQ(sim.fabric.counters(1).rx_prio_pause_duration[3],
            Sim("pfc_storm", 1).At(0, 1).rx_prio_pause_duration[3]);
  // Released after the storm.
  double d3 = sim.At(1'800, 0).rx_prio_pause_duration[3];
  double d4 = sim.At(2'500, 0).rx_prio_pause_duration[3];
  EXPECT_LT(d3 - d2, 120'000);
  EXPECT_EQ(d4, d3);
  EXPECT_FALSE(sim.fabric.status(0).rx_paused);
}

TEST(FabricsimModel, PfcStormTxPausesTheSwitchAndRaisesStormEvents) {
  Sim sim("pfc_storm", 1);
  const PortCounters a = sim.At(4'900, 1);
  const PortCounters b = sim.At(5'590, 1);
  EXPECT_GT(b.tx_prio_pause_duration[3] - a.tx_prio_pause_duration[3], 450'000);
  EXPECT_EQ(b.tx_pause_storm_warning_events - a.tx_pause_storm_warning_events, 1);
  EXPECT_EQ(b.tx_pause_storm_error_events - a.tx_pause_storm_error_events, 1);
  EXPECT_EQ(b.rx_prio_pause_duration[3], a.rx_prio_pause_duration[3]);
}

TEST(FabricsimModel, EcnTooLateDropsWithoutMarks) {
  Sim sim("ecn_too_late", 1);
  const PortCounters a = sim.At(1'000, 0);
  const PortCounters b = sim.At(3'900, 0);
  EXPECT_GT(b.rx_discards_phy - a.rx_discards_phy, 1'000);
  EXPECT_GT(b.out_of_buffer - a.out_of_buffer, 100);
  EXPECT_GT(b.out_of_sequence - a.out_of_sequence, 1'000);
  EXPECT_EQ(b.np_ecn_marked_roce_packets, a.np_ecn_marked_roce_packets);
  EXPECT_EQ(b.np_cnp_sent, a.np_cnp_sent);
}

TEST(FabricsimModel, EcnTooAggressiveFloodsCnpsAtLowUtilizationWithoutDrops) {
  Sim sim("ecn_too_aggressive", 1);
  const PortCounters q0 = sim.At(0, 0);
  const PortCounters q1 = sim.At(1'000, 0);
  const PortCounters a = sim.At(1'500, 0);
  const PortCounters b = sim.At(3'500, 0);
  EXPECT_EQ(q1.np_cnp_sent, q0.np_cnp_sent);
  double cnps_per_s = (b.np_cnp_sent - a.np_cnp_sent) / 2.0;
  EXPECT_GT(cnps_per_s, 10'000);
  EXPECT_EQ(b.rx_discards_phy, a.rx_discards_phy);
  EXPECT_EQ(b.tx_prio_pause_duration[3], a.tx_prio_pause_duration[3]);
  double quiet_gbps = (q1.rdma_rx_bytes - q0.rdma_rx_bytes) * 8 / 1.0 / 1e9;
  double rx_gbps = (b.rdma_rx_bytes - a.rdma_rx_bytes) * 8 / 2.0 / 1e9;
  EXPECT_GT(quiet_gbps, 50);
  EXPECT_LT(rx_gbps, 0.5 * quiet_gbps);
}

TEST(FabricsimModel, FecDegradationMovesCorrectedBits) {
  Sim sim("fec_degradation", 1);
  const PortCounters a = sim.At(0, 0);
  const PortCounters b = sim.At(1'000, 0);
  const PortCounters c = sim.At(6'000, 0);
  const PortCounters d = sim.At(7'000, 0);
  double before = b.rx_corrected_bits_phy - a.rx_corrected_bits_phy;
  double late = d.rx_corrected_bits_phy - c.rx_corrected_bits_phy;
  EXPECT_GT(late, 1e5);
  EXPECT_GT(late, 1000 * (before + 1));
  EXPECT_GT(d.fec_corrected_blocks, b.fec_corrected_blocks);
  EXPECT_GE(d.fec_uncorrectable_blocks, b.fec_uncorrectable_blocks);
  EXPECT_GT(sim.fabric.status(0).ber, 1e-6);
}

TEST(FabricsimModel, LinkFlapTakesThePortDownAndCausesTimeouts) {
  Sim sim("link_flap", 1);
  const PortCounters a = sim.At(900, 0);
  sim.At(1'100, 0);
  EXPECT_FALSE(sim.fabric.status(0).link_up);
  EXPECT_TRUE(sim.fabric.status(1).link_up);
  const PortCounters b = sim.At(1'500, 0);
  EXPECT_TRUE(sim.fabric.status(0).link_up);
  EXPECT_EQ(b.link_down_events_phy - a.link_down_events_phy, 1);
  EXPECT_EQ(b.link_downed - a.link_downed, 1);
  EXPECT_GT(b.local_ack_timeout_err, a.local_ack_timeout_err);
}

TEST(FabricsimModel, RetransmitStormRaisesSequenceErrorsOnlyDuringTheEpisode) {
  Sim sim("retransmit_storm", 1);
  const PortCounters a = sim.At(900, 0);
  const PortCounters b = sim.At(3'000, 0);
  const PortCounters c = sim.At(5'000, 0);
  EXPECT_GT(b.out_of_sequence - a.out_of_sequence, 1'000);
  EXPECT_GT(b.packet_seq_err - a.packet_seq_err, 100);
  EXPECT_GT(b.local_ack_timeout_err - a.local_ack_timeout_err, 5);
  EXPECT_LT(c.out_of_sequence - b.out_of_sequence, 0.01 * (b.out_of_sequence - a.out_of_sequence));
}

TEST(FabricsimModel, IncastMicroburstsMarkAndAreShort) {
  Sim sim("incast_microbursts", 1);
  const PortCounters a = sim.At(150, 0);
  const PortCounters b = sim.At(260, 0);
  EXPECT_GT(b.np_ecn_marked_roce_packets, a.np_ecn_marked_roce_packets);
  EXPECT_GT(b.np_cnp_sent, a.np_cnp_sent);
  // Any pause is a few ms, not a storm.
  EXPECT_LT(b.tx_prio_pause_duration[3] - a.tx_prio_pause_duration[3], 20'000);
  const PortCounters c = sim.At(650, 0);
  EXPECT_EQ(c.np_ecn_marked_roce_packets, b.np_ecn_marked_roce_packets);
}

// After every 64 decode steps of a port, its llm_request span: the steps'
// trace, from the first step's start to the last's end, first token at the
// first step's end, shaped as vLLM's (gen_ai.* attributes, no hints).
TEST(FabricsimSpans, RequestsAreGenAiShaped) {
  Sim sim("pfc_storm", 1);
  sim.fabric.AdvanceTo(5'000 * kMs);
  std::map<std::string, std::vector<SpanRecord>> steps;
  int requests = 0;
  for (const SpanRecord& s : sim.fabric.TakeSpans()) {
    if (!s.request) {
      steps[s.trace_id].push_back(s);
      continue;
    }
    ++requests;
    const std::vector<SpanRecord>& of = steps[s.trace_id];
    ASSERT_EQ(of.size(), 64u);
    EXPECT_EQ(s.tokens, 64);
    EXPECT_EQ(s.start_ns, of.front().start_ns);
    EXPECT_EQ(s.first_token_ns, of.front().end_ns);
    EXPECT_EQ(s.end_ns, of.back().end_ns);
    const std::string json = SpanJson(s, sim.fabric.ports()[s.port_index], kStart, "pfc_storm");
    EXPECT_NE(json.find(R"("name":"llm_request")"), std::string::npos) << json;
    EXPECT_NE(json.find(R"("gen_ai.usage.completion_tokens":"64")"), std::string::npos) << json;
    EXPECT_NE(json.find(R"("gen_ai.latency.time_to_first_token":")"), std::string::npos);
    EXPECT_EQ(json.find("rdma.device"), std::string::npos) << json;
    EXPECT_EQ(json.find("\"kind\""), std::string::npos) << json;
  }
  EXPECT_GE(requests, 2);  // two ports, ~2 s a request
}

TEST(FabricsimSpans, DecodeStepsStretchWhenPaused) {
  Sim sim("pfc_storm", 1);
  sim.fabric.AdvanceTo(3'000 * kMs);
  double quiet_max = 0, stalled_max = 0;
  int quiet = 0;
  for (const SpanRecord& s : sim.fabric.TakeSpans()) {
    if (s.request) continue;  // RequestsAreGenAiShaped
    double ms = static_cast<double>(s.end_ns - s.start_ns) / 1e6;
    EXPECT_EQ(s.trace_id.size(), 32u);
    EXPECT_EQ(s.span_id.size(), 16u);
    bool overlaps = s.port_index == 0 && s.start_ns < 1'600 * kMs && s.end_ns > 1'000 * kMs;
    if (overlaps) {
      stalled_max = std::max(stalled_max, ms);
    } else if (s.end_ns < 900 * kMs) {
      quiet_max = std::max(quiet_max, ms);
      EXPECT_GT(ms, 25);
      ++quiet;
    }
  }
  EXPECT_GT(quiet, 20);
  EXPECT_LT(quiet_max, 40);
  EXPECT_GT(stalled_max, 500);
}

TEST(FabricsimOutput, LiveTreeFilesParse) {
  Sim sim("pfc_storm", 1);
  std::string dir = ::testing::TempDir() + "/fabricsim_tree_" + std::to_string(getpid());
  TreeWriter tree(dir + "/sys", dir + "/ethtool");
  sim.fabric.AdvanceTo(1'200 * kMs);
  ASSERT_TRUE(tree.Write(sim.fabric).ok());
  sim.fabric.AdvanceTo(1'300 * kMs);
  ASSERT_TRUE(tree.Write(sim.fabric).ok());
  const std::regex number("[0-9]+\n");
  int counter_files = 0;
  for (const char* sub : {"hw_counters", "counters"}) {
    for (int p = 0; p < 2; ++p) {
      std::string d = dir + "/sys/class/infiniband/mlx5_" + std::to_string(p) + "/ports/1/" + sub;
      for (const auto& e : std::filesystem::directory_iterator(d)) {
        ASSERT_TRUE(e.is_regular_file()) << e.path();
        std::ifstream in(e.path());
        std::stringstream ss;
        ss << in.rdbuf();
        EXPECT_TRUE(std::regex_match(ss.str(), number)) << e.path() << ": " << ss.str();
        ++counter_files;
      }
    }
  }
  EXPECT_EQ(counter_files, 2 * (30 + 21));  // 29 hw_counters + lifespan, 21 PMA counters
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  std::string port0 = dir + "/sys/class/infiniband/mlx5_0/ports/1/";
  EXPECT_EQ(read(port0 + "state"), "4: ACTIVE\n");
  EXPECT_EQ(read(port0 + "link_layer"), "Ethernet\n");
  EXPECT_EQ(read(port0 + "rate"), "200 Gb/sec (4X HDR)\n");
  EXPECT_EQ(read(port0 + "gid_attrs/ndevs/0"), "eth2\n");
  EXPECT_EQ(read(dir + "/sys/class/net/eth2/ecn/roce_np/enable/3"), "1\n");
  EXPECT_EQ(read(dir + "/sys/class/net/eth2/ecn/roce_np/enable/2"), "0\n");

  std::string eth = read(dir + "/ethtool/eth2");
  std::istringstream lines(eth);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "NIC statistics:");
  const std::regex stat("     [a-z0-9_]+: [0-9]+");
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(std::regex_match(line, stat)) << line;
    ++n;
  }
  EXPECT_GT(n, 100);
  EXPECT_THAT(eth, ::testing::HasSubstr("\n     rx_prio3_pause_duration: "));
  EXPECT_THAT(eth, ::testing::HasSubstr("\n     tx_pause_storm_error_events: "));
  EXPECT_THAT(eth, ::testing::Not(::testing::HasSubstr("rx_prio2_pause")));
  // Readers list only counter files: the temporary files live elsewhere.
  for (const auto& e : std::filesystem::directory_iterator(dir + "/ethtool")) {
    std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "eth2" || name == "eth3" || name == ".fabricsim-tmp") << name;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/ethtool/.fabricsim-tmp"));
  // Link down shows in state.
  std::filesystem::remove_all(dir);
}

// --dcb-dir: one `dcb pfc show` file per netdev, PFC on the scenario's
// priority only (collectors/dcb_config_collector_test.cc parses it).
TEST(FabricsimOutput, DcbDirHasOneFilePerNetdev) {
  Sim sim("mixed", 1);
  std::string dir = ::testing::TempDir() + "/fabricsim_dcb_" + std::to_string(getpid());
  TreeWriter tree("", "");
  tree.set_dcb_dir(dir + "/dcb");
  sim.fabric.AdvanceTo(10 * kMs);
  ASSERT_TRUE(tree.Write(sim.fabric).ok());
  const int prio = sim.fabric.options().pfc_priority;
  for (const char* netdev : {"eth2", "eth3"}) {
    std::ifstream in(dir + "/dcb/" + netdev);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), DcbPfcShowText(prio)) << netdev;
  }
  EXPECT_EQ(DcbPfcShowText(3),
            "pfc-cap 8 macsec-bypass off delay 0\n"
            "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n");
  std::filesystem::remove_all(dir);
}

// fabricscoped keeps counter files open and preads them: updates must land in
// the same inode, not in a renamed replacement.
TEST(FabricsimOutput, CounterFilesUpdateInPlaceForOpenReaders) {
  Sim sim("incast_microbursts", 1);
  std::string dir = ::testing::TempDir() + "/fabricsim_inplace_" + std::to_string(getpid());
  TreeWriter tree(dir + "/sys", "");
  sim.fabric.AdvanceTo(100 * kMs);
  ASSERT_TRUE(tree.Write(sim.fabric).ok());
  std::string path =
      dir + "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_ecn_marked_roce_packets";
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  auto pread_value = [&]() {
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    return n > 0 ? std::stoull(std::string(buf, static_cast<size_t>(n))) : 0ull;
  };
  uint64_t before = pread_value();
  EXPECT_EQ(before, static_cast<uint64_t>(sim.fabric.counters(0).np_ecn_marked_roce_packets));
  sim.fabric.AdvanceTo(300 * kMs);  // the 200 ms burst marks packets
  ASSERT_TRUE(tree.Write(sim.fabric).ok());
  uint64_t after = pread_value();
  EXPECT_GT(after, before);
  EXPECT_EQ(after, static_cast<uint64_t>(sim.fabric.counters(0).np_ecn_marked_roce_packets));
  close(fd);
  std::filesystem::remove_all(dir);
}

TEST(FabricsimOutput, LinkDownStateInTree) {
  Sim sim("link_flap", 1);
  std::string dir = ::testing::TempDir() + "/fabricsim_flap_" + std::to_string(getpid());
  TreeWriter tree(dir + "/sys", "");
  sim.fabric.AdvanceTo(1'100 * kMs);
  ASSERT_TRUE(tree.Write(sim.fabric).ok());
  std::ifstream in(dir + "/sys/class/infiniband/mlx5_0/ports/1/state");
  std::string state;
  std::getline(in, state);
  EXPECT_EQ(state, "1: DOWN");
  std::filesystem::remove_all(dir);
}

TEST(FabricsimOutput, RecordingLinesHaveTheDocumentedShape) {
  std::string text = Record("pfc_storm", 1, 1'200);
  const std::regex sample(
      R"re(\{"ts_ns":[0-9]+,"device":"mlx5_[01]","port":1,"netdev":"eth[23]",)re"
      R"re("source":"(hw_counters|counters|ethtool|fec)","name":"[A-Za-z0-9_]+","value":[0-9]+\})re");
  const std::regex span(
      R"re(\{"span":\{"trace_id":"[0-9a-f]{32}","span_id":"[0-9a-f]{16}","name":"decode_step",)re"
      R"re("kind":"decode_step","start_unix_nano":[0-9]+,"end_unix_nano":[0-9]+,"attributes":\{.*\}\}\})re");
  std::istringstream in(text);
  std::string line;
  int samples = 0, spans = 0;
  std::set<std::string> sources;
  while (std::getline(in, line)) {
    if (std::regex_match(line, span)) {
      ++spans;
      EXPECT_THAT(line, ::testing::HasSubstr(R"("rdma.device":"mlx5_)"));
      EXPECT_THAT(line, ::testing::HasSubstr(R"("network.interface.name":"eth)"));
    } else {
      ASSERT_TRUE(std::regex_match(line, sample)) << line;
      ++samples;
      sources.insert(line.substr(line.find("\"source\":\"") + 10, 5));
    }
  }
  EXPECT_GT(spans, 30);
  EXPECT_GT(samples, 1000);
  EXPECT_EQ(sources.size(), 4u);
  EXPECT_THAT(text, ::testing::HasSubstr(R"("name":"rx_prio3_pause_duration","value":)"));
}

TEST(FabricsimOutput, GroundTruthListsEpisodesWithPortPriorityAndTimes) {
  Sim sim("pfc_storm", 9);
  sim.fabric.AdvanceTo(5'300 * kMs);
  std::string gt = GroundTruthJson(sim.scenario, 9, sim.fabric, kStart, sim.fabric.now_ns(), false);
  EXPECT_THAT(gt, ::testing::HasSubstr(R"("scenario":"pfc_storm","seed":9)"));
  EXPECT_THAT(gt,
              ::testing::HasSubstr(
                  R"({"kind":"pfc_storm","detector":"pfc_storm","detector_kind":"storm",)"
                  R"("device":"mlx5_0","port":1,"netdev":"eth2","priority":3,"direction":"rx",)"
                  R"("start_unix_nano":1760000001000000000,"end_unix_nano":1760000001600000000})"));
  // The tx storm on port 1 is still running at 5.3 s.
  EXPECT_THAT(gt, ::testing::HasSubstr(
                      R"("device":"mlx5_1","port":1,"netdev":"eth3","priority":3,"direction":"tx",)"
                      R"("start_unix_nano":1760000005000000000,"end_unix_nano":null})"));
  EXPECT_THAT(gt, ::testing::HasSubstr(R"("end_unix_nano":null,"ports")"));
}

TEST(FabricsimScenario, EveryNamedScenarioBuildsAndUnknownNamesAreListed) {
  EXPECT_EQ(Scenario::Names().size(), 9u);
  for (const std::string& name : Scenario::Names()) {
    auto s = Scenario::Make(name, 2);
    ASSERT_TRUE(s.ok()) << name;
    if (name != "quiet") {
      EXPECT_FALSE(s->episodes().empty()) << name;
    }
  }
  auto bad = Scenario::Make("hurricane", 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("pfc_storm"));
}

}  // namespace
}  // namespace fabricsim
