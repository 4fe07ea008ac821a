// The netdev collector against the real kernel: `lo` (always present) and veth
// pairs the tests create and delete themselves (tests run as root; the veth
// tests report SKIPPED with the reason where none can be created, net_env.h).
#include "collectors/netdev_collector.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/registry.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/unit/collectors/net_env.h"
#include "tests/unit/collectors/netdev_test_util.h"

namespace fabricscope {
namespace {

using netdev_test::RecordingPollContext;
using netdev_test::ScopedVeth;
using netdev_test::UniqueIfName;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

class NetdevCollectorTest : public ::testing::Test {
 protected:
  std::unique_ptr<NetdevCollector> Make(std::string include,
                                        NetdevCollector::Options options = {}) {
    absl::StatusOr<NetdevFilter> filter = NetdevFilter::Compile(include);
    EXPECT_TRUE(filter.ok()) << filter.status();
    if (filter.ok()) config_.netdev_include = *std::move(filter);
    auto c = NetdevCollector::CreateWithOptions(
        CollectorContext{&config_, &store_, &ports_, &clock_, &metrics_}, options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  uint64_t LastRaw(const SeriesKey& key) {
    auto id = store_.Find(key);
    EXPECT_TRUE(id.has_value()) << key.name << " " << key.netdev;
    if (!id) return 0;
    return store_.Get(*id)->state.last_raw;
  }
  // Advances the poll timestamp by 10 ms and polls.
  void PollAt(NetdevCollector& c, int tick) {
    ctx_.set_ts_ns(1'700'000'000'000'000'000 + int64_t{tick} * 10'000'000);
    ASSERT_TRUE(c.Poll(ctx_).ok());
  }

  CollectorOptions config_;
  Store store_;
  PortInventory ports_;
  FakeClock clock_;
  MetricsRegistry metrics_;
  RecordingPollContext ctx_{&store_};
};

PortInfo Port(std::string device, uint32_t port, std::string netdev) {
  PortInfo p;
  p.device = std::move(device);
  p.port = port;
  p.netdev = std::move(netdev);
  p.link_layer = "Ethernet";
  p.state = "ACTIVE";
  return p;
}

// Sends `n` UDP datagrams of `size` bytes to 127.0.0.1 (a closed port: the
// traffic still crosses lo). Returns how many were sent.
int SendLoopbackUdp(int n, size_t size) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return 0;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(9);  // discard
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string payload(size, 'x');
  int sent = 0;
  for (int i = 0; i < n; ++i) {
    if (sendto(fd, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&to),
               sizeof(to)) == static_cast<ssize_t>(payload.size())) {
      ++sent;
    }
  }
  close(fd);
  return sent;
}

TEST_F(NetdevCollectorTest, NameAndTier) {
  auto c = Make("");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->name(), "netdev");
  EXPECT_THAT(c->Tiers(), ElementsAre(Tier::kHot));
}

// A bad pattern cannot reach a collector: NetdevFilter::Compile refuses it
// (daemon/config.cc names the key; tests/unit/daemon/config_test.cc).
TEST(NetdevFilterTest, InvalidRegexDoesNotCompile) {
  absl::StatusOr<NetdevFilter> f = NetdevFilter::Compile("(");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), ::testing::HasSubstr("not a valid regex"));
}

// A pattern ending in '(' handed over as a range that is not NUL-terminated (the
// config value inside a larger buffer): refused, and never read past its end (the
// debug-asan build catches the over-read libstdc++'s scanner makes on a bare range).
TEST(NetdevFilterTest, TrailingParenInAnUnterminatedRange) {
  for (absl::string_view p : {"eth(", "eth((", "(?"}) {
    std::unique_ptr<char[]> exact(new char[p.size()]);  // no byte after the pattern
    std::memcpy(exact.get(), p.data(), p.size());
    absl::StatusOr<NetdevFilter> f =
        NetdevFilter::Compile(absl::string_view(exact.get(), p.size()));
    EXPECT_FALSE(f.ok()) << p;
  }
  absl::StatusOr<NetdevFilter> ok = NetdevFilter::Compile(absl::string_view("eth(0|1)xyz", 11));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->Matches("eth1xyz"));
}

TEST(NetdevFilterTest, MatchesTheWholeNameAndEmptyMatchesNothing) {
  EXPECT_FALSE(NetdevFilter().Matches("eth0"));
  EXPECT_TRUE(NetdevFilter().empty());
  absl::StatusOr<NetdevFilter> f = NetdevFilter::Compile("eth[0-9]+");
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->empty());
  EXPECT_EQ(f->pattern(), "eth[0-9]+");
  EXPECT_TRUE(f->Matches("eth0"));
  EXPECT_TRUE(f->Matches("eth12"));
  EXPECT_FALSE(f->Matches("eth12x"));
  EXPECT_FALSE(f->Matches("xeth1"));
  NetdevFilter copy = *f;  // copies share the compiled expression
  EXPECT_TRUE(copy.Matches("eth3"));
  absl::StatusOr<NetdevFilter> empty = NetdevFilter::Compile("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_FALSE(empty->Matches(""));
}

TEST_F(NetdevCollectorTest, IsRegistered) {
  CollectorRegistry registry;
  ASSERT_TRUE(RegisterAllCollectors(registry).ok());
  const CollectorRegistry::Entry* e = registry.Find("netdev");
  ASSERT_NE(e, nullptr);
  auto c = e->factory(CollectorContext{&config_, &store_, &ports_, &clock_, &metrics_});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->name(), "netdev");
}

TEST_F(NetdevCollectorTest, EmptyIncludeAndNoPortsWatchesNothing) {
  auto c = Make("");
  ASSERT_TRUE(c->Discover(ctx_).ok());
  PollAt(*c, 1);
  EXPECT_THAT(c->WatchedForTest(), IsEmpty());
  EXPECT_EQ(store_.Stats().series, 0u);
  EXPECT_THAT(ctx_.errors, IsEmpty());
}

TEST_F(NetdevCollectorTest, DiscoversLoopbackWithLabelledSeries) {
  auto c = Make("lo");
  ASSERT_TRUE(c->Discover(ctx_).ok());
  EXPECT_THAT(c->WatchedForTest(), ElementsAre("lo"));
  EXPECT_EQ(store_.Stats().series, 8u);
  struct Want {
    const char* name;
    const char* family;
    const char* direction;
  };
  const Want wants[] = {{"rx_bytes", "fabricscope_netdev_bytes_total", "rx"},
                        {"tx_bytes", "fabricscope_netdev_bytes_total", "tx"},
                        {"rx_packets", "fabricscope_netdev_packets_total", "rx"},
                        {"tx_packets", "fabricscope_netdev_packets_total", "tx"},
                        {"rx_dropped", "fabricscope_netdev_drops_total", "rx"},
                        {"tx_dropped", "fabricscope_netdev_drops_total", "tx"},
                        {"rx_errors", "fabricscope_netdev_errors_total", "rx"},
                        {"tx_errors", "fabricscope_netdev_errors_total", "tx"}};
  for (const Want& w : wants) {
    SCOPED_TRACE(w.name);
    auto id = store_.Find(SeriesKey{"netdev", w.name, "", 0, "lo"});
    ASSERT_TRUE(id.has_value());
    auto snap = store_.Get(*id);
    ASSERT_TRUE(snap.has_value());
    EXPECT_EQ(snap->signal->family->name, w.family);
    EXPECT_EQ(snap->signal->Label("netdev"), "lo");
    EXPECT_EQ(snap->signal->Label("direction"), w.direction);
    EXPECT_EQ(snap->signal->semantics.kind, CounterKind::kCounter64);
    EXPECT_TRUE(snap->state.present);
  }
  EXPECT_THAT(ctx_.errors, IsEmpty());
}

TEST_F(NetdevCollectorTest, IncludeIsAFullMatch) {
  auto c = Make("l");
  ASSERT_TRUE(c->Discover(ctx_).ok());
  EXPECT_THAT(c->WatchedForTest(), Not(Contains("lo")));
  auto c2 = Make("l.*");
  ASSERT_TRUE(c2->Discover(ctx_).ok());
  EXPECT_THAT(c2->WatchedForTest(), Contains("lo"));
}

TEST_F(NetdevCollectorTest, LoopbackCountersIncreaseWithTraffic) {
  auto c = Make("lo");
  ASSERT_TRUE(c->Discover(ctx_).ok());
  PollAt(*c, 1);
  const uint64_t tx_bytes0 = LastRaw({"netdev", "tx_bytes", "", 0, "lo"});
  const uint64_t rx_bytes0 = LastRaw({"netdev", "rx_bytes", "", 0, "lo"});
  const uint64_t tx_packets0 = LastRaw({"netdev", "tx_packets", "", 0, "lo"});
  const uint64_t rx_packets0 = LastRaw({"netdev", "rx_packets", "", 0, "lo"});
  const int sent = SendLoopbackUdp(200, 1000);
  ASSERT_GT(sent, 0);
  PollAt(*c, 2);
  // Each datagram is 1000 bytes of payload plus headers; other processes may
  // add traffic, never remove it.
  EXPECT_GE(LastRaw({"netdev", "tx_bytes", "", 0, "lo"}) - tx_bytes0, uint64_t(sent) * 1000);
  EXPECT_GE(LastRaw({"netdev", "rx_bytes", "", 0, "lo"}) - rx_bytes0, uint64_t(sent) * 1000);
  EXPECT_GE(LastRaw({"netdev", "tx_packets", "", 0, "lo"}) - tx_packets0, uint64_t(sent));
  EXPECT_GE(LastRaw({"netdev", "rx_packets", "", 0, "lo"}) - rx_packets0, uint64_t(sent));
  auto id = store_.Find(SeriesKey{"netdev", "tx_bytes", "", 0, "lo"});
  ASSERT_TRUE(id.has_value());
  auto st = store_.Get(*id)->state;
  EXPECT_EQ(st.samples, 2u);
  EXPECT_TRUE(st.rate_valid);
  // sent*1000 bytes in 10 ms of sample time.
  EXPECT_GE(st.last_rate, sent * 1000 / 0.01);
  EXPECT_THAT(ctx_.errors, IsEmpty());
}

TEST_F(NetdevCollectorTest, RdmaPortNetdevCarriesDeviceAndPort) {
  ports_.Upsert(Port("mlx5_0", 1, "lo"));
  auto c = Make("");
  ASSERT_TRUE(c->Discover(ctx_).ok());
  EXPECT_THAT(c->WatchedForTest(), ElementsAre("lo"));
  PollAt(*c, 1);
  auto id = store_.Find(SeriesKey{"netdev", "rx_bytes", "mlx5_0", 1, "lo"});
  ASSERT_TRUE(id.has_value());
  EXPECT_TRUE(store_.Get(*id)->state.has_value);
  EXPECT_FALSE(store_.Find(SeriesKey{"netdev", "rx_bytes", "", 0, "lo"}).has_value());
}

TEST_F(NetdevCollectorTest, MissingRdmaNetdevIsNoDataNotAnError) {
  // A fake sysfs tree names netdevs this kernel does not have.
  const std::string ghost = UniqueIfName("fsg", "x");
  ports_.Upsert(Port("mlx5_0", 1, ghost));
  auto c = Make("", {.rescan_interval = absl::ZeroDuration()});
  ASSERT_TRUE(c->Discover(ctx_).ok());
  for (int i = 1; i <= 3; ++i) PollAt(*c, i);
  EXPECT_THAT(c->WatchedForTest(), IsEmpty());
  EXPECT_THAT(ctx_.errors, IsEmpty());
  EXPECT_EQ(store_.Stats().series, 0u);
}

TEST_F(NetdevCollectorTest, PortAppearingLaterMovesTheSeries) {
  auto c = Make("lo", {.rescan_interval = absl::ZeroDuration()});
  ASSERT_TRUE(c->Discover(ctx_).ok());
  PollAt(*c, 1);
  auto plain = store_.Find(SeriesKey{"netdev", "tx_bytes", "", 0, "lo"});
  ASSERT_TRUE(plain.has_value());
  ports_.Upsert(Port("mlx5_3", 2, "lo"));
  PollAt(*c, 2);
  auto rdma = store_.Find(SeriesKey{"netdev", "tx_bytes", "mlx5_3", 2, "lo"});
  ASSERT_TRUE(rdma.has_value());
  // One present series per netdev: the exported family has no device label.
  EXPECT_FALSE(store_.Get(*plain)->state.present);
  EXPECT_TRUE(store_.Get(*rdma)->state.present);
  EXPECT_TRUE(store_.Get(*rdma)->state.has_value);
}

TEST_F(NetdevCollectorTest, RescanIsRateLimitedOnTheSteadyClock) {
  FABRICSCOPE_SKIP_WITHOUT_VETH();
  const std::string a = UniqueIfName("fsr", "a");
  ScopedVeth veth(a, UniqueIfName("fsr", "b"));
  auto c = Make(a, {.rescan_interval = absl::Seconds(1)});
  ASSERT_TRUE(c->Discover(ctx_).ok());
  EXPECT_THAT(c->WatchedForTest(), IsEmpty());
  auto r = veth.Create();
  ASSERT_EQ(r.status, 0) << r.output;
  PollAt(*c, 1);
  clock_.Advance(std::chrono::milliseconds(500));
  PollAt(*c, 2);
  EXPECT_THAT(c->WatchedForTest(), IsEmpty()) << "rescanned before the interval";
  clock_.Advance(std::chrono::milliseconds(500));
  PollAt(*c, 3);
  EXPECT_THAT(c->WatchedForTest(), ElementsAre(a));
  EXPECT_TRUE(store_.Find(SeriesKey{"netdev", "rx_bytes", "", 0, a}).has_value());
}

TEST_F(NetdevCollectorTest, VanishedInterfaceIsNotFoundAndComesBackByName) {
  FABRICSCOPE_SKIP_WITHOUT_VETH();
  const std::string a = UniqueIfName("fsv", "a");
  ScopedVeth veth(a, UniqueIfName("fsv", "b"));
  auto r = veth.Create();
  ASSERT_EQ(r.status, 0) << r.output;
  auto c = Make(a, {.rescan_interval = absl::ZeroDuration()});
  ASSERT_TRUE(c->Discover(ctx_).ok());
  ASSERT_THAT(c->WatchedForTest(), ElementsAre(a));
  PollAt(*c, 1);
  auto id = store_.Find(SeriesKey{"netdev", "tx_packets", "", 0, a});
  ASSERT_TRUE(id.has_value());
  EXPECT_TRUE(store_.Get(*id)->state.present);
  EXPECT_EQ(store_.Get(*id)->state.samples, 1u);

  r = veth.Delete();
  ASSERT_EQ(r.status, 0) << r.output;
  PollAt(*c, 2);
  ASSERT_EQ(ctx_.Count(CollectorErrorCode::kNotFound), 1);
  EXPECT_EQ(ctx_.errors[0].key, a);
  EXPECT_FALSE(store_.Get(*id)->state.present);
  EXPECT_THAT(c->WatchedForTest(), IsEmpty());
  // Absent: not polled, not reported again every tick.
  PollAt(*c, 3);
  PollAt(*c, 4);
  EXPECT_EQ(ctx_.errors.size(), 1u);
  EXPECT_EQ(store_.Get(*id)->state.samples, 1u);

  // Same name again (a new ifindex): picked up by name, same series.
  r = veth.Create();
  ASSERT_EQ(r.status, 0) << r.output;
  PollAt(*c, 5);
  EXPECT_THAT(c->WatchedForTest(), ElementsAre(a));
  EXPECT_TRUE(store_.Get(*id)->state.present);
  EXPECT_EQ(store_.Get(*id)->state.samples, 2u);
  EXPECT_EQ(store_.Find(SeriesKey{"netdev", "tx_packets", "", 0, a}), id);
  EXPECT_EQ(ctx_.errors.size(), 1u);
}

TEST_F(NetdevCollectorTest, NetlinkErrorIsCountedAndTheNextTickRecovers) {
  auto c = Make("lo");
  ASSERT_TRUE(c->Discover(ctx_).ok());
  PollAt(*c, 1);
  auto id = store_.Find(SeriesKey{"netdev", "rx_bytes", "", 0, "lo"});
  ASSERT_TRUE(id.has_value());
  ASSERT_EQ(store_.Get(*id)->state.samples, 1u);
  // Put a UDP socket where the rtnetlink socket was: the next request fails
  // in sendmsg like any environmental netlink error.
  const int fd = c->NetlinkFdForTest();
  ASSERT_GE(fd, 0);
  const int udp = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(udp, 0);
  ASSERT_EQ(dup2(udp, fd), fd);
  close(udp);
  PollAt(*c, 2);  // the tick itself succeeds
  ASSERT_EQ(ctx_.Count(CollectorErrorCode::kIo), 1);
  EXPECT_EQ(ctx_.errors[0].key, "lo");
  EXPECT_EQ(store_.Get(*id)->state.samples, 1u);
  EXPECT_TRUE(store_.Get(*id)->state.present);  // an I/O error is not a vanished interface
  PollAt(*c, 3);                                // a fresh socket
  EXPECT_EQ(ctx_.errors.size(), 1u);
  EXPECT_EQ(store_.Get(*id)->state.samples, 2u);
}

TEST_F(NetdevCollectorTest, RegexMatchesSeveralInterfaces) {
  FABRICSCOPE_SKIP_WITHOUT_VETH();
  const std::string a = UniqueIfName("fsm", "a");
  const std::string b = UniqueIfName("fsm", "b");
  ScopedVeth veth(a, b);
  auto r = veth.Create();
  ASSERT_EQ(r.status, 0) << r.output;
  auto c = Make(UniqueIfName("fsm", "[ab]"));
  ASSERT_TRUE(c->Discover(ctx_).ok());
  std::vector<std::string> want = {a, b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(c->WatchedForTest(), want);
  PollAt(*c, 1);
  EXPECT_EQ(store_.Stats().series, 16u);
  EXPECT_THAT(ctx_.errors, IsEmpty());
}

}  // namespace
}  // namespace fabricscope
