#include "collectors/ethtool_text.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

std::string Fixture(const std::string& rel) {
  const char* src = std::getenv("FABRICSCOPE_SOURCE_DIR");
  std::string path = std::string(src ? src : ".") + "/tests/fixtures/ethtool/" + rel;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::flat_hash_map<std::string, uint64_t> AsMap(const EthtoolTextStats& s) {
  absl::flat_hash_map<std::string, uint64_t> m;
  for (size_t i = 0; i < s.names.size(); ++i) m[s.names[i]] = s.values[i];
  return m;
}

TEST(EthtoolTextTest, EveryFixtureParsesWithItsCount) {
  struct Case {
    const char* file;
    size_t count;
  } cases[] = {{"mlx5/ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt", 751},
               {"mlx5/lkml_bpf_20240619_mlx5_k5.15_nonzero.txt", 101},
               {"mlx5/lkml_bpf_20240619_mlx5_k6.5_nonzero.txt", 108},
               {"other/bnxt_en_10g_k4.18_statistics.txt", 397},
               {"other/i40e_10g_k4.18_statistics.txt", 677},
               {"other/ice_25g_k4.18_statistics.txt", 607}};
  for (const Case& c : cases) {
    EthtoolTextStats s;
    ASSERT_TRUE(ParseEthtoolStatsText(Fixture(c.file), &s).ok()) << c.file;
    EXPECT_EQ(s.names.size(), c.count) << c.file;
    EXPECT_EQ(s.values.size(), c.count) << c.file;
    for (const std::string& n : s.names) {
      EXPECT_FALSE(n.empty()) << c.file;
      EXPECT_NE(n.back(), ' ') << c.file;
      EXPECT_NE(n.front(), ' ') << c.file;
      EXPECT_NE(n.front(), '\t') << c.file;
    }
  }
}

TEST(EthtoolTextTest, Mlx5EthqWithoutHeaderOrIndent) {
  EthtoolTextStats s;
  ASSERT_TRUE(
      ParseEthtoolStatsText(Fixture("mlx5/ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt"), &s).ok());
  auto m = AsMap(s);
  EXPECT_EQ(s.names.front(), "rx_packets");
  EXPECT_EQ(m["rx_packets"], 845320277u);
  EXPECT_EQ(m["tx_bytes_phy"], 2662454044895u);
  EXPECT_EQ(m["tx_pci_signal_integrity"], 34u);
  EXPECT_TRUE(m.contains("rx_global_pause_duration"));
  EXPECT_FALSE(m.contains("rx_prio3_pause"));  // PFC off in this capture
}

TEST(EthtoolTextTest, LkmlHeaderAndIndent) {
  EthtoolTextStats s;
  ASSERT_TRUE(
      ParseEthtoolStatsText(Fixture("mlx5/lkml_bpf_20240619_mlx5_k5.15_nonzero.txt"), &s).ok());
  auto m = AsMap(s);
  EXPECT_EQ(s.names.front(), "rx_packets");
  EXPECT_EQ(m["rx_discards_phy"], 58591428329u);
  EXPECT_EQ(m["tx_global_pause_duration"], 771103810u);
  EXPECT_EQ(m["rx_out_of_buffer"], 990473555u);
}

TEST(EthtoolTextTest, BnxtRingPrefixIsPartOfTheName) {
  EthtoolTextStats s;
  ASSERT_TRUE(ParseEthtoolStatsText(Fixture("other/bnxt_en_10g_k4.18_statistics.txt"), &s).ok());
  auto m = AsMap(s);
  ASSERT_TRUE(m.contains("[0]: rx_ucast_packets"));
  EXPECT_EQ(m["[0]: rx_ucast_packets"], 276347403u);
}

TEST(EthtoolTextTest, IntelDecorationsAndComments) {
  EthtoolTextStats s;
  ASSERT_TRUE(ParseEthtoolStatsText(Fixture("other/i40e_10g_k4.18_statistics.txt"), &s).ok());
  auto m = AsMap(s);
  EXPECT_TRUE(m.contains("port.rx_priority_0_xoff_rx"));
  EXPECT_EQ(m["veb.rx_discards"], 21u);
  ASSERT_TRUE(ParseEthtoolStatsText(Fixture("other/ice_25g_k4.18_statistics.txt"), &s).ok());
  m = AsMap(s);
  EXPECT_TRUE(m.contains("rx_priority_0_xoff.nic"));
  EXPECT_EQ(m["rx_bytes.nic"], 14645706706667u);
}

TEST(EthtoolTextTest, TrimsTheHistoricTrailingSpace) {
  EthtoolTextStats s;
  ASSERT_TRUE(ParseEthtoolStatsText("NIC statistics:\n     tx_pause_storm_warning_events : 7\n"
                                    "\ttx_pause_storm_error_events: 2  \r\n",
                                    &s)
                  .ok());
  ASSERT_EQ(s.names.size(), 2u);
  EXPECT_EQ(s.names[0], "tx_pause_storm_warning_events");
  EXPECT_EQ(s.values[0], 7u);
  EXPECT_EQ(s.names[1], "tx_pause_storm_error_events");
  EXPECT_EQ(s.values[1], 2u);
}

TEST(EthtoolTextTest, GarbageIsRejectedWhole) {
  EthtoolTextStats s;
  for (const char* bad : {"rx_bytes: 12\nrx_pack", "rx_bytes: 12\ntx_bytes:\n", "rx_bytes: -1\n",
                          "rx_bytes: 0x10\n", "rx_bytes: 99999999999999999999999\n", "",
                          "NIC statistics:\n", "rx_bytes: 1\nNIC statistics:\n", ": 5\n"}) {
    absl::Status st = ParseEthtoolStatsText(bad, &s);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_TRUE(absl::IsDataLoss(st)) << bad;  // UnparsableError
    EXPECT_TRUE(s.names.empty()) << bad;
  }
}

TEST(EthtoolTextTest, ValuesOnlyPathDetectsNameChanges) {
  std::vector<std::string> names = {"rx_prio0_pause", "tx_prio0_pause"};
  std::vector<uint64_t> values;
  bool match = false;
  ASSERT_TRUE(
      ParseEthtoolStatsValues("rx_prio0_pause: 5\n tx_prio0_pause: 6\n", names, &values, &match)
          .ok());
  EXPECT_TRUE(match);
  EXPECT_EQ(values, (std::vector<uint64_t>{5, 6}));
  ASSERT_TRUE(ParseEthtoolStatsValues("rx_prio0_pause: 5\nrx_prio3_pause: 1\ntx_prio0_pause: 6\n",
                                      names, &values, &match)
                  .ok());
  EXPECT_FALSE(match);
  ASSERT_TRUE(ParseEthtoolStatsValues("rx_prio0_pause: 5\n", names, &values, &match).ok());
  EXPECT_FALSE(match);  // fewer names
  EXPECT_FALSE(ParseEthtoolStatsValues("rx_prio0_pause: x\n", names, &values, &match).ok());
}

// The values-only parse reads a line of the expected name without the
// general split; it must agree with the full parse on every fixture and
// stay as strict on every line, whether or not the line's name is mapped.
TEST(EthtoolTextTest, ValuesOnlyPathAgreesWithTheFullParse) {
  for (const char* file :
       {"mlx5/ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt", "other/bnxt_en_10g_k4.18_statistics.txt",
        "other/i40e_10g_k4.18_statistics.txt", "other/ice_25g_k4.18_statistics.txt"}) {
    const std::string text = Fixture(file);
    EthtoolTextStats s;
    ASSERT_TRUE(ParseEthtoolStatsText(text, &s).ok()) << file;
    std::vector<uint64_t> values;
    bool match = false;
    ASSERT_TRUE(ParseEthtoolStatsValues(text, s.names, &values, &match).ok()) << file;
    EXPECT_TRUE(match) << file;
    EXPECT_EQ(values, s.values) << file;
  }
  const std::vector<std::string> names = {"[0]: rx_ucast", "tx_pause_storm_warning_events",
                                          "rx_bytes"};
  std::vector<uint64_t> values;
  bool match = false;
  ASSERT_TRUE(ParseEthtoolStatsValues("NIC statistics:\n\t[0]: rx_ucast: 7\n# comment\n\n"
                                      "  tx_pause_storm_warning_events : 2 \n"
                                      "rx_bytes:18446744073709551615\n",
                                      names, &values, &match)
                  .ok());
  EXPECT_TRUE(match);
  EXPECT_EQ(values, (std::vector<uint64_t>{7, 2, 18446744073709551615u}));
  // A name that only starts with the expected one, or a second ':' after
  // it, is another name.
  for (const char* other :
       {"[0]: rx_ucast_x: 7\ntx_pause_storm_warning_events: 2\nrx_bytes: 1\n",
        "[0]: rx_ucast: 7: 8\ntx_pause_storm_warning_events: 2\nrx_bytes: 1\n"}) {
    ASSERT_TRUE(ParseEthtoolStatsValues(other, names, &values, &match).ok()) << other;
    EXPECT_FALSE(match) << other;
  }
  // Garbage on any line is an error, as in the full parse.
  for (const char* bad : {"[0]: rx_ucast: 7\ntx_pause_storm_warning_events: 2\nrx_bytes: -1\n",
                          "[0]: rx_ucast: 7\ntx_pause_storm_warning_events: 2x\nrx_bytes: 1\n",
                          "[0]: rx_ucast: 18446744073709551616\ntx_pause_storm_warning_events: "
                          "2\nrx_bytes: 1\n",
                          "[0]: rx_ucast: 7\ntx_pause_storm_warning_events:\nrx_bytes: 1\n"}) {
    absl::Status st = ParseEthtoolStatsValues(bad, names, &values, &match);
    EXPECT_TRUE(absl::IsDataLoss(st)) << bad << ": " << st;
  }
}

}  // namespace
}  // namespace fabricscope
