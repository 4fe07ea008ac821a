// One netlink request/response transaction on a libnl socket: the exchange
// the ethtool generic-netlink client (collectors/ethtool_netlink.h) and the
// dcbnl source of dcb_config (collectors/dcb_config_collector.h) make for
// every request. (The netdev collector reads through libnl's own
// nl_recvmsgs callback loop and does not use this.)
//
// NetlinkTransact sends one request and receives until the answer to the
// request's sequence number is complete:
//  - a message of `reply_type` carrying our sequence number is part of the
//    answer and is copied, whole, into the reply buffer. Without NLM_F_MULTI
//    it is the whole answer; with NLM_F_MULTI (a multipart answer, e.g. a
//    dump) messages are gathered until an NLMSG_DONE with our sequence
//    number;
//  - an NLMSG_ERROR with our sequence number and a non-zero error ends the
//    transaction with ErrnoToStatus(NetlinkErrno(error), what) (core/errors.h:
//    EOPNOTSUPP/EINVAL -> Unimplemented, ENODEV -> NotFound, EPERM ->
//    PermissionDenied, a malformed error field -> DataLoss); an ACK (error
//    0) or an NLMSG_ERROR too short to hold its error is skipped;
//  - messages with another sequence number (the late answer of an earlier
//    request that timed out) and of other types are skipped.
// Bounds: at most kNetlinkMaxReceives receives, each waiting at most the
// socket's SO_RCVTIMEO (the caller sets it: 1 s for ethtool and dcbnl), so a
// lost answer cannot stall a tier thread for long. A send or receive failure,
// or no complete answer within the bound, is InternalError.
//
// The reply buffer holds the answer's messages back to back, each padded to
// NLMSG_ALIGNTO: walk it with nlmsg_ok/nlmsg_next (a single answer is just
// its one message at offset 0).
//
// ScanNetlinkReplies is the receive side on one buffer, apart from the
// socket, so that tests and fuzz/fuzz_netlink.cc can feed it raw bytes.
//
// Thread-safety: a socket is used by one thread at a time; the scan is pure.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

struct nl_msg;
struct nl_sock;

namespace fabricscope {

inline constexpr int kNetlinkMaxReceives = 8;

struct NetlinkScan {
  enum Kind {
    kMore,      // the answer is not complete: receive again
    kComplete,  // the answer is in the reply buffer
    kError,     // the kernel answered an error: `error`
  } kind = kMore;
  absl::Status error;
};

// Walks one receive buffer of `n` bytes for the answer to request `seq`
// (rules above), appending the answer's messages of `reply_type` to
// *replies. `what` names the request in an error's message.
NetlinkScan ScanNetlinkReplies(unsigned char* buf, int n, uint32_t seq, int reply_type,
                               absl::string_view what, std::vector<uint8_t>* replies);

// Sends `request` (still owned by the caller) on `sock` and receives its
// answer into *replies (cleared first). OK when the answer is complete.
absl::Status NetlinkTransact(nl_sock* sock, nl_msg* request, int reply_type, absl::string_view what,
                             std::vector<uint8_t>* replies);

}  // namespace fabricscope
