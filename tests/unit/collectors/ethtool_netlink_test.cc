// Parsing of ethtool netlink pause/FEC statistics nests, built with libnl the
// way the kernel lays them out (values from the netlink_examples fixtures:
// `ethtool -I --show-fec` and `ethtool -I -a` outputs quoted in the patches
// that added the statistics).
#include "collectors/ethtool_netlink.h"

#include <linux/ethtool_netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

class Msg {
 public:
  Msg() : msg_(nlmsg_alloc()) {}
  ~Msg() { nlmsg_free(msg_); }
  nl_msg* get() { return msg_; }

 private:
  nl_msg* msg_;
};

TEST(EthtoolNetlinkTest, FecStatsTotalAndLanes) {
  // ethtool_show_fec_stats_kuba_20210415.txt: corrected 256 (lanes 255, 1),
  // uncorrectable 145 (lanes 128, 17).
  Msg m;
  nlattr* nest = nla_nest_start(m.get(), ETHTOOL_A_FEC_STATS);
  const uint64_t corr[] = {256, 255, 1};
  const uint64_t uncorr[] = {145, 128, 17};
  const uint64_t bits[] = {9000};
  ASSERT_EQ(nla_put(m.get(), ETHTOOL_A_FEC_STAT_CORRECTED, sizeof(corr), corr), 0);
  ASSERT_EQ(nla_put(m.get(), ETHTOOL_A_FEC_STAT_UNCORR, sizeof(uncorr), uncorr), 0);
  ASSERT_EQ(nla_put(m.get(), ETHTOOL_A_FEC_STAT_CORR_BITS, sizeof(bits), bits), 0);
  nla_nest_end(m.get(), nest);
  absl::StatusOr<FecStats> s = ParseFecStatsNest(nest);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->corrected, (std::vector<uint64_t>{256, 255, 1}));
  EXPECT_EQ(s->uncorrectable, (std::vector<uint64_t>{145, 128, 17}));
  EXPECT_EQ(s->corrected_bits, (std::vector<uint64_t>{9000}));
}

TEST(EthtoolNetlinkTest, EmptyFecNestIsUnsupported) {
  Msg m;
  nlattr* nest = nla_nest_start(m.get(), ETHTOOL_A_FEC_STATS);
  nla_nest_end(m.get(), nest);
  EXPECT_TRUE(absl::IsUnimplemented(ParseFecStatsNest(nest).status()));
  EXPECT_TRUE(absl::IsUnimplemented(ParseFecStatsNest(nullptr).status()));
}

TEST(EthtoolNetlinkTest, PauseStats) {
  // ethtool_pause_stats_kuba_20201006.txt: tx_pause_frames 1, rx_pause_frames 1;
  // use distinct values to tell the directions apart.
  Msg m;
  nlattr* nest = nla_nest_start(m.get(), ETHTOOL_A_PAUSE_STATS);
  ASSERT_EQ(nla_put_u64(m.get(), ETHTOOL_A_PAUSE_STAT_TX_FRAMES, 759657), 0);
  ASSERT_EQ(nla_put_u64(m.get(), ETHTOOL_A_PAUSE_STAT_RX_FRAMES, 3), 0);
  nla_nest_end(m.get(), nest);
  absl::StatusOr<PauseStats> s = ParsePauseStatsNest(nest);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tx_frames, 759657u);
  EXPECT_EQ(s->rx_frames, 3u);
}

TEST(EthtoolNetlinkTest, PauseNestWithoutStatsIsUnsupported) {
  Msg m;
  nlattr* nest = nla_nest_start(m.get(), ETHTOOL_A_PAUSE_STATS);
  nla_nest_end(m.get(), nest);
  EXPECT_TRUE(absl::IsUnimplemented(ParsePauseStatsNest(nest).status()));
}

TEST(EthtoolNetlinkTest, UnknownNetdevOnTheRealKernel) {
  // The real generic netlink path: a name no interface has. A kernel without
  // the ethtool family answers Unimplemented, one with it ENODEV (NotFound).
  EthtoolNetlink nl;
  absl::StatusOr<PauseStats> s = nl.GetPauseStats("fsnosuchdev0");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsNotFound(s.status()) || absl::IsUnimplemented(s.status())) << s.status();
  // Loopback has no pause/FEC operations: unsupported, never a crash.
  absl::StatusOr<FecStats> f = nl.GetFecStats("lo");
  ASSERT_FALSE(f.ok());
  EXPECT_TRUE(absl::IsUnimplemented(f.status())) << f.status();
}

}  // namespace
}  // namespace fabricscope
