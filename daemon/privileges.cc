#include "daemon/privileges.h"

#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
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

std::string CurrentUserDescription() {
  const uid_t uid = getuid();
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return absl::StrCat(pw.pw_name, " (uid ", uid, ")");
  }
  return absl::StrCat("uid ", uid);
}

namespace {

// The nearest ancestor of `path` that exists ("." for a relative path with
// none).
std::string NearestExisting(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  std::error_code ec;
  while (!p.empty() && !std::filesystem::exists(p, ec)) {
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  return p.empty() ? std::string(".") : p.string();
}

// For a socket the daemon may not connect to: its group, which is how access
// to one is granted (lldpd: root:_lldpd, mode 0770). "" when unknown.
std::string SocketGroupHint(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || (st.st_mode & S_IWGRP) == 0) return "";
  std::string group = absl::StrCat(st.st_gid);
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* found = nullptr;
  if (getgrgid_r(st.st_gid, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    group = found->gr_name;
  }
  return absl::StrCat("; the socket is open to group ", group,
                      ": run the daemon with it (systemd: SupplementaryGroups=", group,
                      ", as the packaged unit does for _lldpd; --user: usermod -aG ", group,
                      " USER)");
}

}  // namespace

std::vector<std::string> CheckPathAccess(const std::vector<PathUse>& uses) {
  std::vector<std::string> problems;
  for (const PathUse& use : uses) {
    if (use.path.empty() || use.access == PathUse::Access::kNone) continue;
    const char* what = "";
    int mode = R_OK;
    switch (use.access) {
      case PathUse::Access::kNone:
      case PathUse::Access::kReadFile:
        what = "is not readable";
        mode = R_OK;
        break;
      case PathUse::Access::kReadDir:
        what = "is not readable";
        mode = R_OK | X_OK;
        break;
      case PathUse::Access::kWriteDir:
        what = "is not writable";
        mode = W_OK | X_OK;
        break;
      case PathUse::Access::kSocket:
        what = "cannot be connected to";
        mode = W_OK;
        break;
    }
    if (access(use.path.c_str(), mode) == 0) continue;
    const int err = errno;
    if (err == ENOENT) {
      if (use.access != PathUse::Access::kWriteDir) continue;
      const std::string parent = NearestExisting(use.path);
      if (access(parent.c_str(), W_OK | X_OK) == 0) continue;
      problems.push_back(absl::StrCat("--", use.option, " ", use.path,
                                      " does not exist and cannot be created (", parent, ": ",
                                      std::strerror(errno), ")"));
      continue;
    }
    std::string problem =
        absl::StrCat("--", use.option, " ", use.path, " ", what, " (", std::strerror(err), ")");
    if (use.access == PathUse::Access::kSocket && err == EACCES) {
      absl::StrAppend(&problem, SocketGroupHint(use.path));
    }
    problems.push_back(std::move(problem));
  }
  return problems;
}

}  // namespace fabricscope
