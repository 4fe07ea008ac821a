// Whether this environment can create the network plumbing some collector
// tests need: a veth pair, or a network namespace with a veth pair in it.
// Inside an unprivileged container, a chroot or a user namespace it cannot,
// and those tests report SKIPPED with the reason (GTEST_SKIP) instead of
// failing; as root on a VM (CI) they run.
//
// Each probe runs once per process: it creates the thing with iproute2 and
// deletes it again (names carry the pid, so concurrent test processes never
// collide). FABRICSCOPE_TEST_NO_NETNS=REASON makes both probes answer REASON
// without trying, to test the skip path (tests/e2e/netns_skip_test.sh).
//
// Thread-safety: the probes are function-local statics (initialised once).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fabricscope::net_env {

namespace internal {

// Runs `cmd` through /bin/sh; returns "" on success, else its output (or the
// exit status) as the reason.
inline std::string Try(const std::string& cmd) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return "popen failed";
  std::string out;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && out.size() < 4096) out.append(buf, n);
  const int st = pclose(f);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return "";
  std::string why(absl::StripTrailingAsciiWhitespace(out));
  return why.empty() ? absl::StrCat("exit status ", WIFEXITED(st) ? WEXITSTATUS(st) : -1) : why;
}

inline std::string Simulated() {
  const char* v = std::getenv("FABRICSCOPE_TEST_NO_NETNS");
  if (v == nullptr || *v == '\0') return "";
  return absl::StrCat(v, " (FABRICSCOPE_TEST_NO_NETNS)");
}

}  // namespace internal

// Empty when a veth pair can be created in the current network namespace,
// else why not.
inline const std::string& VethUnavailableReason() {
  static const std::string reason = [] {
    if (std::string s = internal::Simulated(); !s.empty()) return s;
    const std::string a = absl::StrCat("fsp", getpid() % 10000000, "a");
    const std::string b = absl::StrCat("fsp", getpid() % 10000000, "b");
    std::string why = internal::Try(absl::StrCat("ip link add ", a, " type veth peer name ", b));
    if (!why.empty()) return absl::StrCat("cannot create a veth pair (ip link add: ", why, ")");
    internal::Try("ip link del " + a);
    return std::string();
  }();
  return reason;
}

// Empty when a network namespace with a veth pair in it can be created, else
// why not.
inline const std::string& NetnsUnavailableReason() {
  static const std::string reason = [] {
    if (std::string s = internal::Simulated(); !s.empty()) return s;
    const std::string ns = absl::StrCat("fsprobe", getpid());
    std::string why = internal::Try("ip netns add " + ns);
    if (!why.empty()) {
      return absl::StrCat("cannot create a network namespace (ip netns add: ", why, ")");
    }
    why = internal::Try(absl::StrCat("ip -n ", ns, " link add fsp0 type veth peer name fsp1"));
    internal::Try("ip netns del " + ns);
    if (!why.empty()) {
      return absl::StrCat("cannot create a veth pair in a network namespace (ip link add: ", why,
                          ")");
    }
    return std::string();
  }();
  return reason;
}

}  // namespace fabricscope::net_env

// In a TEST body or a fixture's SetUp: skip (with the reason) unless the
// environment can create a veth pair / a network namespace with one.
#define FABRICSCOPE_SKIP_WITHOUT_VETH()                                            \
  do {                                                                             \
    if (const std::string& why_ = ::fabricscope::net_env::VethUnavailableReason(); \
        !why_.empty()) {                                                           \
      GTEST_SKIP() << "needs a veth pair: " << why_;                               \
    }                                                                              \
  } while (0)
#define FABRICSCOPE_SKIP_WITHOUT_NETNS()                                            \
  do {                                                                              \
    if (const std::string& why_ = ::fabricscope::net_env::NetnsUnavailableReason(); \
        !why_.empty()) {                                                            \
      GTEST_SKIP() << "needs a network namespace: " << why_;                        \
    }                                                                               \
  } while (0)
