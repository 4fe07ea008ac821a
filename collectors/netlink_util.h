// Small helpers shared by the netlink collectors (netdev, ethtool netlink,
// dcb_config).
#pragma once

#include <cerrno>
#include <climits>

namespace fabricscope {

// The positive errno carried by an NLMSG_ERROR message's `error` field (the
// kernel sends -errno; 0 is an ACK). A value that is not a negated errno
// (positive, or INT_MIN, which cannot be negated) from a malformed or hostile
// message reads as EPROTO instead of overflowing.
inline int NetlinkErrno(int error) {
  if (error < 0 && error != INT_MIN) return -error;
  return error == 0 ? 0 : EPROTO;
}

}  // namespace fabricscope
