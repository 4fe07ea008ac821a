// The real kernel paths (SIOCETHTOOL GSSET_INFO/GSTRINGS/GSTATS, ethtool
// generic netlink PAUSE_GET/FEC_GET, dcbnl IEEE_GET) on a veth pair in a
// network namespace this test creates (unique name, removed afterwards; runs
// as root; SKIPPED with the reason where no namespace can be made, net_env.h).
// veth has ethtool -S stats (peer_ifindex, per-queue XDP counters) that map to
// nothing, and no pause, FEC or DCB: the collectors must read the names,
// export nothing for them, and report "unsupported" exactly once per request
// -- then a deleted netdev is counted once as not found.
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "collectors/dcb_config_collector.h"
#include "collectors/ethtool_collector.h"
#include "collectors/ethtool_stats_source.h"
#include "core/clock.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/unit/collectors/ethtool_test_util.h"
#include "tests/unit/collectors/net_env.h"

namespace fabricscope {
namespace {

using ethtool_test::RecordingContext;

int Sh(const std::string& cmd) {
  int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Creates a namespace with a veth pair and moves the calling thread into it;
// the destructor moves back and deletes the namespace (and the pair with it).
class VethNamespace {
 public:
  VethNamespace()
      : ns_(absl::StrCat("fsethtool", getpid())),
        a_(absl::StrCat("fsva", getpid() % 1000000)),
        b_(absl::StrCat("fsvb", getpid() % 1000000)) {}
  ~VethNamespace() {
    if (orig_fd_ >= 0) {
      setns(orig_fd_, CLONE_NEWNET);
      close(orig_fd_);
    }
    if (created_) Sh("ip netns del " + ns_);
  }
  bool Setup(std::string* why) {
    if (Sh("ip netns add " + ns_) != 0) {
      *why = "ip netns add failed (needs root and iproute2)";
      return false;
    }
    created_ = true;
    if (Sh(absl::StrCat("ip -n ", ns_, " link add ", a_, " type veth peer name ", b_)) != 0 ||
        Sh(absl::StrCat("ip -n ", ns_, " link set ", a_, " up")) != 0 ||
        Sh(absl::StrCat("ip -n ", ns_, " link set ", b_, " up")) != 0) {
      *why = "cannot create the veth pair";
      return false;
    }
    orig_fd_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = open(("/var/run/netns/" + ns_).c_str(), O_RDONLY | O_CLOEXEC);
    if (orig_fd_ < 0 || fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      if (fd >= 0) close(fd);
      *why = "setns failed";
      return false;
    }
    close(fd);
    return true;
  }
  int DeleteA() { return Sh(absl::StrCat("ip -n ", ns_, " link del ", a_)); }
  const std::string& a() const { return a_; }

 private:
  std::string ns_, a_, b_;
  bool created_ = false;
  int orig_fd_ = -1;
};

TEST(EthtoolVethTest, RealIoctlAndNetlinkOnVeth) {
  FABRICSCOPE_SKIP_WITHOUT_NETNS();
  VethNamespace ns;
  std::string why;
  ASSERT_TRUE(ns.Setup(&why)) << why;

  Store store;
  PortInventory ports;
  FakeClock clock;
  // The veth stands in for a RoCE netdev: an RDMA port that owns it.
  ports.Upsert({"rxe_fs0", 1, ns.a(), "Ethernet", "ACTIVE", "10 Gb/sec", true});
  EthtoolCollector c(&store, &ports, &clock, MakeKernelEthtoolSource(), {});
  RecordingContext ctx(&store);
  ASSERT_TRUE(c.Discover(ctx).ok());
  for (int i = 0; i < 10; ++i) {
    clock.Advance(std::chrono::milliseconds(100));
    ctx.Advance();
    ASSERT_TRUE(c.Poll(ctx).ok());
  }
  // GSTRINGS ran: veth reports peer_ifindex + per-queue XDP stats.
  EXPECT_GT(c.NameCount(ns.a()), 0u);
  EXPECT_EQ(c.MappedCount(ns.a()), 0u);
  // Pause and FEC: unsupported, each asked and counted once.
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 2) << ctx.ErrorsText();
  EXPECT_EQ(ctx.errors.size(), 2u) << ctx.ErrorsText();
  for (const auto& s : store.Snapshot()) EXPECT_NE(s.key->netdev, ns.a()) << s.key->name;

  // dcbnl on veth: no dcbnl ops -> unsupported once over several polls.
  DcbConfigCollector dcb(&store, &ports, "/nonexistent-sysfs", NetdevFilter(),
                         MakeKernelDcbSource());
  RecordingContext dctx(&store);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(dcb.Poll(dctx).ok());
  EXPECT_EQ(dctx.Count(CollectorErrorCode::kUnsupported), 1) << dctx.ErrorsText();
  EXPECT_EQ(dctx.errors.size(), 1u) << dctx.ErrorsText();

  // The netdev vanishes: ENODEV counted once, not every tick.
  ASSERT_EQ(ns.DeleteA(), 0);
  for (int i = 0; i < 25; ++i) {
    clock.Advance(std::chrono::milliseconds(100));
    ctx.Advance();
    ASSERT_TRUE(c.Poll(ctx).ok());
  }
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kNotFound), 1) << ctx.ErrorsText();
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kIo), 0) << ctx.ErrorsText();
}

// The link speed through the real ETHTOOL_GLINKSETTINGS handshake: veth reports a fixed
// 10 Gb/s; loopback has no link settings (unsupported); a missing netdev is not found.
TEST(EthtoolVethTest, KernelLinkSpeedOnVeth) {
  FABRICSCOPE_SKIP_WITHOUT_NETNS();
  VethNamespace ns;
  std::string why;
  ASSERT_TRUE(ns.Setup(&why)) << why;
  std::unique_ptr<EthtoolStatsSource> src = MakeKernelEthtoolSource();
  absl::StatusOr<uint32_t> veth = src->LinkSpeedMbps(ns.a());
  ASSERT_TRUE(veth.ok()) << veth.status();
  EXPECT_EQ(*veth, 10000u);
  absl::StatusOr<uint32_t> lo = src->LinkSpeedMbps("lo");
  EXPECT_EQ(CollectorErrorCodeOf(lo.status()), CollectorErrorCode::kUnsupported) << lo.status();
  absl::StatusOr<uint32_t> gone = src->LinkSpeedMbps("fsnosuchdev0");
  EXPECT_EQ(CollectorErrorCodeOf(gone.status()), CollectorErrorCode::kNotFound) << gone.status();
  ASSERT_EQ(ns.DeleteA(), 0);
  gone = src->LinkSpeedMbps(ns.a());
  EXPECT_EQ(CollectorErrorCodeOf(gone.status()), CollectorErrorCode::kNotFound) << gone.status();
}

TEST(EthtoolVethTest, NetdevIncludeSelectsInterfaces) {
  FABRICSCOPE_SKIP_WITHOUT_NETNS();
  VethNamespace ns;
  std::string why;
  ASSERT_TRUE(ns.Setup(&why)) << why;
  Store store;
  PortInventory ports;
  FakeClock clock;
  EthtoolCollector::Options opt;
  opt.netdev_include = *NetdevFilter::Compile("fsv[ab].*");
  EthtoolCollector c(&store, &ports, &clock, MakeKernelEthtoolSource(), opt);
  RecordingContext ctx(&store);
  ASSERT_TRUE(c.Discover(ctx).ok());
  clock.Advance(std::chrono::milliseconds(100));
  ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_EQ(c.NetdevCount(), 2u);  // both ends, not lo
  EXPECT_GT(c.NameCount(ns.a()), 0u);
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 4) << ctx.ErrorsText();
}

}  // namespace
}  // namespace fabricscope
