#include "collectors/rdma_sysfs_collector.h"

#include <infiniband/mad.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "collectors/collector.h"
#include "collectors/ib_pma.h"
#include "collectors/registry.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/signals.h"
#include "daemon/scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace rdma_sysfs_collector_test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

std::string SourceDir() {
  const char* s = std::getenv("FABRICSCOPE_SOURCE_DIR");
  return s != nullptr ? s : ".";
}

class TestPollContext final : public PollContext {
 public:
  TestPollContext(Store* store, Tier tier, int64_t ts_ns)
      : store_(store), tier_(tier), ts_ns_(ts_ns) {}
  Tier tier() const override { return tier_; }
  int64_t ts_ns() const override { return ts_ns_; }
  void Append(SeriesId id, uint64_t raw) override {
    store_->Append(id, ts_ns_, raw);
    ++appends;
  }
  void RecordError(CollectorErrorCode code, absl::string_view key,
                   absl::string_view detail) override {
    errors.push_back({code, std::string(key)});
  }
  int Count(CollectorErrorCode code) const {
    int n = 0;
    for (const auto& e : errors) n += e.first == code ? 1 : 0;
    return n;
  }
  int appends = 0;
  std::vector<std::pair<CollectorErrorCode, std::string>> errors;

 private:
  Store* store_;
  Tier tier_;
  int64_t ts_ns_;
};

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

// A sysfs root in a temporary directory.
class FakeTree {
 public:
  FakeTree() {
    char tmpl[] = "/tmp/rdma_sysfs_test.XXXXXX";
    root_ = mkdtemp(tmpl);
    fs::create_directories(root_ + "/class/infiniband");
  }
  ~FakeTree() { fs::remove_all(root_); }
  const std::string& root() const { return root_; }
  std::string Port(const std::string& dev, int port) const {
    return root_ + "/class/infiniband/" + dev + "/ports/" + std::to_string(port);
  }
  // A RoCE mlx5-like port with a few counters of each group.
  void AddRocePort(const std::string& dev, int port, const std::string& netdev) const {
    const std::string p = Port(dev, port);
    WriteFile(p + "/link_layer", "Ethernet\n");
    WriteFile(p + "/state", "4: ACTIVE\n");
    WriteFile(p + "/rate", "100 Gb/sec (4X EDR)\n");
    WriteFile(p + "/gid_attrs/ndevs/0", netdev + "\n");
    WriteFile(p + "/hw_counters/lifespan", "10\n");
    WriteFile(p + "/hw_counters/np_cnp_sent", "100\n");
    WriteFile(p + "/hw_counters/out_of_sequence", "44\n");
    WriteFile(p + "/hw_counters/req_cqe_error", "7\n");
    WriteFile(p + "/counters/port_xmit_data", "1000\n");
    WriteFile(p + "/counters/unicast_xmit_packets", "10\n");
    WriteFile(p + "/counters/symbol_error", "0\n");
  }
  void Set(const std::string& dev, int port, const std::string& rel, const std::string& v) const {
    WriteFile(Port(dev, port) + "/" + rel, v);
  }

 private:
  std::string root_;
};

class RdmaSysfsTest : public ::testing::Test {
 protected:
  void Make(const std::string& root) {
    config_.sysfs_root = root;
    CollectorContext cc{&config_, &store_, &inventory_, &clock_, &metrics_};
    auto c = RdmaSysfsCollector::Create(cc);
    ASSERT_TRUE(c.ok()) << c.status();
    collector_.reset(static_cast<RdmaSysfsCollector*>(c->release()));
    TestPollContext ctx(&store_, Tier::kConfig, Now());
    ASSERT_TRUE(collector_->Discover(ctx).ok());
    discover_errors_ = ctx.errors;
  }
  int64_t Now() { return ts_ += 10'000'000; }
  TestPollContext Poll(Tier tier) {
    TestPollContext ctx(&store_, tier, Now());
    EXPECT_TRUE(collector_->Poll(ctx).ok());
    return ctx;
  }
  void PollAll() {
    Poll(Tier::kHot);
    Poll(Tier::kMedium);
    Poll(Tier::kSlow);
  }
  std::optional<SeriesSnapshot> Get(const std::string& source, const std::string& name,
                                    const std::string& dev, uint32_t port,
                                    const std::string& netdev = "") {
    auto id = store_.Find(SeriesKey{source, name, dev, port, netdev});
    if (!id.has_value()) return std::nullopt;
    return store_.Get(*id);
  }
  const PortInfo* FindPort(const std::string& dev, uint32_t port) {
    ports_ = inventory_.List();
    for (const PortInfo& p : ports_) {
      if (p.device == dev && p.port == port) return &p;
    }
    return nullptr;
  }

  CollectorOptions config_;
  Store store_;
  PortInventory inventory_;
  FakeClock clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<RdmaSysfsCollector> collector_;
  std::vector<std::pair<CollectorErrorCode, std::string>> discover_errors_;
  std::vector<PortInfo> ports_;
  int64_t ts_ = 1'700'000'000'000'000'000;
};

TEST_F(RdmaSysfsTest, FixtureTreePortsAndNetdevs) {
  Make(SourceDir() + "/tests/fixtures/sysfs/root");
  EXPECT_TRUE(discover_errors_.empty());
  std::vector<std::string> names;
  for (const PortInfo& p : inventory_.List())
    names.push_back(p.device + "/" + std::to_string(p.port));
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("hfi1_0/1", "i40iw0/1", "mlx4_0/1", "mlx4_0/2", "mlx4_1/1",
                                 "mlx4_1/2", "mlx5_0/1", "mlx5_1/1"));
  const PortInfo* roce = FindPort("mlx5_1", 1);
  ASSERT_NE(roce, nullptr);
  EXPECT_EQ(roce->netdev, "ens1f0np0");
  EXPECT_EQ(roce->link_layer, "Ethernet");
  EXPECT_EQ(roce->state, "ACTIVE");
  EXPECT_EQ(roce->rate, "100 Gb/sec (4X EDR)");
  const PortInfo* mlx4 = FindPort("mlx4_0", 2);
  ASSERT_NE(mlx4, nullptr);
  EXPECT_EQ(mlx4->link_layer, "InfiniBand");  // two trailing newlines in the fixture
  EXPECT_EQ(mlx4->netdev, "");
  EXPECT_TRUE(mlx4->present);
}

TEST_F(RdmaSysfsTest, FixtureTreeTiersValuesAndSemantics) {
  Make(SourceDir() + "/tests/fixtures/sysfs/root");
  // Hot: the 12 default names on the RoCE port, the 8 of them the IB mlx5 port has.
  // Medium: the other hw_counters (lifespan excluded).
  PollAll();
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kHot), 20u);
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kMedium), 16u + 16u);
  EXPECT_FALSE(store_.Find(SeriesKey{"hw_counters", "lifespan", "mlx5_1", 1, "ens1f0np0"}));

  auto cnp = Get("hw_counters", "np_cnp_sent", "mlx5_1", 1, "ens1f0np0");
  ASSERT_TRUE(cnp.has_value());
  EXPECT_EQ(cnp->state.last_raw, 10284520u);
  EXPECT_EQ(cnp->signal->family->name, "fabricscope_cnp_sent_total");
  auto xmit = Get("counters", "port_xmit_data", "mlx5_1", 1, "ens1f0np0");
  ASSERT_TRUE(xmit.has_value());
  EXPECT_DOUBLE_EQ(xmit->state.total, 238334949937759.0 * 4);
  EXPECT_EQ(xmit->signal->semantics.kind, CounterKind::kCounter64);
  auto wait = Get("counters", "port_xmit_wait", "mlx5_1", 1, "ens1f0np0");
  ASSERT_TRUE(wait.has_value());
  EXPECT_TRUE(wait->state.saturated);

  // No unicast files: 32-bit saturating data counters (i40iw0) ...
  auto iw = Get("counters", "port_xmit_data", "i40iw0", 1);
  ASSERT_TRUE(iw.has_value());
  EXPECT_EQ(iw->signal->semantics, (CounterSemantics{CounterKind::kSaturating, 32}));
  EXPECT_EQ(Get("counters", "port_rcv_packets", "i40iw0", 1)->signal->semantics,
            (CounterSemantics{CounterKind::kSaturating, 32}));
  // ... unless a value shows more than 32 bits: the 64-bit "noietf" group, for the
  // whole port (mlx4_0: port_xmit_data 26509113295, port_rcv_data 2221223609).
  for (const char* name : {"port_xmit_data", "port_rcv_data", "port_rcv_packets"}) {
    auto v = Get("counters", name, "mlx4_0", 1);
    ASSERT_TRUE(v.has_value()) << name;
    EXPECT_EQ(v->signal->semantics.kind, CounterKind::kCounter64) << name;
    EXPECT_FALSE(v->state.saturated) << name;
  }
  EXPECT_DOUBLE_EQ(Get("counters", "port_xmit_data", "mlx4_0", 1)->state.total, 26509113295.0 * 4);
  auto hfi = Get("counters", "port_rcv_data", "hfi1_0", 1);
  ASSERT_TRUE(hfi.has_value());
  EXPECT_EQ(hfi->signal->semantics.kind, CounterKind::kCounter64);
  EXPECT_FALSE(hfi->state.saturated);

  // mlx4_1 has counters/ with extended width and the legacy counters_ext/: one series each.
  EXPECT_TRUE(Get("counters", "port_rcv_data", "mlx4_1", 1).has_value());
  EXPECT_FALSE(Get("counters_ext", "port_rcv_data_64", "mlx4_1", 1).has_value());
  EXPECT_FALSE(Get("counters_ext", "port_unicast_xmit_packets", "mlx4_1", 1).has_value());
}

TEST_F(RdmaSysfsTest, NoPmaIsUnsupportedOnceAndNeverASample) {
  Make(SourceDir() + "/tests/fixtures/sysfs/root");
  TestPollContext first = Poll(Tier::kSlow);
  int unsupported = 0;
  for (const auto& [code, key] : first.errors) {
    EXPECT_EQ(code, CollectorErrorCode::kUnsupported) << key;
    EXPECT_THAT(key, ::testing::HasSubstr("i40iw0"));
    ++unsupported;
  }
  EXPECT_EQ(unsupported, 17);  // every counters/ file of the port
  TestPollContext second = Poll(Tier::kSlow);
  EXPECT_TRUE(second.errors.empty());
  EXPECT_EQ(second.appends, first.appends);
  auto v = Get("counters", "symbol_error", "i40iw0", 1);
  ASSERT_TRUE(v.has_value());
  EXPECT_FALSE(v->state.has_value);
}

TEST_F(RdmaSysfsTest, EmptyOrMissingRootIsNoData) {
  FakeTree tree;
  Make(tree.root() + "/nonexistent");
  PollAll();
  EXPECT_TRUE(discover_errors_.empty());
  EXPECT_TRUE(inventory_.List().empty());
  EXPECT_EQ(store_.Stats().series, 0u);
}

TEST_F(RdmaSysfsTest, HotSetIsConfigurable) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  config_.hot_counters = {"out_of_sequence"};
  Make(tree.root());
  PollAll();
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kHot), 1u);
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kMedium), 2u);  // np_cnp_sent, req_cqe_error
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kSlow), 3u);
}

TEST_F(RdmaSysfsTest, GarbageIsAParseErrorAndKeepsTheLastValue) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  Make(tree.root());
  Poll(Tier::kHot);
  auto before = Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0");
  ASSERT_TRUE(before.has_value());
  EXPECT_DOUBLE_EQ(before->state.total, 100);
  for (const char* bad : {"garbage\n", "", "18446744073709551616\n", "12 34\n", "-5\n"}) {
    tree.Set("mlx5_0", 1, "hw_counters/np_cnp_sent", bad);
    TestPollContext ctx = Poll(Tier::kHot);
    EXPECT_EQ(ctx.Count(CollectorErrorCode::kParse), 1) << "content: " << bad;
    auto now = Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0");
    EXPECT_EQ(now->state.samples, before->state.samples) << "a sample was appended for " << bad;
    EXPECT_DOUBLE_EQ(now->state.total, 100);
  }
  tree.Set("mlx5_0", 1, "hw_counters/np_cnp_sent", "150\n");
  TestPollContext ctx = Poll(Tier::kHot);
  EXPECT_TRUE(ctx.errors.empty());
  EXPECT_DOUBLE_EQ(Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0")->state.total, 150);
}

TEST_F(RdmaSysfsTest, CounterSemanticsEndToEnd) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  // A 32-bit-group IB port next to it.
  const std::string ib = tree.Port("mlx4_0", 1);
  WriteFile(ib + "/link_layer", "InfiniBand\n");
  WriteFile(ib + "/counters/port_xmit_data", "4294967000\n");
  WriteFile(ib + "/counters/symbol_error", "10\n");
  Make(tree.root());
  PollAll();

  // wrap32 Q-counter across 2^32.
  tree.Set("mlx5_0", 1, "hw_counters/out_of_sequence", "4294967290\n");
  Poll(Tier::kHot);
  tree.Set("mlx5_0", 1, "hw_counters/out_of_sequence", "5\n");
  Poll(Tier::kHot);
  auto oos = Get("hw_counters", "out_of_sequence", "mlx5_0", 1, "eth0");
  EXPECT_DOUBLE_EQ(oos->state.total, 4294967301.0);
  EXPECT_EQ(oos->state.resets, 0u);

  // u64 decrease: a reset, the exported total never goes backwards.
  tree.Set("mlx5_0", 1, "hw_counters/np_cnp_sent", "40\n");
  Poll(Tier::kHot);
  auto cnp = Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0");
  EXPECT_EQ(cnp->state.resets, 1u);
  EXPECT_DOUBLE_EQ(cnp->state.total, 100);
  tree.Set("mlx5_0", 1, "hw_counters/np_cnp_sent", "50\n");
  Poll(Tier::kHot);
  EXPECT_DOUBLE_EQ(Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0")->state.total, 110);

  // 16-bit PMA error counter saturates: flagged, no rate, total stops.
  tree.Set("mlx4_0", 1, "counters/symbol_error", "65535\n");
  Poll(Tier::kSlow);
  Poll(Tier::kSlow);
  auto sym = Get("counters", "symbol_error", "mlx4_0", 1);
  EXPECT_TRUE(sym->state.saturated);
  EXPECT_FALSE(sym->state.rate_valid);
  EXPECT_DOUBLE_EQ(sym->state.total, 65535);

  // 32-bit-group data counter: saturates at 2^32-1 (x4 scale).
  tree.Set("mlx4_0", 1, "counters/port_xmit_data", "4294967295\n");
  Poll(Tier::kSlow);
  auto data = Get("counters", "port_xmit_data", "mlx4_0", 1);
  EXPECT_TRUE(data->state.saturated);
  EXPECT_DOUBLE_EQ(data->state.total, 4294967295.0 * 4);
}

TEST_F(RdmaSysfsTest, DeviceVanishesAndReturnsWithoutRestart) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  tree.AddRocePort("mlx5_1", 1, "eth1");
  Make(tree.root());
  PollAll();
  ASSERT_EQ(collector_->OpenFilesForTest(Tier::kHot), 4u);
  const std::string dev1 = tree.root() + "/class/infiniband/mlx5_1";
  const std::string saved = tree.root() + "/saved_mlx5_1";
  fs::rename(dev1, saved);

  TestPollContext slow = Poll(Tier::kSlow);
  EXPECT_EQ(slow.Count(CollectorErrorCode::kNotFound), 1);
  EXPECT_FALSE(FindPort("mlx5_1", 1)->present);
  TestPollContext hot = Poll(Tier::kHot);
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kHot), 2u);
  EXPECT_EQ(hot.appends, 2);  // the other device keeps going
  Poll(Tier::kMedium);
  auto gone = Get("hw_counters", "np_cnp_sent", "mlx5_1", 1, "eth1");
  EXPECT_FALSE(gone->state.present);
  EXPECT_FALSE(Get("counters", "port_xmit_data", "mlx5_1", 1, "eth1")->state.present);
  EXPECT_FALSE(Get("hw_counters", "req_cqe_error", "mlx5_1", 1, "eth1")->state.present);
  EXPECT_TRUE(Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0")->state.present);
  // Still gone: not counted again.
  EXPECT_EQ(Poll(Tier::kSlow).Count(CollectorErrorCode::kNotFound), 0);

  fs::rename(saved, dev1);
  tree.Set("mlx5_1", 1, "hw_counters/np_cnp_sent", "120\n");
  EXPECT_TRUE(Poll(Tier::kSlow).errors.empty());
  EXPECT_TRUE(FindPort("mlx5_1", 1)->present);
  TestPollContext back = Poll(Tier::kHot);
  EXPECT_EQ(back.appends, 4);
  auto again = Get("hw_counters", "np_cnp_sent", "mlx5_1", 1, "eth1");
  EXPECT_TRUE(again->state.present);
  EXPECT_DOUBLE_EQ(again->state.total, 120);
  EXPECT_EQ(again->id, gone->id);  // the same series
}

TEST_F(RdmaSysfsTest, ReplacedDeviceIsReopened) {
  // The directory is removed and re-created between two rescans: the old fds
  // still read the unlinked files, so the rescan must notice the new inode.
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  Make(tree.root());
  PollAll();
  fs::remove_all(tree.root() + "/class/infiniband/mlx5_0");
  tree.AddRocePort("mlx5_0", 1, "eth0");
  tree.Set("mlx5_0", 1, "hw_counters/np_cnp_sent", "170\n");
  EXPECT_EQ(Poll(Tier::kSlow).Count(CollectorErrorCode::kNotFound), 1);
  Poll(Tier::kHot);
  auto v = Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0");
  EXPECT_EQ(v->state.last_raw, 170u);
  EXPECT_TRUE(v->state.present);
  EXPECT_TRUE(FindPort("mlx5_0", 1)->present);
}

TEST_F(RdmaSysfsTest, FileMissingAtOpenIsRetriedAfterARescan) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  Make(tree.root());
  const std::string file = tree.Port("mlx5_0", 1) + "/hw_counters/np_cnp_sent";
  fs::remove(file);
  TestPollContext hot = Poll(Tier::kHot);  // first sync: open fails
  EXPECT_EQ(hot.Count(CollectorErrorCode::kNotFound), 1);
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kHot), 1u);  // out_of_sequence still read
  EXPECT_EQ(hot.appends, 1);
  EXPECT_FALSE(Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0")->state.present);
  WriteFile(file, "77\n");
  const uint64_t generation = collector_->GenerationForTest();
  Poll(Tier::kSlow);  // the tier asked for a rescan: a new generation, files reopened
  EXPECT_GT(collector_->GenerationForTest(), generation);
  TestPollContext again = Poll(Tier::kHot);
  EXPECT_TRUE(again.errors.empty());
  EXPECT_EQ(again.appends, 2);
  auto v = Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth0");
  EXPECT_TRUE(v->state.present);
  EXPECT_EQ(v->state.last_raw, 77u);
}

TEST_F(RdmaSysfsTest, FilesAreOpenedOnceNotPerTick) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  Make(tree.root());
  PollAll();
  const uint64_t generation = collector_->GenerationForTest();
  auto count_fds = [] {
    size_t n = 0;
    for (auto it = fs::directory_iterator("/proc/self/fd"); it != fs::directory_iterator(); ++it) {
      ++n;
    }
    return n;
  };
  const size_t fds = count_fds();
  for (int i = 0; i < 50; ++i) PollAll();
  EXPECT_EQ(count_fds(), fds);
  EXPECT_EQ(collector_->GenerationForTest(), generation);  // no spurious rescans
}

TEST_F(RdmaSysfsTest, NetdevFromDeviceNetMatchesDevPort) {
  FakeTree tree;
  const std::string dev = tree.root() + "/class/infiniband/mlx4_0";
  WriteFile(dev + "/ports/1/link_layer", "Ethernet\n");
  WriteFile(dev + "/ports/2/link_layer", "Ethernet\n");
  WriteFile(dev + "/device/net/enp1s0/dev_port", "0\n");
  WriteFile(dev + "/device/net/enp1s0d1/dev_port", "1\n");
  WriteFile(dev + "/ports/1/gid_attrs/ndevs/0", "\n");  // unused GID entry: fall back
  Make(tree.root());
  EXPECT_EQ(FindPort("mlx4_0", 1)->netdev, "enp1s0");
  EXPECT_EQ(FindPort("mlx4_0", 2)->netdev, "enp1s0d1");
}

TEST_F(RdmaSysfsTest, UnmappedFilesAreSkipped) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  tree.Set("mlx5_0", 1, "counters/vendor_private_thing", "1\n");
  tree.Set("mlx5_0", 1, "hw_counters/odd-name.v2", "1\n");
  Make(tree.root());
  PollAll();
  EXPECT_FALSE(Get("counters", "vendor_private_thing", "mlx5_0", 1, "eth0").has_value());
  EXPECT_FALSE(Get("hw_counters", "odd-name.v2", "mlx5_0", 1, "eth0").has_value());
  EXPECT_EQ(collector_->OpenFilesForTest(Tier::kSlow), 3u);
}

TEST_F(RdmaSysfsTest, PortAttributesRefreshInTheConfigTier) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  Make(tree.root());
  tree.Set("mlx5_0", 1, "state", "1: DOWN\n");
  Poll(Tier::kConfig);
  EXPECT_EQ(FindPort("mlx5_0", 1)->state, "DOWN");
}

// Tiers on real scheduler threads while a device is removed and restored over
// and over: must stay consistent (run under the tsan preset for data races).
TEST(RdmaSysfsThreadsTest, ConcurrentTiersAndHotPlug) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth0");
  tree.AddRocePort("mlx5_1", 1, "eth1");
  CollectorOptions config;
  config.sysfs_root = tree.root();
  Store store;
  PortInventory ports;
  MetricsRegistry metrics;
  CollectorContext cc{&config, &store, &ports, RealClock::Get(), &metrics};
  auto c = RdmaSysfsCollector::Create(cc);
  ASSERT_TRUE(c.ok());
  Scheduler scheduler(
      RealClock::Get(), &store, &metrics,
      {absl::Milliseconds(1), absl::Milliseconds(2), absl::Milliseconds(3), absl::Milliseconds(5)});
  scheduler.Add(c->get());
  scheduler.Start();
  const std::string dev = tree.root() + "/class/infiniband/mlx5_1";
  const std::string saved = tree.root() + "/saved";
  for (int i = 0; i < 40; ++i) {
    fs::rename(dev, saved);
    absl::SleepFor(absl::Milliseconds(4));
    fs::rename(saved, dev);
    absl::SleepFor(absl::Milliseconds(4));
  }
  // Settle: the device is back; within a bounded time its series are present and updating.
  tree.Set("mlx5_1", 1, "hw_counters/np_cnp_sent", "999\n");
  bool ok = false;
  for (int i = 0; i < 500 && !ok; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    auto id = store.Find(SeriesKey{"hw_counters", "np_cnp_sent", "mlx5_1", 1, "eth1"});
    auto s = id ? store.Get(*id) : std::nullopt;
    ok = s.has_value() && s->state.present && s->state.last_raw == 999;
  }
  scheduler.Stop();
  EXPECT_TRUE(ok);
  EXPECT_GT(scheduler.ticks(Tier::kHot), 10u);
}

// --- Vendor trees (tests/fixtures/vendors/sysfs: bnxt_re, ionic, irdma).

class RdmaSysfsVendorTest : public RdmaSysfsTest {
 protected:
  // The vendor tree as it is (read only).
  void MakeFixture() { Make(SourceDir() + "/tests/fixtures/vendors/sysfs/root"); }
  // A copy of one device of the vendor tree (mutable).
  void MakeCopy(const std::string& dev) {
    char tmpl[] = "/tmp/rdma_sysfs_vendor.XXXXXX";
    tmp_ = mkdtemp(tmpl);
    fs::create_directories(tmp_ + "/devices");
    fs::create_directories(tmp_ + "/root/class/infiniband");
    fs::copy(SourceDir() + "/tests/fixtures/vendors/sysfs/devices/" + dev, tmp_ + "/devices/" + dev,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::create_directory_symlink("../../../devices/" + dev, tmp_ + "/root/class/infiniband/" + dev);
    Make(tmp_ + "/root");
  }
  ~RdmaSysfsVendorTest() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  void SetCounter(const std::string& dev, const std::string& name, const std::string& v) {
    WriteFile(tmp_ + "/devices/" + dev + "/ports/1/hw_counters/" + name, v);
  }
  std::string tmp_;
};

TEST_F(RdmaSysfsVendorTest, DriverFirmwareAndCanonicalFamilies) {
  MakeFixture();
  PollAll();
  struct Want {
    const char* dev;
    const char* driver;
    const char* fw;
  } want[] = {{"bnxt_re0", "bnxt_re", "220.0.59.0"},
              {"bnxt_re1", "bnxt_re", "220.0.59.0"},
              {"rocep132s0", "ionic", ""},
              {"ionic_1", "ionic", ""},
              {"irdma0", "irdma", ""},
              {"irdma1", "irdma", ""}};
  for (const Want& w : want) {
    const PortInfo* p = FindPort(w.dev, 1);
    ASSERT_NE(p, nullptr) << w.dev;
    EXPECT_EQ(p->driver, w.driver) << w.dev;
    EXPECT_EQ(p->fw_ver, w.fw) << w.dev;
  }
  // bnxt_re upstream: bytes from hw_counters (64-bit), not the empty counters/ files.
  auto rx = Get("hw_counters", "rx_bytes", "bnxt_re0", 1, "bnxt0");
  ASSERT_TRUE(rx.has_value());
  EXPECT_EQ(rx->signal->family->name, "fabricscope_port_bytes_total");
  EXPECT_DOUBLE_EQ(rx->state.total, 7521781137064.0);
  EXPECT_FALSE(Get("counters", "port_rcv_data", "bnxt_re0", 1, "bnxt0").has_value());
  auto to = Get("hw_counters", "to_retransmits", "bnxt_re0", 1, "bnxt0");
  ASSERT_TRUE(to.has_value());
  EXPECT_EQ(to->signal->Label("counter"), "local_ack_timeout_err");
  EXPECT_EQ(to->signal->semantics.kind, CounterKind::kCounter64);
  EXPECT_FALSE(Get("hw_counters", "active_qps", "bnxt_re0", 1, "bnxt0").has_value());
  // bnxt_re out-of-tree: mlx5 names, rp_cnp_ignored (always 0) not collected.
  EXPECT_EQ(Get("hw_counters", "np_cnp_sent", "bnxt_re1", 1, "bnxt1")->signal->family->name,
            "fabricscope_cnp_sent_total");
  EXPECT_FALSE(Get("hw_counters", "rp_cnp_ignored", "bnxt_re1", 1, "bnxt1").has_value());
  // ionic: the capture's values (ionic_1), the firmware's typo.
  auto ucast = Get("hw_counters", "tx_rdma_ucast_bytes", "ionic_1", 1, "enp132s0v0");
  ASSERT_TRUE(ucast.has_value());
  EXPECT_EQ(ucast->signal->family->name, "fabricscope_port_bytes_total");
  EXPECT_EQ(ucast->state.last_raw, 3489656928u);
  EXPECT_EQ(Get("hw_counters", "resp_rx_outouf_seq", "rocep132s0", 1, "enp132s0")
                ->signal->Label("counter"),
            "out_of_sequence");
  // irdma: a name with spaces.
  auto oos = Get("hw_counters", "Rcvd Out of order packets", "irdma0", 1, "ens6");
  ASSERT_TRUE(oos.has_value());
  EXPECT_EQ(oos->signal->Label("counter"), "out_of_sequence");
  EXPECT_EQ(Get("hw_counters", "tcpRetransSegs", "irdma1", 1, "ens801f0")->signal->Label("counter"),
            "RetransSegs");
}

// The vendors' names for the hot signals (ECN, CNP, out-of-buffer, retransmits) are
// read on the hot tier like mlx5's; the rest on the medium tier.
TEST_F(RdmaSysfsVendorTest, VendorNamesOfHotSignalsAreHot) {
  MakeFixture();
  Poll(Tier::kHot);
  auto sampled = [&](const char* dev, const char* netdev, const char* name) {
    auto s = Get("hw_counters", name, dev, 1, netdev);
    EXPECT_TRUE(s.has_value()) << dev << " " << name;
    return s.has_value() && s->state.has_value;
  };
  for (const char* name : {"rx_rdma_ecn_pkts", "tx_rdma_cnp_pkts", "resp_rx_outouf_seq",
                           "req_rx_pkt_seq_err", "resp_rx_outof_buf"}) {
    EXPECT_TRUE(sampled("ionic_1", "enp132s0v0", name)) << name;
  }
  for (const char* name : {"rx_ecn_marked_pkts", "to_retransmits", "oos_drop_count"}) {
    EXPECT_TRUE(sampled("bnxt_re0", "bnxt0", name)) << name;
  }
  EXPECT_TRUE(sampled("irdma0", "ens6", "Rcvd Out of order packets"));
  EXPECT_FALSE(sampled("ionic_1", "enp132s0v0", "req_rx_cqe_err"));
  EXPECT_FALSE(sampled("bnxt_re0", "bnxt0", "rx_bytes"));
}

// Empty (or EINVAL) IB counters/ files: one `unsupported` per port at discovery, then
// nothing: no error storm.
TEST_F(RdmaSysfsVendorTest, EmptyIbCountersAreReportedOncePerPort) {
  MakeFixture();
  int unsupported = 0;
  for (const auto& [code, key] : discover_errors_) {
    EXPECT_EQ(code, CollectorErrorCode::kUnsupported) << key;
    ++unsupported;
  }
  EXPECT_EQ(unsupported, 4);  // bnxt_re0, bnxt_re1, rocep132s0, ionic_1
  for (int i = 0; i < 3; ++i) {
    for (Tier t : {Tier::kHot, Tier::kMedium, Tier::kSlow, Tier::kConfig}) {
      TestPollContext c = Poll(t);
      EXPECT_TRUE(c.errors.empty()) << TierName(t);
    }
  }
}

// ionic's 0xFFFFFFFFFFFFFFFF is "invalid": no sample, counted as parse, polling goes on.
TEST_F(RdmaSysfsVendorTest, AllOnesIsBlindNotData) {
  MakeCopy("ionic_1");
  PollAll();
  auto before = Get("hw_counters", "rx_rdma_ecn_pkts", "ionic_1", 1, "enp132s0v0");
  ASSERT_TRUE(before.has_value());
  const uint64_t raw = before->state.last_raw;
  SetCounter("ionic_1", "rx_rdma_ecn_pkts", "18446744073709551615\n");
  int parse = 0;
  for (Tier t : {Tier::kHot, Tier::kMedium}) parse += Poll(t).Count(CollectorErrorCode::kParse);
  EXPECT_EQ(parse, 1);
  auto after = Get("hw_counters", "rx_rdma_ecn_pkts", "ionic_1", 1, "enp132s0v0");
  EXPECT_EQ(after->state.last_raw, raw);
  EXPECT_EQ(after->state.resets, 0u);
  // A valid value again is a sample again.
  SetCounter("ionic_1", "rx_rdma_ecn_pkts", std::to_string(raw + 5) + "\n");
  for (Tier t : {Tier::kHot, Tier::kMedium}) Poll(t);
  after = Get("hw_counters", "rx_rdma_ecn_pkts", "ionic_1", 1, "enp132s0v0");
  EXPECT_EQ(after->state.last_raw, raw + 5);
  // On mlx5 (no marker) all-ones is a value.
  EXPECT_FALSE(
      MapCounter({"hw_counters", "np_cnp_sent", "mlx5_0", 1, ""}, "mlx5")->all_ones_invalid);
}

// The kernel's hw_counters cache as drivers/infiniband/core/sysfs.c keeps
// it: a read asks the driver only when jiffies is past the last refresh plus
// the lifespan (msecs_to_jiffies, rounded up), else it serves the cached
// value; hw_counters/lifespan shows jiffies_to_msecs of the kept jiffies.
class KernelHwCountersCache {
 public:
  KernelHwCountersCache(int hz, uint64_t lifespan_ms, int64_t phase_ns)
      : hz_(hz), lifespan_jiffies_((lifespan_ms * hz + 999) / 1000), phase_ns_(phase_ns) {}
  // What hw_counters/lifespan reads.
  uint64_t LifespanFileMs() const { return (lifespan_jiffies_ * 1000 + hz_ - 1) / hz_; }
  // The value a read at `t_ns` returns when the driver's value is `truth`.
  uint64_t Read(int64_t t_ns, uint64_t truth) {
    const int64_t jiffies = (t_ns + phase_ns_) / (1'000'000'000 / hz_);
    if (!refreshed_ || jiffies > last_refresh_ + static_cast<int64_t>(lifespan_jiffies_)) {
      ++refreshes_;
      cached_ = truth;
      last_refresh_ = jiffies;
      refreshed_ = true;
    }
    return cached_;
  }
  // How often the driver was asked.
  uint64_t refreshes() const { return refreshes_; }

 private:
  const int64_t hz_;
  const uint64_t lifespan_jiffies_;
  const int64_t phase_ns_;
  bool refreshed_ = false;
  int64_t last_refresh_ = 0;
  uint64_t cached_ = 0;
  uint64_t refreshes_ = 0;
};

class RdmaSysfsCacheTest : public RdmaSysfsTest, public ::testing::WithParamInterface<int> {};

// A 1 s burst at a constant 100,000 CNPs/s, read every 10 ms through the
// kernel's cache: the per-interval peak rate is the burst's within 5 %, and
// the whole count arrives, at HZ 100, 250 and 1000; appending every reading
// (what a reader unaware of the cache does) shows about twice the rate.
TEST_P(RdmaSysfsCacheTest, CachedReadingsAreMergedNotDoubled) {
  const int hz = GetParam();
  KernelHwCountersCache kernel(hz, /*lifespan_ms=*/10, /*phase_ns=*/3'700'000);
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth2");
  tree.Set("mlx5_0", 1, "hw_counters/lifespan", absl::StrCat(kernel.LifespanFileMs(), "\n"));
  ASSERT_TRUE(SetCollectorOption(&config_, "kernel-hz", absl::StrCat(hz)).ok());
  Make(tree.root());
  constexpr double kRate = 100'000;  // per second, in [0.5 s, 1.5 s)
  constexpr int64_t kMs = 1'000'000;
  auto truth = [&](int64_t t) {
    const int64_t in = std::clamp<int64_t>(t - 500 * kMs, 0, 1000 * kMs);
    return static_cast<uint64_t>(100 + kRate * static_cast<double>(in) / 1e9);
  };
  const int64_t t0 = ts_ + 10 * kMs;
  double naive_peak = 0;
  uint64_t prev_read = 0;
  for (int64_t t = 0; t <= 2000 * kMs; t += 10 * kMs) {
    const uint64_t v = kernel.Read(t, truth(t));
    if (t > 0) naive_peak = std::max(naive_peak, static_cast<double>(v - prev_read) / 0.010);
    prev_read = v;
    tree.Set("mlx5_0", 1, "hw_counters/np_cnp_sent", absl::StrCat(v, "\n"));
    TestPollContext ctx(&store_, Tier::kHot, t0 + t);
    ASSERT_TRUE(collector_->Poll(ctx).ok());
  }
  ts_ = t0 + 2000 * kMs;
  const std::optional<SeriesId> id =
      store_.Find(SeriesKey{"hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth2"});
  ASSERT_TRUE(id.has_value());
  const std::vector<Sample> samples = store_.ReadRange(*id, 0, INT64_MAX);
  ASSERT_GE(samples.size(), 50u);
  double peak = 0;
  for (size_t i = 1; i < samples.size(); ++i) {
    const double dt = static_cast<double>(samples[i].ts_ns - samples[i - 1].ts_ns) * 1e-9;
    peak = std::max(peak, static_cast<double>(samples[i].value - samples[i - 1].value) / dt);
  }
  EXPECT_NEAR(peak, kRate, 0.05 * kRate) << "HZ " << hz;
  EXPECT_EQ(samples.back().value, truth(2000 * kMs));
  // The fake does what the kernel does: unmerged, some intervals double.
  EXPECT_GT(naive_peak, 1.5 * kRate) << "HZ " << hz;
  // Idle and cached readings were merged, at most every other one.
  EXPECT_LT(samples.size(), 201u);
  EXPECT_GE(samples.size(), 201u / 3);
  // fabricscope_device_queries_total{kind="hw_stats"}: the collector's
  // estimate of the driver calls is the kernel's count, 3 commands each (mlx5).
  const std::string m = prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
  const std::string sample =
      "fabricscope_device_queries_total{device=\"mlx5_0\",kind=\"hw_stats\"} ";
  const size_t at = m.find(sample);
  ASSERT_NE(at, std::string::npos) << m;
  EXPECT_NEAR(std::stod(m.substr(at + sample.size())), 3.0 * kernel.refreshes(), 3) << "HZ " << hz;
}

INSTANTIATE_TEST_SUITE_P(Hz, RdmaSysfsCacheTest, ::testing::Values(100, 250, 1000));

// Every IB PMA counters/ file read is one PerfMgt MAD: counted as such, per
// device.
TEST_F(RdmaSysfsTest, PmaReadsAreCountedAsMads) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth2");
  tree.AddRocePort("mlx5_0", 2, "eth3");
  Make(tree.root());
  for (int i = 0; i < 4; ++i) Poll(Tier::kSlow);
  const std::string m = prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
  // 3 files x 2 ports x 4 reads; no hw_counters read in the slow tier.
  EXPECT_THAT(m, ::testing::HasSubstr(
                     "fabricscope_device_queries_total{device=\"mlx5_0\",kind=\"pma_mad\"} 24\n"));
  EXPECT_THAT(m, ::testing::HasSubstr(
                     "fabricscope_device_queries_total{device=\"mlx5_0\",kind=\"hw_stats\"} 0\n"));
}

// The staleness window: (ceil(lifespan x HZ / 1000) + 1) jiffies.
TEST(RdmaSysfsStaleWindowTest, FollowsTheKernelsJiffies) {
  EXPECT_EQ(RdmaSysfsCollector::StaleWindowNs(10, 100), 20'000'000);
  EXPECT_EQ(RdmaSysfsCollector::StaleWindowNs(12, 250), 16'000'000);
  EXPECT_EQ(RdmaSysfsCollector::StaleWindowNs(10, 1000), 11'000'000);
  EXPECT_EQ(RdmaSysfsCollector::KernelHz(250, "/nonexistent"), 250);
  EXPECT_EQ(RdmaSysfsCollector::KernelHz(0, "/nonexistent"), 100);
  char tmpl[] = "/tmp/kernel_config.XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  WriteFile(tmpl, "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n");
  bool from_file = false;
  EXPECT_EQ(RdmaSysfsCollector::KernelHz(0, tmpl, &from_file), 250);
  EXPECT_TRUE(from_file);
  // CONFIG_HZ=100 read from the file is the file's, not the default.
  WriteFile(tmpl, "CONFIG_HZ=100\n");
  EXPECT_EQ(RdmaSysfsCollector::KernelHz(0, tmpl, &from_file), 100);
  EXPECT_TRUE(from_file);
  EXPECT_EQ(RdmaSysfsCollector::KernelHz(0, "/nonexistent", &from_file), 100);
  EXPECT_FALSE(from_file);
  std::remove(tmpl);
}

// A restricted function (configurations where the firmware refuses the
// counter query, and the kernel logs every attempt): every hw_counters read of
// the port fails with an I/O error. After three failures the port backs off
// (1 s, doubling to 5 min): over 10 minutes of 10 ms ticks it is asked a few
// dozen times instead of 120,000, with one log line. Rediscovered with
// readable files (as after a reset), it is read again at once.
TEST_F(RdmaSysfsTest, APortWhoseReadsFailBacksOffWithOneLogLine) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth2");
  const std::string hw = tree.Port("mlx5_0", 1) + "/hw_counters/";
  // A directory fails every read (EISDIR: an I/O error, as EIO would).
  for (const char* name : {"np_cnp_sent", "out_of_sequence", "req_cqe_error"}) {
    fs::remove(hw + name);
    fs::create_directories(hw + name);
  }
  Make(tree.root());
  std::string log;
  SetLogCaptureForTest(&log);
  constexpr int64_t kMs = 1'000'000;
  const int64_t t0 = ts_;
  int io = 0;
  for (int64_t t = 10 * kMs; t <= 600'000 * kMs; t += 10 * kMs) {
    TestPollContext ctx(&store_, Tier::kHot, t0 + t);
    ASSERT_TRUE(collector_->Poll(ctx).ok());
    io += ctx.Count(CollectorErrorCode::kIo);
  }
  EXPECT_GE(io, 3);
  EXPECT_LE(io, 30);
  auto lines = [&](absl::string_view msg) {
    int n = 0;
    for (absl::string_view line : absl::StrSplit(log, '\n')) n += absl::StrContains(line, msg);
    return n;
  };
  EXPECT_EQ(lines("port reads fail repeatedly"), 1) << log;
  EXPECT_EQ(lines("backoff ended"), 0);

  // The port recovers: the next retry reads it and its samples resume.
  for (const char* name : {"np_cnp_sent", "out_of_sequence", "req_cqe_error"}) {
    fs::remove(hw + name);
    WriteFile(hw + name, "5\n");
  }
  Make(tree.root());  // the files are opened at discovery: a rediscovery, as after a reset
  int64_t t = t0 + 600'010 * kMs;
  for (int i = 0; i < 100; ++i, t += 10 * kMs) {
    TestPollContext ctx(&store_, Tier::kHot, t);
    ASSERT_TRUE(collector_->Poll(ctx).ok());
    EXPECT_EQ(ctx.Count(CollectorErrorCode::kIo), 0);
  }
  EXPECT_EQ(lines("port reads fail repeatedly"), 1);
  SetLogCaptureForTest(nullptr);
  const std::optional<SeriesId> id =
      store_.Find(SeriesKey{"hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth2"});
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(store_.Get(*id)->state.last_raw, 5u);
}

// --rdma-device-include / --rdma-device-exclude: a device they leave out is
// never read and stays out of the port inventory (so no collector reads it).
TEST_F(RdmaSysfsTest, DeviceFiltersLeaveDevicesUnread) {
  FakeTree tree;
  tree.AddRocePort("mlx5_0", 1, "eth2");
  tree.AddRocePort("mlx5_1", 1, "eth3");
  tree.AddRocePort("mlx5_2", 1, "eth4");
  ASSERT_TRUE(SetCollectorOption(&config_, "rdma-device-include", "mlx5_[01]").ok());
  ASSERT_TRUE(SetCollectorOption(&config_, "rdma-device-exclude", "mlx5_0").ok());
  Make(tree.root());
  std::vector<std::string> devices;
  for (const PortInfo& p : inventory_.List()) devices.push_back(p.device);
  EXPECT_THAT(devices, ElementsAre("mlx5_1"));
  PollAll();
  EXPECT_FALSE(Get("hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth2").has_value());
  EXPECT_TRUE(Get("hw_counters", "np_cnp_sent", "mlx5_1", 1, "eth3").has_value());
  // A pattern that does not compile, or one std::regex would choke on, is refused.
  EXPECT_FALSE(SetCollectorOption(&config_, "rdma-device-exclude", "mlx5_(").ok());
  EXPECT_FALSE(SetCollectorOption(&config_, "rdma-device-exclude", "a{99999999999}").ok());
}

// --- --ib-pma-mad: the PMA counters in two MADs per port -------------------

// Answers PortCountersExtended / PortCounters Get()s as a port's PMA would,
// the fields written with libibmad's field table (mad_set_field), so the
// collector's decoding is checked against an independent layout.
class FakePmaTransport final : public SmpTransport {
 public:
  enum class Mode { kAnswer, kNoUmad, kTimeout, kNoExtended };
  explicit FakePmaTransport(Mode mode, std::atomic<int>* queries)
      : mode_(mode), queries_(queries) {}
  absl::StatusOr<std::vector<uint8_t>> Query(const std::string& device, uint32_t port,
                                             absl::Span<const uint8_t> request,
                                             absl::Duration) override {
    ++*queries_;
    if (mode_ == Mode::kNoUmad) return absl::UnimplementedError("no umad device (fake)");
    if (mode_ == Mode::kTimeout && device == "mlx5_9") {
      return absl::DeadlineExceededError("no MAD reply on mlx5_9/1 within 100 ms (fake)");
    }
    std::vector<uint8_t> reply(request.begin(), request.end());
    reply[3] = 0x81;  // GetResp
    const uint16_t attr = static_cast<uint16_t>(reply[16] << 8 | reply[17]);
    EXPECT_EQ(reply[1], 0x04);
    EXPECT_EQ(reply[kPmaDataOffset + 1], port);  // PortSelect
    uint8_t* data = reply.data() + kPmaDataOffset;
    if (attr == kPmaAttrPortCountersExtended) {
      if (mode_ == Mode::kNoExtended) {
        reply[5] = 0x0c;  // MAD status: method/attribute not supported
        return reply;
      }
      mad_set_field64(data, 0, IB_PC_EXT_XMT_BYTES_F, 5'000'000'000'123ull);
      mad_set_field64(data, 0, IB_PC_EXT_RCV_BYTES_F, 6'000'000'000'456ull);
      mad_set_field64(data, 0, IB_PC_EXT_XMT_UPKTS_F, 77'000'000'001ull);
    } else {
      mad_set_field(data, 0, IB_PC_ERR_SYM_F, 7);
      mad_set_field(data, 0, IB_PC_LINK_DOWNED_F, 3);
      mad_set_field(data, 0, IB_PC_ERR_EXCESS_OVR_F, 5);
      mad_set_field(data, 0, IB_PC_ERR_LOCALINTEG_F, 9);
      mad_set_field(data, 0, IB_PC_XMT_BYTES_F, 4'000'000'000u);
      mad_set_field(data, 0, IB_PC_XMT_WAIT_F, 123'456);
    }
    return reply;
  }

 private:
  const Mode mode_;
  std::atomic<int>* const queries_;
};

// An InfiniBand port whose counters/ files hold other values than the fake
// PMA answers (so a reading says where it came from).
void AddIbPort(const FakeTree& tree, const std::string& dev) {
  const std::string p = tree.Port(dev, 1);
  WriteFile(p + "/link_layer", "InfiniBand\n");
  WriteFile(p + "/state", "4: ACTIVE\n");
  WriteFile(p + "/rate", "200 Gb/sec (4X HDR)\n");
  for (const char* n :
       {"port_xmit_data", "port_rcv_data", "unicast_xmit_packets", "symbol_error", "link_downed",
        "excessive_buffer_overrun_errors", "local_link_integrity_errors", "port_xmit_wait"}) {
    WriteFile(p + "/counters/" + n, "1\n");
  }
}

class RdmaSysfsPmaTest : public RdmaSysfsTest {
 protected:
  void MakeWithPma(const std::string& root, FakePmaTransport::Mode mode) {
    config_.sysfs_root = root;
    CollectorContext cc{&config_, &store_, &inventory_, &clock_, &metrics_};
    collector_ = std::make_unique<RdmaSysfsCollector>(
        cc, std::make_unique<FakePmaTransport>(mode, &queries_));
    TestPollContext ctx(&store_, Tier::kConfig, Now());
    ASSERT_TRUE(collector_->Discover(ctx).ok());
  }
  uint64_t Raw(const std::string& dev, const std::string& name) {
    auto s = Get("counters", name, dev, 1);
    EXPECT_TRUE(s.has_value()) << dev << " " << name;
    return s.has_value() ? s->state.last_raw : 0;
  }
  std::atomic<int> queries_{0};
};

TEST_F(RdmaSysfsPmaTest, TwoMadsPerPortPerTickInsteadOfOnePerFile) {
  FakeTree tree;
  AddIbPort(tree, "mlx5_0");
  tree.AddRocePort("mlx5_1", 1, "eth3");  // RoCE: no LID routing, its files
  MakeWithPma(tree.root(), FakePmaTransport::Mode::kAnswer);
  for (int i = 0; i < 3; ++i) Poll(Tier::kSlow);
  EXPECT_EQ(queries_.load(), 2 * 3);  // one port, two MADs, three ticks
  EXPECT_EQ(Raw("mlx5_0", "port_xmit_data"), 5'000'000'000'123ull);  // 64-bit, extended
  EXPECT_EQ(Raw("mlx5_0", "port_rcv_data"), 6'000'000'000'456ull);
  EXPECT_EQ(Raw("mlx5_0", "unicast_xmit_packets"), 77'000'000'001ull);
  EXPECT_EQ(Raw("mlx5_0", "symbol_error"), 7u);
  EXPECT_EQ(Raw("mlx5_0", "link_downed"), 3u);
  EXPECT_EQ(Raw("mlx5_0", "excessive_buffer_overrun_errors"), 5u);  // the low nibble
  EXPECT_EQ(Raw("mlx5_0", "local_link_integrity_errors"), 9u);      // the high nibble
  EXPECT_EQ(Raw("mlx5_0", "port_xmit_wait"), 123'456u);
  auto roce = Get("counters", "port_xmit_data", "mlx5_1", 1, "eth3");
  ASSERT_TRUE(roce.has_value());
  EXPECT_EQ(roce->state.last_raw, 1000u);  // the file
  const std::string m = prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
  EXPECT_THAT(m, ::testing::HasSubstr(
                     "fabricscope_device_queries_total{device=\"mlx5_0\",kind=\"pma_mad\"} 6\n"));
  // The RoCE port's 3 files x 3 ticks, one MAD each by the kernel.
  EXPECT_THAT(m, ::testing::HasSubstr(
                     "fabricscope_device_queries_total{device=\"mlx5_1\",kind=\"pma_mad\"} 9\n"));
  // --explain-cost says so.
  bool mad_row = false;
  for (const ReadPlanRow& r : collector_->ReadPlan()) {
    if (r.device == "mlx5_0" && absl::StrContains(r.read, "PMA MADs")) {
      mad_row = true;
      EXPECT_DOUBLE_EQ(r.queries_per_second, 2 * r.reads_per_second);
    }
  }
  EXPECT_TRUE(mad_row);
}

TEST_F(RdmaSysfsPmaTest, APmaWithoutExtendedCountersStillAnswersPortCounters) {
  FakeTree tree;
  AddIbPort(tree, "mlx5_0");
  MakeWithPma(tree.root(), FakePmaTransport::Mode::kNoExtended);
  TestPollContext ctx = Poll(Tier::kSlow);
  EXPECT_TRUE(ctx.errors.empty());
  EXPECT_EQ(Raw("mlx5_0", "port_xmit_data"), 4'000'000'000u);  // PortCounters' 32 bits
  EXPECT_EQ(Raw("mlx5_0", "symbol_error"), 7u);
  EXPECT_EQ(Raw("mlx5_0", "unicast_xmit_packets"), 1u);  // not in PortCounters: the file
}

TEST_F(RdmaSysfsPmaTest, NoUmadFallsBackToFilesOnceAndWaits) {
  FakeTree tree;
  AddIbPort(tree, "mlx5_0");
  MakeWithPma(tree.root(), FakePmaTransport::Mode::kNoUmad);
  std::string log;
  SetLogCaptureForTest(&log);
  TestPollContext first = Poll(Tier::kSlow);
  EXPECT_EQ(Raw("mlx5_0", "port_xmit_data"), 1u);  // the file
  EXPECT_TRUE(first.errors.empty());               // said in the log, once; not a tick error
  for (int i = 0; i < 50; ++i) Poll(Tier::kSlow);
  SetLogCaptureForTest(nullptr);
  EXPECT_EQ(queries_.load(), 1);  // not asked again for kPmaRetryTicks slow ticks
  EXPECT_EQ(Raw("mlx5_0", "symbol_error"), 1u);
  int warned = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    warned += absl::StrContains(line, "PMA MADs unavailable") ? 1 : 0;
  }
  EXPECT_EQ(warned, 1) << log;
}

TEST_F(RdmaSysfsPmaTest, APortWhoseMadsFailIsReadFromItsFilesThatTick) {
  FakeTree tree;
  AddIbPort(tree, "mlx5_0");
  AddIbPort(tree, "mlx5_9");
  MakeWithPma(tree.root(), FakePmaTransport::Mode::kTimeout);
  TestPollContext ctx = Poll(Tier::kSlow);
  EXPECT_EQ(Raw("mlx5_0", "port_xmit_data"), 5'000'000'000'123ull);
  EXPECT_EQ(Raw("mlx5_9", "port_xmit_data"), 1u);
  ASSERT_EQ(ctx.errors.size(), 1u);
  EXPECT_EQ(ctx.errors[0].first, CollectorErrorCode::kIo);  // DeadlineExceeded
  EXPECT_EQ(ctx.errors[0].second, "mlx5_9/1 PMA MADs");
  Poll(Tier::kSlow);
  EXPECT_EQ(queries_.load(), 2 * (2 + 1));  // mlx5_0: two a tick; mlx5_9: one (the first timed out)
}

}  // namespace
}  // namespace rdma_sysfs_collector_test
}  // namespace fabricscope
