// A small client for the ethtool generic netlink family (ETHTOOL_GENL_NAME,
// kernel >= 5.6) through libnl-genl: the standard pause-frame statistics
// (ETHTOOL_MSG_PAUSE_GET) and FEC statistics (ETHTOOL_MSG_FEC_GET), both
// requested with ETHTOOL_FLAG_STATS in the request header. See
// ../shared/reference/counters.md section 4.
//
// The request/response exchange is collectors/netlink_transaction.h.
//
// Status codes: UnimplementedError when the kernel lacks the family or the
// driver fills none of the statistics; a kernel error through core/errors.h
// ErrnoToStatus (EOPNOTSUPP/EINVAL: the driver lacks the operation ->
// Unimplemented; ENODEV -> NotFound; EPERM/EACCES -> PermissionDenied); a
// reply or nest that does not parse is UnparsableError (DataLoss); other
// failures are InternalError. The caller remembers "unimplemented" per device
// and request (it does not ask again every tick).
//
// Thread-safety: an EthtoolNetlink is used by one thread at a time (it owns
// one netlink socket). The Parse* functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct nlattr;
struct nl_sock;

namespace fabricscope {

// 802.3 aPAUSEMACCtrlFramesTransmitted/Received; nullopt when the driver does
// not report one of them.
struct PauseStats {
  std::optional<uint64_t> tx_frames;
  std::optional<uint64_t> rx_frames;
};

// Each array is [total, lane0, lane1, ...]; empty when not reported, size 1
// when the driver has no per-lane split.
struct FecStats {
  std::vector<uint64_t> corrected;
  std::vector<uint64_t> uncorrectable;
  std::vector<uint64_t> corrected_bits;
};

// Parse the ETHTOOL_A_PAUSE_STATS / ETHTOOL_A_FEC_STATS nest of a reply.
// A null nest or one with no statistic is UnimplementedError.
absl::StatusOr<PauseStats> ParsePauseStatsNest(const nlattr* stats_nest);
absl::StatusOr<FecStats> ParseFecStatsNest(const nlattr* stats_nest);

// The reply side of one ethtool genl request, apart from the socket so that
// it can be fed raw receive buffers (fuzz/fuzz_netlink.cc): the message walk
// is ScanNetlinkReplies (collectors/netlink_transaction.h) with the family id
// as reply type, then EthtoolReplyStatsNest.
//
// The `stats_attr` attribute among the top-level attributes (max `max_attr`)
// of the reply message at the start of `reply` (as ScanNetlinkReplies /
// NetlinkTransact copied it); nullptr when absent, UnparsableError when the
// message does not parse. Points into `reply`.
absl::StatusOr<const nlattr*> EthtoolReplyStatsNest(std::vector<uint8_t>* reply, int max_attr,
                                                    int stats_attr);

class EthtoolNetlink {
 public:
  EthtoolNetlink();
  ~EthtoolNetlink();
  EthtoolNetlink(const EthtoolNetlink&) = delete;
  EthtoolNetlink& operator=(const EthtoolNetlink&) = delete;

  // Connects and resolves the family on first use; a missing family is
  // remembered (every later call returns UnimplementedError at no cost).
  absl::StatusOr<PauseStats> GetPauseStats(const std::string& netdev);
  absl::StatusOr<FecStats> GetFecStats(const std::string& netdev);

 private:
  absl::Status Connect();
  // Sends one GET for `netdev` with the stats flag and parses the reply's
  // `stats_attr` nest out of the top-level attributes (max `max_attr`).
  absl::StatusOr<const nlattr*> Request(uint8_t cmd, int header_attr, int stats_attr, int max_attr,
                                        const std::string& netdev);

  nl_sock* sock_ = nullptr;
  int family_ = -1;
  absl::Status connect_status_;  // sticky failure of Connect()
  bool connected_ = false;
  std::vector<uint8_t> reply_;  // the last reply message (the returned nest points into it)
};

}  // namespace fabricscope
