// Parsing of ethtool netlink pause/FEC statistics nests, built with libnl the
// way the kernel lays them out (values from the netlink_examples fixtures:
// `ethtool -I --show-fec` and `ethtool -I -a` outputs quoted in the patches
// that added the statistics).
#include "collectors/ethtool_netlink.h"
#include "collectors/netlink_transaction.h"

#include <linux/ethtool_netlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

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

// The reply walk on a hand-made receive buffer: an ACK and a stale message
// are skipped, the family's reply is found, kernel errors become statuses,
// and an error field that is not a negated errno (INT_MIN) does not overflow.
TEST(EthtoolNetlinkTest, ReplyScan) {
  struct ErrorMsg {
    nlmsghdr hdr;
    nlmsgerr err;
  };
  auto error_msg = [](uint32_t seq, int error) {
    ErrorMsg m{};
    m.hdr.nlmsg_len = sizeof m;
    m.hdr.nlmsg_type = NLMSG_ERROR;
    m.hdr.nlmsg_seq = seq;
    m.err.error = error;
    return std::string(reinterpret_cast<const char*>(&m), sizeof m);
  };
  constexpr int kFamily = 29;
  Msg reply;
  ASSERT_NE(genlmsg_put(reply.get(), 0, 7, kFamily, 0, 0, ETHTOOL_MSG_PAUSE_GET_REPLY, 1), nullptr);
  nlattr* nest = nla_nest_start(reply.get(), ETHTOOL_A_PAUSE_STATS);
  ASSERT_EQ(nla_put_u64(reply.get(), ETHTOOL_A_PAUSE_STAT_TX_FRAMES, 42), 0);
  nla_nest_end(reply.get(), nest);
  const nlmsghdr* rh = nlmsg_hdr(reply.get());
  const std::string reply_bytes(reinterpret_cast<const char*>(rh), NLMSG_ALIGN(rh->nlmsg_len));

  auto scan = [&](std::string bytes, uint32_t seq, std::vector<uint8_t>* out) {
    std::vector<uint64_t> buf((bytes.size() + 7) / 8);
    memcpy(buf.data(), bytes.data(), bytes.size());
    out->clear();
    return ScanNetlinkReplies(reinterpret_cast<unsigned char*>(buf.data()),
                              static_cast<int>(bytes.size()), seq, kFamily, "pause on eth0", out);
  };
  std::vector<uint8_t> out;
  // Stale error (another seq), an ACK for ours, then our reply.
  NetlinkScan r = scan(error_msg(6, -EINVAL) + error_msg(7, 0) + reply_bytes, 7, &out);
  ASSERT_EQ(r.kind, NetlinkScan::kComplete);
  EXPECT_EQ(out.size(), reply_bytes.size());
  absl::StatusOr<const nlattr*> stats =
      EthtoolReplyStatsNest(&out, ETHTOOL_A_PAUSE_MAX, ETHTOOL_A_PAUSE_STATS);
  ASSERT_TRUE(stats.ok() && *stats != nullptr);
  absl::StatusOr<PauseStats> p = ParsePauseStatsNest(*stats);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tx_frames, 42u);
  // Nothing for us: read on.
  EXPECT_EQ(scan(reply_bytes, 8, &out).kind, NetlinkScan::kMore);
  EXPECT_TRUE(out.empty());
  // Kernel errors.
  r = scan(error_msg(7, -EOPNOTSUPP), 7, &out);
  ASSERT_EQ(r.kind, NetlinkScan::kError);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(std::string(r.error.message()).find("pause on eth0"), std::string::npos);
  // A malformed error field is a malformed message: DataLoss (core/errors.h).
  r = scan(error_msg(7, INT32_MIN), 7, &out);
  ASSERT_EQ(r.kind, NetlinkScan::kError);
  EXPECT_EQ(r.error.code(), absl::StatusCode::kDataLoss);
  // An NLMSG_ERROR too short to hold its error is skipped.
  std::string short_error = error_msg(7, -EPERM).substr(0, sizeof(nlmsghdr) + 2);
  reinterpret_cast<nlmsghdr*>(short_error.data())->nlmsg_len = short_error.size();
  EXPECT_EQ(scan(short_error, 7, &out).kind, NetlinkScan::kMore);
}

// A multipart answer: NLM_F_MULTI messages are gathered until NLMSG_DONE of
// our sequence number; the gathered buffer walks as a netlink stream.
TEST(NetlinkTransactionTest, MultipartUntilDone) {
  constexpr int kType = 40;
  auto msg = [](uint16_t type, uint16_t flags, uint32_t seq, uint32_t payload) {
    struct {
      nlmsghdr hdr;
      uint32_t payload;
    } m{};
    m.hdr.nlmsg_len = sizeof m;
    m.hdr.nlmsg_type = type;
    m.hdr.nlmsg_flags = flags;
    m.hdr.nlmsg_seq = seq;
    m.payload = payload;
    return std::string(reinterpret_cast<const char*>(&m), sizeof m);
  };
  auto scan = [](const std::string& bytes, std::vector<uint8_t>* out) {
    std::vector<uint64_t> buf((bytes.size() + 7) / 8);
    memcpy(buf.data(), bytes.data(), bytes.size());
    return ScanNetlinkReplies(reinterpret_cast<unsigned char*>(buf.data()),
                              static_cast<int>(bytes.size()), 3, kType, "dump", out);
  };
  std::vector<uint8_t> out;
  // First receive: two parts (and one of another request); not complete.
  EXPECT_EQ(scan(msg(kType, NLM_F_MULTI, 3, 1) + msg(kType, NLM_F_MULTI, 2, 9) +
                     msg(kType, NLM_F_MULTI, 3, 2),
                 &out)
                .kind,
            NetlinkScan::kMore);
  // Second receive: the third part and DONE.
  EXPECT_EQ(scan(msg(kType, NLM_F_MULTI, 3, 3) + msg(NLMSG_DONE, NLM_F_MULTI, 3, 0), &out).kind,
            NetlinkScan::kComplete);
  std::vector<uint32_t> payloads;
  int n = static_cast<int>(out.size());
  for (nlmsghdr* h = reinterpret_cast<nlmsghdr*>(out.data()); nlmsg_ok(h, n);
       h = nlmsg_next(h, &n)) {
    EXPECT_EQ(h->nlmsg_type, kType);
    uint32_t p;
    memcpy(&p, nlmsg_data(h), sizeof p);
    payloads.push_back(p);
  }
  EXPECT_EQ(payloads, (std::vector<uint32_t>{1, 2, 3}));
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
