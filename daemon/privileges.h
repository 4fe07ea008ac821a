// Least privilege (issue #10): no collector needs root — sysfs counter files
// are world-readable, rtnetlink link stats, dcbnl gets and the ethtool
// GSTATS ioctl / genetlink gets work for any user — so the daemon refuses to
// start as root unless --allow-root, or switches to --user once its listeners
// are bound (ports below 1024 stay usable). Two opt-ins of the rdma_netlink
// collector need CAP_NET_ADMIN (--rdma-enable-optional-counters,
// --rdma-per-process: the kernel checks it on RDMA netlink STAT_SET); without
// it they are refused by the kernel and counted once as permission_denied,
// everything else runs unprivileged.
//
// Not thread-safe: call from main before Run(). glibc applies setuid/setgid/
// setgroups to every thread of the process, so threads started by Init (the
// HTTP and gRPC servers) drop with it.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace fabricscope {

// OK when the process may go on as it is: not root, root with allow_root, or
// root with a user to switch to. The error says what to do.
absl::Status CheckRootPolicy(bool is_root, bool allow_root, const std::string& user);

// Switches to `user` (its primary group and the supplementary groups the
// group database gives it, none of root's) and sets
// no_new_privs; verifies root cannot be regained. NotFound for an unknown
// user.
absl::Status DropPrivileges(const std::string& user);

}  // namespace fabricscope
