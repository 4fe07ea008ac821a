#include "daemon/privileges.h"

#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace fabricscope {

absl::Status CheckRootPolicy(bool is_root, bool allow_root, const std::string& user) {
  if (!is_root || allow_root || !user.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "refusing to run as root: no collector needs privileges. Run as an unprivileged user, "
      "pass --user=NAME to switch once the listeners are bound, or --allow-root");
}

absl::Status DropPrivileges(const std::string& user) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (int rc = getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
      rc != 0 || found == nullptr) {
    return absl::NotFoundError(absl::StrCat("user: no such user '", user, "'"));
  }
  // The user's own supplementary groups from the group database (initgroups),
  // so that access an administrator granted by group membership works: _lldpd
  // for lldpd's control socket, the group of /dev/infiniband/umad* for
  // --ib-mad-topology. Root's groups are dropped either way.
  if (initgroups(pw.pw_name, pw.pw_gid) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("user: initgroups: ", std::strerror(errno)));
  }
  if (setgid(pw.pw_gid) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("user: setgid: ", std::strerror(errno)));
  }
  if (setuid(pw.pw_uid) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("user: setuid: ", std::strerror(errno)));
  }
  if (pw.pw_uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
    return absl::InternalError("user: root could be regained after switching");
  }
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  return absl::OkStatus();
}

}  // namespace fabricscope
