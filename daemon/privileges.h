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
#include <vector>

#include "absl/status/status.h"
#include "core/options.h"

namespace fabricscope {

// OK when the process may go on as it is: not root, root with allow_root, or
// root with a user to switch to. The error says what to do.
absl::Status CheckRootPolicy(bool is_root, bool allow_root, const std::string& user);

// Switches to `user` (its primary group and the supplementary groups the
// group database gives it, none of root's) and sets
// no_new_privs; verifies root cannot be regained. NotFound for an unknown
// user.
absl::Status DropPrivileges(const std::string& user);

// The user the process runs as, for messages: "nobody (uid 65534)".
std::string CurrentUserDescription();

// A configured path and what the daemon does with it after start-up (after
// --user took effect): the files and directories it opens later -- the
// topology file and hwloc XML re-read at the config tier, the web config
// reloaded on SIGHUP, the sysfs/ethtool/dcb trees polled, the state and
// incident directories written -- fail there the same way as at start.
struct PathUse {
  using Access = PathAccess;  // core/options.h (kNone: not checked)
  std::string option;         // "hwloc-xml"
  std::string path;
  Access access = Access::kReadFile;
};

// One line per path the current user cannot use as `access` says, naming
// the option, the path, the access wanted and the error ("--hwloc-xml
// /root/t.xml is not readable (Permission denied)"). A path that does not
// exist is not a problem for reads and sockets (the collectors look again
// later and count it); a missing directory to write is one only when it
// cannot be created (no write access to its nearest existing ancestor).
// Uses access(2): the real uid, which is the effective one after --user.
std::vector<std::string> CheckPathAccess(const std::vector<PathUse>& uses);

}  // namespace fabricscope
