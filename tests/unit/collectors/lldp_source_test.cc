// The LLDP link-partner source (collectors/lldp_source.h).
//
// LldpSourceTest: the failure paths over sockets this test makes (nothing
// there, nothing listening, a peer that never answers, a peer that hangs up):
// the right status, bounded in time, no crash. No privileges needed.
//
// LldpSourceVethTest: the real thing on the real kernel. Two network
// namespaces joined by a veth pair (unique names, removed afterwards), a real
// lldpd started by the test in each (foreground, its own control socket, only
// the veth, 1 s transmit interval, a system name of our choosing); the source
// reads namespace A's lldpd over its socket. The partner appears with B's
// system name, port id (the MAC of B's veth: lldpd's port id subtype for a
// veth) and port description (B's ifname); it changes when B's system name
// changes; the source follows A's lldpd across a restart; the partner goes
// when B's lldpd stops (it sends a shutdown LLDPDU; else its 4 s TTL ends).
// Runs as root (creates namespaces), as CI does, and reports SKIPPED with the
// reason where no namespace can be created (net_env.h); needs lldpd and lldpcli
// (deploy/bootstrap.sh installs them). Every wait has a deadline with a wide
// margin (a loaded 2-core machine), and the namespaces and lldpd processes are
// removed even when an assertion fails.
#include "collectors/lldp_source.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/unit/collectors/net_env.h"

namespace fabricscope {
namespace lldp_source_test {
namespace {

using Clock = std::chrono::steady_clock;

int Sh(const std::string& cmd) {
  int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string ShOut(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[256];
  while (fgets(buf, sizeof(buf), f) != nullptr) out += buf;
  pclose(f);
  return std::string(absl::StripTrailingAsciiWhitespace(out));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Describe(const absl::StatusOr<std::vector<LinkPartner>>& r) {
  if (!r.ok()) return r.status().ToString();
  std::vector<std::string> parts;
  for (const auto& p : *r) {
    parts.push_back(absl::StrCat("{netdev=", p.netdev, " source=", p.source,
                                 " chassis=", p.chassis_id, " name=", p.system_name,
                                 " port_id=", p.port_id, " descr=", p.port_description, "}"));
  }
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

// A private temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/fslldp.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) Sh("rm -rf " + path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<LinkPartner> NoPartners() { return {}; }

// --- failure paths ---------------------------------------------------------

TEST(LldpSourceTest, NameIsLldp) { EXPECT_EQ(MakeLldpSource("/nonexistent")->name(), "lldp"); }

TEST(LldpSourceTest, NothingThereIsUnimplementedAndCheap) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string missing = dir.path() + "/missing.sock";
  auto source = MakeLldpSource(missing);
  auto start = Clock::now();
  for (int i = 0; i < 200; ++i) {
    auto r = source->Partners({}, {});
    ASSERT_FALSE(r.ok());
    ASSERT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
    ASSERT_NE(r.status().message().find("lldpd not reachable at " + missing), std::string::npos)
        << r.status();
  }
  // 200 failed attempts: a socket() and a connect() each, far below 2 s.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));

  // A socket file nobody listens on (bound, no listen(): a stale socket of a
  // dead lldpd looks the same): connection refused.
  const std::string stale = dir.path() + "/stale.sock";
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, stale.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  auto r = MakeLldpSource(stale)->Partners({}, {});
  close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_NE(r.status().message().find("lldpd not reachable at " + stale), std::string::npos);

  // A regular file where the socket should be: refused as well.
  const std::string file = dir.path() + "/file.sock";
  std::ofstream(file) << "not a socket\n";
  r = MakeLldpSource(file)->Partners({}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
}

TEST(LldpSourceTest, PathTooLongIsInvalidArgument) {
  auto r = MakeLldpSource("/tmp/" + std::string(200, 'x'))->Partners({}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

// A listening unix socket at DIR/name.sock; `serve` (if any) runs on a thread
// with the listening fd.
class FakeLldpd {
 public:
  FakeLldpd(const std::string& path, std::function<void(int)> serve) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          listen(fd_, 4) == 0;
    if (ok_ && serve) thread_ = std::thread(serve, fd_);
  }
  ~FakeLldpd() {
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  std::thread thread_;
};

TEST(LldpSourceTest, SilentPeerIsBoundedByTheTimeout) {
  TempDir dir;
  const std::string path = dir.path() + "/silent.sock";
  // Listens, never accepts, never answers: connect() succeeds (the backlog),
  // the request fits in the socket buffer, the answer never comes.
  FakeLldpd silent(path, nullptr);
  ASSERT_TRUE(silent.ok());
  auto source = MakeLldpSource(path, absl::Milliseconds(300));
  for (int i = 0; i < 2; ++i) {
    auto start = Clock::now();
    auto r = source->Partners({}, {});
    auto took = Clock::now() - start;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    EXPECT_GE(took, std::chrono::milliseconds(250));
    EXPECT_LT(took, std::chrono::seconds(3));
  }
}

TEST(LldpSourceTest, PeerThatHangsUpIsUnavailable) {
  TempDir dir;
  const std::string path = dir.path() + "/hangup.sock";
  // Accepts, reads the request, closes without an answer (lldpd stopping
  // mid-exchange).
  FakeLldpd hangup(path, [](int lfd) {
    int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) return;
    char buf[64];
    (void)!read(c, buf, sizeof(buf));
    close(c);
  });
  ASSERT_TRUE(hangup.ok());
  auto start = Clock::now();
  auto r = MakeLldpSource(path, absl::Seconds(5))->Partners({}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));  // not the timeout
}

// --- real lldpd on a veth pair ---------------------------------------------

// Two namespaces, a veth pair between them, an lldpd in each.
class LldpPair {
 public:
  LldpPair()
      : ns_{absl::StrCat("fslldpa", getpid()), absl::StrCat("fslldpb", getpid())},
        if_{absl::StrCat("fsla", getpid() % 1000000), absl::StrCat("fslb", getpid() % 1000000)} {}
  ~LldpPair() {
    for (int i = 0; i < 2; ++i) Stop(i);
    for (int i = 0; i < 2; ++i) {
      if (created_[i]) Sh("ip netns del " + ns_[i]);
    }
  }

  bool Setup(std::string* why) {
    if (dir_.path().empty()) {
      *why = "mkdtemp failed";
      return false;
    }
    // lldpd runs lldpcli on its start-up configuration as its unprivileged
    // user (_lldpd), which must reach the socket in our directory.
    if (chmod(dir_.path().c_str(), 0755) != 0) {
      *why = "chmod of the temporary directory failed";
      return false;
    }
    if (Sh("{ command -v lldpd && command -v lldpcli; }") != 0) {
      *why = "lldpd/lldpcli not installed (deploy/bootstrap.sh installs the lldpd package)";
      return false;
    }
    for (int i = 0; i < 2; ++i) {
      if (Sh("ip netns add " + ns_[i]) != 0) {
        *why = "ip netns add failed (needs root and iproute2; CI runs tests as root)";
        return false;
      }
      created_[i] = true;
    }
    if (Sh(absl::StrCat("ip link add ", if_[0], " netns ", ns_[0], " type veth peer name ", if_[1],
                        " netns ", ns_[1])) != 0) {
      *why = "cannot create the veth pair";
      return false;
    }
    for (int i = 0; i < 2; ++i) {
      if (Sh(absl::StrCat("ip -n ", ns_[i], " link set ", if_[i], " up")) != 0) {
        *why = "cannot set the veth up";
        return false;
      }
    }
    return true;
  }

  // Starts lldpd in namespace i on its veth only, with its own control socket
  // and a start-up configuration (1 s transmit interval, system name `name`)
  // instead of /etc/lldpd.conf and /etc/lldpd.d.
  bool Start(int i, const std::string& name, std::string* why) {
    std::string conf = absl::StrCat(dir_.path(), "/lldpd", i, ".conf");
    std::ofstream(conf) << "configure lldp tx-interval 1\n"
                        << "configure system hostname " << name << "\n";
    std::string log = absl::StrCat(dir_.path(), "/lldpd", i, ".log");
    std::string sock = socket(i);  // built before fork(): no allocation in the child
    pid_t pid = fork();
    if (pid < 0) {
      *why = "fork failed";
      return false;
    }
    if (pid == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      // `ip netns exec` enters the namespace and execs lldpd: pid is lldpd's.
      execlp("ip", "ip", "netns", "exec", ns_[i].c_str(), "lldpd", "-d", "-u", sock.c_str(), "-I",
             if_[i].c_str(), "-O", conf.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pid_[i] = pid;
    return true;
  }

  // Stops lldpd i (SIGTERM: it sends a shutdown LLDPDU and removes its
  // socket), SIGKILL after 5 s.
  void Stop(int i) {
    if (pid_[i] <= 0) return;
    kill(pid_[i], SIGTERM);
    auto deadline = Clock::now() + std::chrono::seconds(5);
    while (waitpid(pid_[i], nullptr, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_[i], SIGKILL);
        waitpid(pid_[i], nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pid_[i] = -1;
  }

  // Runs lldpcli against lldpd i; 0 on success.
  int Cli(int i, const std::string& args) {
    return Sh(absl::StrCat("timeout 10 lldpcli -u ", socket(i), " ", args));
  }

  std::string socket(int i) const { return absl::StrCat(dir_.path(), "/lldpd", i, ".sock"); }
  const std::string& ifname(int i) const { return if_[i]; }
  std::string mac(int i) const {
    return ShOut(
        absl::StrCat("ip netns exec ", ns_[i], " cat /sys/class/net/", if_[i], "/address"));
  }
  std::string Logs() const {
    return absl::StrCat("--- lldpd A ---\n", ReadFile(dir_.path() + "/lldpd0.log"),
                        "--- lldpd B ---\n", ReadFile(dir_.path() + "/lldpd1.log"));
  }

 private:
  TempDir dir_;
  std::string ns_[2];
  std::string if_[2];
  bool created_[2] = {false, false};
  pid_t pid_[2] = {-1, -1};
};

// Calls Partners() every 200 ms until `done` holds for the answer or
// `deadline_s` seconds passed; returns the last answer.
absl::StatusOr<std::vector<LinkPartner>> PollUntil(
    LinkPartnerSource& source, int deadline_s,
    const std::function<bool(const absl::StatusOr<std::vector<LinkPartner>>&)>& done) {
  auto deadline = Clock::now() + std::chrono::seconds(deadline_s);
  for (;;) {
    auto r = source.Partners({}, {});
    if (done(r) || Clock::now() > deadline) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

auto HasPartnerNamed(const std::string& name) {
  return [name](const absl::StatusOr<std::vector<LinkPartner>>& r) {
    return r.ok() && r->size() == 1 && (*r)[0].system_name == name;
  };
}

TEST(LldpSourceVethTest, PartnerAppearsChangesFollowsRestartsAndGoes) {
  FABRICSCOPE_SKIP_WITHOUT_NETNS();
  LldpPair pair;
  std::string why;
  ASSERT_TRUE(pair.Setup(&why)) << why;
  const std::string name_a = absl::StrCat("fs-node-a-", getpid());
  const std::string name_b = absl::StrCat("fs-node-b-", getpid());
  ASSERT_TRUE(pair.Start(0, name_a, &why)) << why;
  ASSERT_TRUE(pair.Start(1, name_b, &why)) << why;
  auto source = MakeLldpSource(pair.socket(0));

  // The partner appears: B's system name, B's veth MAC as port id (lldpd's
  // port id subtype on a veth), B's ifname as port description.
  auto r = PollUntil(*source, 30, HasPartnerNamed(name_b));
  ASSERT_TRUE(HasPartnerNamed(name_b)(r)) << Describe(r) << "\n" << pair.Logs();
  const LinkPartner& p = (*r)[0];
  EXPECT_EQ(p.netdev, pair.ifname(0));
  EXPECT_EQ(p.source, "lldp");
  EXPECT_EQ(p.device, "");
  EXPECT_EQ(p.port, 0u);
  const std::string mac_b = pair.mac(1);
  ASSERT_FALSE(mac_b.empty());
  EXPECT_EQ(p.port_id, mac_b);
  EXPECT_EQ(p.port_description, pair.ifname(1));
  // The chassis id is one of B's MACs (lldpd picks it among B's interfaces;
  // in B's namespace the veth is the only one with a MAC).
  EXPECT_EQ(p.chassis_id, mac_b);

  // B's system name changes: the new name shows, the old one is gone.
  const std::string name_b2 = name_b + "-renamed";
  ASSERT_EQ(pair.Cli(1, "configure system hostname " + name_b2), 0) << pair.Logs();
  r = PollUntil(*source, 30, HasPartnerNamed(name_b2));
  ASSERT_TRUE(HasPartnerNamed(name_b2)(r)) << Describe(r) << "\n" << pair.Logs();
  EXPECT_EQ((*r)[0].port_id, mac_b);

  // A's lldpd restarts: unreachable while it is down, then the same source
  // reads the new one.
  pair.Stop(0);
  r = source->Partners({}, {});
  ASSERT_FALSE(r.ok()) << Describe(r);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_NE(r.status().message().find(pair.socket(0)), std::string::npos) << r.status();
  ASSERT_TRUE(pair.Start(0, name_a, &why)) << why;
  r = PollUntil(*source, 30, HasPartnerNamed(name_b2));
  ASSERT_TRUE(HasPartnerNamed(name_b2)(r)) << Describe(r) << "\n" << pair.Logs();

  // B's lldpd stops: the partner goes (shutdown LLDPDU, else the 4 s TTL).
  pair.Stop(1);
  r = PollUntil(*source, 30, [](const auto& r) { return r.ok() && r->empty(); });
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << pair.Logs();
  EXPECT_EQ(*r, NoPartners()) << Describe(r);
}

}  // namespace
}  // namespace lldp_source_test
}  // namespace fabricscope
