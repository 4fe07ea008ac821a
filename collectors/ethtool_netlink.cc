#include "collectors/ethtool_netlink.h"

#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectors/netlink_transaction.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

std::vector<uint64_t> U64Array(const nlattr* a) {
  std::vector<uint64_t> out;
  if (a == nullptr) return out;
  int len = nla_len(a);
  out.resize(static_cast<size_t>(len) / sizeof(uint64_t));
  if (!out.empty()) memcpy(out.data(), nla_data(a), out.size() * sizeof(uint64_t));
  return out;
}

}  // namespace

absl::StatusOr<PauseStats> ParsePauseStatsNest(const nlattr* stats_nest) {
  if (stats_nest == nullptr) return absl::UnimplementedError("no pause statistics in the reply");
  nlattr* tb[ETHTOOL_A_PAUSE_STAT_MAX + 1] = {};
  if (nla_parse_nested(tb, ETHTOOL_A_PAUSE_STAT_MAX, const_cast<nlattr*>(stats_nest), nullptr) <
      0) {
    return UnparsableError("malformed pause statistics nest");
  }
  PauseStats out;
  if (tb[ETHTOOL_A_PAUSE_STAT_TX_FRAMES] != nullptr &&
      nla_len(tb[ETHTOOL_A_PAUSE_STAT_TX_FRAMES]) >= 8) {
    out.tx_frames = nla_get_u64(tb[ETHTOOL_A_PAUSE_STAT_TX_FRAMES]);
  }
  if (tb[ETHTOOL_A_PAUSE_STAT_RX_FRAMES] != nullptr &&
      nla_len(tb[ETHTOOL_A_PAUSE_STAT_RX_FRAMES]) >= 8) {
    out.rx_frames = nla_get_u64(tb[ETHTOOL_A_PAUSE_STAT_RX_FRAMES]);
  }
  if (!out.tx_frames && !out.rx_frames) {
    return absl::UnimplementedError("the driver reports no pause statistics");
  }
  return out;
}

absl::StatusOr<FecStats> ParseFecStatsNest(const nlattr* stats_nest) {
  if (stats_nest == nullptr) return absl::UnimplementedError("no FEC statistics in the reply");
  nlattr* tb[ETHTOOL_A_FEC_STAT_MAX + 1] = {};
  if (nla_parse_nested(tb, ETHTOOL_A_FEC_STAT_MAX, const_cast<nlattr*>(stats_nest), nullptr) < 0) {
    return UnparsableError("malformed FEC statistics nest");
  }
  FecStats out;
  out.corrected = U64Array(tb[ETHTOOL_A_FEC_STAT_CORRECTED]);
  out.uncorrectable = U64Array(tb[ETHTOOL_A_FEC_STAT_UNCORR]);
  out.corrected_bits = U64Array(tb[ETHTOOL_A_FEC_STAT_CORR_BITS]);
  if (out.corrected.empty() && out.uncorrectable.empty() && out.corrected_bits.empty()) {
    return absl::UnimplementedError("the driver reports no FEC statistics");
  }
  return out;
}

EthtoolNetlink::EthtoolNetlink() = default;

EthtoolNetlink::~EthtoolNetlink() {
  if (sock_ != nullptr) nl_socket_free(sock_);
}

absl::Status EthtoolNetlink::Connect() {
  if (connected_) return absl::OkStatus();
  if (!connect_status_.ok()) return connect_status_;
  sock_ = nl_socket_alloc();
  if (sock_ == nullptr) {
    connect_status_ = absl::UnimplementedError("ethtool netlink: cannot allocate a socket");
    return connect_status_;
  }
  int err = genl_connect(sock_);
  if (err < 0) {
    connect_status_ =
        absl::UnimplementedError(absl::StrCat("ethtool netlink: genl connect: ", nl_geterror(err)));
    return connect_status_;
  }
  // The kernel answers a doit request synchronously, but never block a tier
  // thread for long on a lost reply.
  timeval tv{.tv_sec = 1, .tv_usec = 0};
  setsockopt(nl_socket_get_fd(sock_), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  family_ = genl_ctrl_resolve(sock_, ETHTOOL_GENL_NAME);
  if (family_ < 0) {
    connect_status_ = absl::UnimplementedError(
        absl::StrCat("ethtool netlink family absent: ", nl_geterror(family_)));
    return connect_status_;
  }
  // From here on: errors still come back as NLMSG_ERROR, but no ACK follows a
  // successful reply (none would be left queued for the next request).
  nl_socket_disable_auto_ack(sock_);
  connected_ = true;
  return absl::OkStatus();
}

absl::StatusOr<const nlattr*> EthtoolReplyStatsNest(std::vector<uint8_t>* reply, int max_attr,
                                                    int stats_attr) {
  auto* rh = reinterpret_cast<nlmsghdr*>(reply->data());
  std::vector<nlattr*> tb(max_attr + 1, nullptr);
  if (reply->size() < NLMSG_HDRLEN || reply->size() < rh->nlmsg_len ||
      genlmsg_parse(rh, 0, tb.data(), max_attr, nullptr) < 0) {
    return UnparsableError("malformed ethtool netlink reply");
  }
  return static_cast<const nlattr*>(tb[stats_attr]);
}

absl::StatusOr<const nlattr*> EthtoolNetlink::Request(uint8_t cmd, int header_attr, int stats_attr,
                                                      int max_attr, const std::string& netdev) {
  if (absl::Status s = Connect(); !s.ok()) return s;
  nl_msg* msg = nlmsg_alloc();
  if (msg == nullptr) return absl::InternalError("nlmsg_alloc failed");
  bool built = genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family_, 0, NLM_F_REQUEST, cmd,
                           ETHTOOL_GENL_VERSION) != nullptr;
  nlattr* hdr = built ? nla_nest_start(msg, header_attr) : nullptr;
  built = hdr != nullptr && nla_put_string(msg, ETHTOOL_A_HEADER_DEV_NAME, netdev.c_str()) == 0 &&
          nla_put_u32(msg, ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_STATS) == 0 &&
          nla_nest_end(msg, hdr) == 0;
  if (!built) {
    nlmsg_free(msg);
    return absl::InternalError("cannot build the ethtool netlink request");
  }
  // Reads until the reply (or the error) for our sequence number arrives;
  // bounded, a stale message from an earlier timed-out request is skipped.
  absl::Status s = NetlinkTransact(
      sock_, msg, family_, absl::StrCat("ethtool netlink cmd ", cmd, " on ", netdev), &reply_);
  nlmsg_free(msg);
  if (!s.ok()) return s;
  if (reply_.empty()) return absl::InternalError("no ethtool netlink reply");
  return EthtoolReplyStatsNest(&reply_, max_attr, stats_attr);
}

absl::StatusOr<PauseStats> EthtoolNetlink::GetPauseStats(const std::string& netdev) {
  absl::StatusOr<const nlattr*> nest = Request(ETHTOOL_MSG_PAUSE_GET, ETHTOOL_A_PAUSE_HEADER,
                                               ETHTOOL_A_PAUSE_STATS, ETHTOOL_A_PAUSE_MAX, netdev);
  if (!nest.ok()) return nest.status();
  return ParsePauseStatsNest(*nest);
}

absl::StatusOr<FecStats> EthtoolNetlink::GetFecStats(const std::string& netdev) {
  absl::StatusOr<const nlattr*> nest = Request(ETHTOOL_MSG_FEC_GET, ETHTOOL_A_FEC_HEADER,
                                               ETHTOOL_A_FEC_STATS, ETHTOOL_A_FEC_MAX, netdev);
  if (!nest.ok()) return nest.status();
  return ParseFecStatsNest(*nest);
}

}  // namespace fabricscope
