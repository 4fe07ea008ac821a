// The rdma_netlink collector end to end without a kernel RDMA stack: a fake
// kernel (tests/support/rdma_netlink_fake.h) answers NETLINK_RDMA requests with
// replies laid out as the UAPI defines, next to a fixture sysfs tree that
// rdma_sysfs reads; both collectors run against one store and inventory, in
// the scheduler's order (rdma_sysfs first in every tick).
#include "collectors/rdma_netlink_collector.h"

#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "collectors/rdma_netlink.h"
#include "collectors/rdma_sysfs_collector.h"
#include "collectors/registry.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/correlate/correlator.h"
#include "exporters/prometheus_exporter.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/support/rdma_netlink_fake.h"

namespace fabricscope {
namespace rdma_netlink_collector_test {
namespace {

namespace fs = std::filesystem;

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
    details.emplace_back(detail);
  }
  int Count(CollectorErrorCode code) const {
    int n = 0;
    for (const auto& e : errors) n += e.first == code ? 1 : 0;
    return n;
  }
  int appends = 0;
  std::vector<std::pair<CollectorErrorCode, std::string>> errors;
  std::vector<std::string> details;

 private:
  Store* store_;
  Tier tier_;
  int64_t ts_ns_;
};

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// mlx5_0 port 1 (RoCE, netdev ens1f0np0): the same counters in sysfs and
// over netlink, with different values, so a test can tell who wrote a sample.
class RdmaNetlinkTest : public ::testing::Test {
 protected:
  RdmaNetlinkTest() {
    char tmpl[] = "/tmp/rdma_netlink_test.XXXXXX";
    root_ = mkdtemp(tmpl);
    const std::string p = root_ + "/class/infiniband/mlx5_0/ports/1";
    WriteFile(p + "/link_layer", "Ethernet\n");
    WriteFile(p + "/state", "4: ACTIVE\n");
    WriteFile(p + "/rate", "100 Gb/sec (4X EDR)\n");
    WriteFile(p + "/gid_attrs/ndevs/0", "ens1f0np0\n");
    WriteFile(p + "/hw_counters/np_cnp_sent", "100\n");
    WriteFile(p + "/hw_counters/out_of_sequence", "44\n");
    WriteFile(p + "/hw_counters/req_cqe_error", "7\n");
    WriteFile(p + "/counters/port_xmit_data", "1000\n");
    WriteFile(p + "/counters/unicast_xmit_packets", "10\n");

    FakeRdmaDevice dev{.index = 3, .name = "mlx5_0"};
    dev.get_hw_stats_commands = 3;  // what the collector counts for mlx5
    FakeRdmaPort port{.port = 1};
    port.counters = {{"np_cnp_sent", 500}, {"out_of_sequence", 60}, {"req_cqe_error", 9}};
    port.optional = {{"cc_rx_ce_pkts", 1234, false}, {"cc_rx_cnp_pkts", 77, false}};
    dev.ports.push_back(port);
    kernel_.AddDevice(dev);
    kernel_.AddDevice({.index = 7, .name = "mlx5_9", .ports = {{.port = 1}}});  // not in sysfs
    options_.sysfs_root = root_;
  }
  ~RdmaNetlinkTest() override { fs::remove_all(root_); }

  void Make(RdmaNetlinkTransportFactory transports = {}) {
    if (!transports) transports = kernel_.Factory();
    CollectorContext cc{&options_, &store_, &ports_, &clock_, &metrics_};
    sysfs_ = std::make_unique<RdmaSysfsCollector>(cc);
    netlink_ = std::make_unique<RdmaNetlinkCollector>(cc, std::move(transports));
    TestPollContext ctx(&store_, Tier::kConfig, Now());
    ASSERT_TRUE(sysfs_->Discover(ctx).ok());
    ASSERT_TRUE(netlink_->Discover(ctx).ok());
    discover_errors_ = ctx.errors;
  }
  int64_t Now() { return ts_ += 10'000'000; }
  // One tick of `tier`: rdma_sysfs first, then rdma_netlink (registry order).
  TestPollContext Tick(Tier tier) {
    TestPollContext ctx(&store_, tier, Now());
    EXPECT_TRUE(sysfs_->Poll(ctx).ok());
    EXPECT_TRUE(netlink_->Poll(ctx).ok());
    return ctx;
  }
  SeriesState State(const std::string& source, const std::string& name) {
    auto id = store_.Find(SeriesKey{source, name, "mlx5_0", 1, "ens1f0np0"});
    EXPECT_TRUE(id.has_value()) << name;
    if (!id.has_value()) return {};
    return store_.Get(*id)->state;
  }
  std::string SelfMetrics() {
    return prometheus::TextSerializer().Serialize(metrics_.registry()->Collect());
  }
  // What /metrics shows: the store's families, then the self-metrics.
  std::string Exposition() {
    return prometheus::TextSerializer().Serialize(RenderStoreFamilies(store_, &ports_, ts_)) +
           SelfMetrics();
  }
  // The per-process series in the store: all, and those present (exported).
  std::pair<size_t, size_t> ProcessSeries() {
    size_t all = 0, present = 0;
    for (const SeriesSnapshot& s : store_.Snapshot()) {
      if (s.key->source != "rdma_process") continue;
      ++all;
      present += s.state.present ? 1 : 0;
    }
    return {all, present};
  }
  bool Has(const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  }

  std::string root_;
  CollectorOptions options_;
  Store store_;
  PortInventory ports_;
  FakeClock clock_;
  MetricsRegistry metrics_;
  FakeRdmaNetlinkKernel kernel_;
  std::unique_ptr<RdmaSysfsCollector> sysfs_;
  std::unique_ptr<RdmaNetlinkCollector> netlink_;
  std::vector<std::pair<CollectorErrorCode, std::string>> discover_errors_;
  int64_t ts_ = 1'700'000'000'000'000'000;
};

TEST(RdmaNetlinkParseTest, RepliesRoundTripThroughTheFakeKernel) {
  FakeRdmaNetlinkKernel kernel;
  FakeRdmaPort port{.port = 2};
  port.counters = {{"out_of_sequence", 5}, {"rp_cnp_handled", 1ull << 40}};
  port.optional = {{"cc_rx_ce_pkts", 3, true}, {"cc_tx_cnp_pkts", 4, false}};
  port.qp_counters = {{.id = 1, .pid = 4242, .qps = 3, .counters = {{"out_of_sequence", 340}}},
                      {.id = 2, .pid = 99, .qps = 1, .counters = {{"out_of_sequence", 1}}}};
  kernel.AddDevice({.index = 5, .name = "bnxt_re0", .ports = {port}});
  auto t = kernel.NewTransport();
  std::vector<uint8_t> replies;

  nl_msg* m = BuildRdmaDeviceDump();
  ASSERT_TRUE(t->Exchange(m, &replies).ok());
  nlmsg_free(m);
  auto devices = ParseRdmaDeviceDump(replies);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0].index, 5u);
  EXPECT_EQ((*devices)[0].name, "bnxt_re0");
  EXPECT_EQ((*devices)[0].ports, 1u);

  m = BuildRdmaStatGet(5, 2);
  ASSERT_TRUE(t->Exchange(m, &replies).ok());
  nlmsg_free(m);
  auto stats = ParseRdmaStatGet(replies);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->device_index, 5u);
  EXPECT_EQ(stats->port, 2u);
  ASSERT_EQ(stats->counters.size(), 3u);  // the enabled optional counter included
  EXPECT_EQ(stats->counters[1].name, "rp_cnp_handled");
  EXPECT_EQ(stats->counters[1].value, 1ull << 40);
  EXPECT_EQ(stats->counters[2].name, "cc_rx_ce_pkts");

  m = BuildRdmaStatGetStatus(5, 2);
  ASSERT_TRUE(t->Exchange(m, &replies).ok());
  nlmsg_free(m);
  auto status = ParseRdmaStatStatus(replies);
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->size(), 4u);
  EXPECT_FALSE((*status)[0].optional);
  EXPECT_TRUE((*status)[0].enabled);
  EXPECT_EQ((*status)[3].name, "cc_tx_cnp_pkts");
  EXPECT_EQ((*status)[3].index, 3u);
  EXPECT_TRUE((*status)[3].optional);
  EXPECT_FALSE((*status)[3].enabled);
  EXPECT_TRUE((*status)[2].enabled);

  m = BuildRdmaQpCounterDump(5);
  ASSERT_TRUE(t->Exchange(m, &replies).ok());
  nlmsg_free(m);
  auto qp = ParseRdmaQpCounterDump(replies);
  ASSERT_TRUE(qp.ok()) << qp.status();
  ASSERT_EQ(qp->size(), 2u);
  EXPECT_EQ((*qp)[0].pid, 4242u);
  EXPECT_EQ((*qp)[0].port, 2u);
  EXPECT_EQ((*qp)[0].qps, 3u);
  ASSERT_EQ((*qp)[0].counters.size(), 1u);
  EXPECT_EQ((*qp)[0].counters[0].value, 340u);

  // A bad port is the kernel's EINVAL: unsupported.
  m = BuildRdmaStatGet(5, 9);
  absl::Status s = t->Exchange(m, &replies);
  nlmsg_free(m);
  EXPECT_EQ(CollectorErrorCodeOf(s), CollectorErrorCode::kUnsupported) << s;
}

TEST(RdmaNetlinkParseTest, MalformedRepliesAreParseErrors) {
  // A message whose attribute overruns it, and an entry without a value.
  std::vector<uint8_t> bad(NLMSG_HDRLEN + 8, 0);
  auto* h = reinterpret_cast<nlmsghdr*>(bad.data());
  h->nlmsg_len = static_cast<uint32_t>(bad.size());
  h->nlmsg_type = static_cast<uint16_t>(RdmaNlType(RDMA_NLDEV_CMD_STAT_GET));
  auto* a = reinterpret_cast<nlattr*>(bad.data() + NLMSG_HDRLEN);
  a->nla_type = RDMA_NLDEV_ATTR_STAT_HWCOUNTERS;
  a->nla_len = 64;  // longer than the message
  EXPECT_FALSE(ParseRdmaStatGet(bad).ok());

  nl_msg* m = nlmsg_alloc_simple(RdmaNlType(RDMA_NLDEV_CMD_STAT_GET), 0);
  nlattr* hw = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
  nlattr* e = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
  nla_put_string(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, "out_of_sequence");
  nla_put_u32(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, 5);  // 32 bits: not the UAPI's u64
  nla_nest_end(m, e);
  nla_nest_end(m, hw);
  const nlmsghdr* mh = nlmsg_hdr(m);
  std::vector<uint8_t> short_value(reinterpret_cast<const uint8_t*>(mh),
                                   reinterpret_cast<const uint8_t*>(mh) + mh->nlmsg_len);
  nlmsg_free(m);
  auto r = ParseRdmaStatGet(short_value);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
}

TEST_F(RdmaNetlinkTest, NetlinkFeedsTheHwCountersSeriesAndSysfsStopsReadingThem) {
  Make();
  EXPECT_TRUE(discover_errors_.empty());
  EXPECT_TRUE(ports_.HwCountersClaimed("mlx5_0", 1));
  const uint64_t gets_after_discovery = kernel_.Requests(RDMA_NLDEV_CMD_STAT_GET);

  // First tick: the claim is new to the tiers, nobody writes hw_counters.
  Tick(Tier::kHot);
  Tick(Tier::kMedium);
  for (int i = 0; i < 3; ++i) {
    Tick(Tier::kHot);
    Tick(Tier::kMedium);
  }
  Tick(Tier::kSlow);
  // Netlink's values, one sample per tick of the series' tier, never sysfs's.
  const SeriesState cnp = State("hw_counters", "np_cnp_sent");  // hot
  EXPECT_EQ(cnp.last_raw, 500u);
  EXPECT_EQ(cnp.samples, 3u);
  const SeriesState cqe = State("hw_counters", "req_cqe_error");  // medium
  EXPECT_EQ(cqe.last_raw, 9u);
  EXPECT_EQ(cqe.samples, 3u);
  // One STAT_GET per port per tick (4 hot + 4 medium ticks, the first of each skipped).
  EXPECT_EQ(kernel_.Requests(RDMA_NLDEV_CMD_STAT_GET) - gets_after_discovery, 6u);
  // counters/ stays with sysfs.
  EXPECT_EQ(State("counters", "port_xmit_data").last_raw, 1000u);

  kernel_.SetCounter("mlx5_0", 1, "np_cnp_sent", 900);
  Tick(Tier::kHot);
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").last_raw, 900u);

  const std::string m = SelfMetrics();
  EXPECT_TRUE(Has(m,
                  "fabricscope_rdma_hw_counters_source{device=\"mlx5_0\",port=\"1\","
                  "source=\"netlink\"} 1"))
      << m;
  EXPECT_TRUE(Has(m,
                  "fabricscope_rdma_hw_counters_source{device=\"mlx5_0\",port=\"1\","
                  "source=\"sysfs\"} 0"));
  EXPECT_TRUE(Has(m,
                  "fabricscope_rdma_optional_counter_enabled{counter=\"cc_rx_ce_pkts\",device="
                  "\"mlx5_0\",port=\"1\"} 0"));
}

TEST_F(RdmaNetlinkTest, AFailingPortGoesBackToSysfsAndIsReclaimed) {
  Make();
  Tick(Tier::kHot);
  Tick(Tier::kHot);
  ASSERT_EQ(State("hw_counters", "np_cnp_sent").last_raw, 500u);

  kernel_.SetStatGetErrno("mlx5_0", 1, ENODEV);
  TestPollContext failed = Tick(Tier::kHot);
  EXPECT_EQ(failed.Count(CollectorErrorCode::kNotFound), 1);
  EXPECT_FALSE(ports_.HwCountersClaimed("mlx5_0", 1));
  const uint64_t samples = State("hw_counters", "np_cnp_sent").samples;
  Tick(Tier::kHot);  // sysfs reads it again
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").last_raw, 100u);
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").samples, samples + 1);

  // The config tier re-probes: still failing, reported once, not per tick.
  TestPollContext c1 = Tick(Tier::kConfig);
  TestPollContext c2 = Tick(Tier::kConfig);
  EXPECT_EQ(c1.errors.size() + c2.errors.size(), 1u);
  EXPECT_TRUE(SelfMetrics().find("fabricscope_rdma_hw_counters_source{device=\"mlx5_0\","
                                 "port=\"1\",source=\"sysfs\"} 1") != std::string::npos);

  kernel_.SetStatGetErrno("mlx5_0", 1, 0);
  Tick(Tier::kConfig);
  EXPECT_TRUE(ports_.HwCountersClaimed("mlx5_0", 1));
  TestPollContext first = Tick(Tier::kHot);  // sysfs stopped, netlink skips its first sight
  EXPECT_EQ(first.appends, 0);
  Tick(Tier::kHot);
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").last_raw, 500u);
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").samples, samples + 2);
}

TEST_F(RdmaNetlinkTest, EnablingOptionalCountersIsOptInAndNeedsThePrivilege) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-enable-optional-counters",
                                 "cc_rx_ce_pkts,no_such_counter")
                  .ok());
  Make();  // unprivileged: EPERM, counted once
  int denied = 0;
  for (const auto& e : discover_errors_) denied += e.first == CollectorErrorCode::kPermissionDenied;
  EXPECT_EQ(denied, 1);
  EXPECT_FALSE(kernel_.Port("mlx5_0", 1).optional[0].enabled);
  Tick(Tier::kConfig);  // asked once per port, not every config tick
  EXPECT_EQ(kernel_.Requests(RDMA_NLDEV_CMD_STAT_SET), 1u);
}

TEST_F(RdmaNetlinkTest, EnabledOptionalCountersAreReadAndReported) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-enable-optional-counters", "cc_rx_ce_pkts").ok());
  kernel_.SetPrivileged(true);
  Make();
  EXPECT_TRUE(discover_errors_.empty());
  const FakeRdmaPort port = kernel_.Port("mlx5_0", 1);
  EXPECT_TRUE(port.optional[0].enabled);
  EXPECT_FALSE(port.optional[1].enabled) << "only the listed counter is enabled";
  Tick(Tier::kMedium);
  Tick(Tier::kMedium);
  EXPECT_EQ(State("hw_counters", "cc_rx_ce_pkts").last_raw, 1234u);
  const std::string m = SelfMetrics();
  EXPECT_TRUE(Has(m,
                  "fabricscope_rdma_optional_counter_enabled{counter=\"cc_rx_ce_pkts\",device="
                  "\"mlx5_0\",port=\"1\"} 1"))
      << m;
  EXPECT_TRUE(Has(m,
                  "fabricscope_rdma_optional_counter_enabled{counter=\"cc_rx_cnp_pkts\",device="
                  "\"mlx5_0\",port=\"1\"} 0"));
}

TEST_F(RdmaNetlinkTest, KernelWithoutStatusStillServesCounters) {
  kernel_.SetNoStatus(true);
  Make();
  EXPECT_EQ(discover_errors_.size(), 1u);
  EXPECT_TRUE(ports_.HwCountersClaimed("mlx5_0", 1));
  TestPollContext c = Tick(Tier::kConfig);
  EXPECT_TRUE(c.errors.empty()) << "status not asked again";
}

TEST_F(RdmaNetlinkTest, UnsupportedKernelIsReportedOnceAndSysfsCarriesOn) {
  kernel_.SetUnsupported(true);
  Make();
  ASSERT_EQ(discover_errors_.size(), 1u);
  EXPECT_EQ(discover_errors_[0].first, CollectorErrorCode::kUnsupported);
  EXPECT_TRUE(netlink_->unsupported());
  EXPECT_FALSE(ports_.HwCountersClaimed("mlx5_0", 1));
  for (int i = 0; i < 3; ++i) {
    TestPollContext h = Tick(Tier::kHot);
    TestPollContext c = Tick(Tier::kConfig);
    EXPECT_TRUE(h.errors.empty());
    EXPECT_TRUE(c.errors.empty());
  }
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").last_raw, 100u);
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").samples, 3u);
  EXPECT_EQ(kernel_.Requests(RDMA_NLDEV_CMD_STAT_GET), 0u);
}

int CountLines(const std::string& text, const std::string& prefix) {
  int n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

TEST_F(RdmaNetlinkTest, PerProcessCountersAreBoundedTopKWithTheRestAsOther) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-per-process", "true").ok());
  options_.proc_root = root_ + "/proc";
  for (uint32_t pid = 101; pid <= 107; ++pid) {
    WriteFile(root_ + "/proc/" + std::to_string(pid) + "/comm",
              "worker" + std::to_string(pid) + "\n");
  }
  kernel_.SetPrivileged(true);
  Make();
  EXPECT_TRUE(discover_errors_.empty());
  EXPECT_TRUE(kernel_.Port("mlx5_0", 1).auto_pid);
  // Seven processes; pid 10x has out_of_sequence 10*x: 107..103 are the top 5.
  std::vector<FakeRdmaQpCounter> objects;
  for (uint32_t pid = 101; pid <= 107; ++pid) {
    objects.push_back(
        {.id = pid,
         .pid = pid,
         .qps = 2,
         .counters = {
             {"out_of_sequence", 10 * (pid - 100)}, {"packet_seq_err", 1}, {"req_cqe_error", 5}}});
  }
  objects.push_back({.id = 200, .pid = 0, .counters = {{"out_of_sequence", 9999}}});  // kernel
  kernel_.SetQpCounters("mlx5_0", 1, objects);
  Tick(Tier::kMedium);
  std::string m = Exposition();
  const std::string fam = "fabricscope_rdma_process_qp_counter{";
  EXPECT_EQ(CountLines(m, fam), 6 * 6) << m;  // 5 processes + other, 6 counters each
  EXPECT_TRUE(Has(m, fam +
                         "device=\"mlx5_0\",port=\"1\",process=\"worker107\",pid=\"107\","
                         "counter=\"out_of_sequence\",namespace=\"\",pod=\"\",container=\"\"} 70"))
      << m;
  EXPECT_TRUE(Has(
      m,
      fam +
          "device=\"mlx5_0\",port=\"1\",process=\"other\",pid=\"\","
          "counter=\"out_of_sequence\",namespace=\"\",pod=\"\",container=\"\"} 30"));  // 101 + 102
  EXPECT_TRUE(Has(m, fam + "device=\"mlx5_0\",port=\"1\",process=\"other\",pid=\"\",counter="
                           "\"packet_seq_err\",namespace=\"\",pod=\"\",container=\"\"} 2"));
  EXPECT_EQ(m.find("worker101"), std::string::npos);
  std::istringstream exposition(m);
  for (std::string line; std::getline(exposition, line);) {
    if (line.rfind(fam, 0) == 0) {
      EXPECT_EQ(line.find("req_cqe_error"), std::string::npos) << "only the ranking counters";
    }
  }

  // Processes go away: their series go with them.
  objects.resize(2);
  kernel_.SetQpCounters("mlx5_0", 1, objects);
  Tick(Tier::kMedium);
  m = Exposition();
  EXPECT_EQ(CountLines(m, fam), 2 * 6) << m;
  EXPECT_EQ(m.find("process=\"other\"}"), std::string::npos);
  // Kept in the store per process: the gone ones absent, their samples kept
  // (101 and 102, summed into `other` before, have series of their own now).
  EXPECT_EQ(ProcessSeries(), std::make_pair(size_t{8 * 6}, size_t{2 * 6}));
  auto gone = store_.Find({"rdma_process", "out_of_sequence@107/worker107", "mlx5_0", 1, ""});
  ASSERT_TRUE(gone.has_value());
  EXPECT_FALSE(store_.Get(*gone)->state.present);
  EXPECT_EQ(store_.ReadRange(*gone, 0, ts_).size(), 1u);
  EXPECT_EQ(store_.ReadRange(*gone, 0, ts_).back().value, 70u);
}

// Many processes: the store keeps the top 5 per port and `other`, and pid
// churn registers at most the lifetime bound (the rest is summed into other).
TEST_F(RdmaNetlinkTest, PerProcessStoreSeriesStayBoundedWithManyPids) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-per-process", "true").ok());
  options_.proc_root = root_ + "/proc";  // no comm files: "unknown"
  kernel_.SetPrivileged(true);
  Make();
  netlink_->set_max_process_store_series_for_test(60);
  std::vector<FakeRdmaQpCounter> objects;
  for (uint32_t pid = 1000; pid < 1300; ++pid) {
    objects.push_back({.id = pid, .pid = pid, .counters = {{"out_of_sequence", pid}}});
  }
  kernel_.SetQpCounters("mlx5_0", 1, objects);
  Tick(Tier::kMedium);
  EXPECT_EQ(ProcessSeries(), std::make_pair(size_t{6 * 6}, size_t{6 * 6}));
  std::string m = Exposition();
  const std::string fam = "fabricscope_rdma_process_qp_counter{";
  EXPECT_TRUE(
      Has(m, fam + "device=\"mlx5_0\",port=\"1\",process=\"unknown\",pid=\"1299\","
                   "counter=\"out_of_sequence\",namespace=\"\",pod=\"\",container=\"\"} 1299"))
      << m;
  // 1000..1294 summed.
  EXPECT_TRUE(Has(m, fam +
                         "device=\"mlx5_0\",port=\"1\",process=\"other\",pid=\"\","
                         "counter=\"out_of_sequence\",namespace=\"\",pod=\"\",container=\"\"} " +
                         std::to_string((1000 + 1294) * 295 / 2)))
      << m;

  // Churn: every tick five new processes take the top.
  uint32_t next = 5000;
  for (int tick = 0; tick < 20; ++tick) {
    for (int i = 0; i < 5; ++i, ++next) {
      objects.push_back({.id = next, .pid = next, .counters = {{"out_of_sequence", next}}});
    }
    kernel_.SetQpCounters("mlx5_0", 1, objects);
    Tick(Tier::kMedium);
    const auto [all, present] = ProcessSeries();
    EXPECT_LE(all, 60u + 6u) << "tick " << tick;  // the bound, plus the port's `other`
    EXPECT_LE(present, 6u * 6u) << "tick " << tick;
    EXPECT_GE(present, 6u) << "tick " << tick;  // at least `other`
  }
  m = Exposition();
  EXPECT_NE(m.find("fabricscope_rdma_process_series_dropped_total "), std::string::npos);
  EXPECT_EQ(m.find("fabricscope_rdma_process_series_dropped_total 0\n"), std::string::npos) << m;
  // Every process's counters are still in the port's sum.
  uint64_t total = 0;
  for (const auto& o : objects) total += o.counters[0].value;
  uint64_t exported = 0;
  for (const SeriesSnapshot& s : store_.Snapshot()) {
    if (s.key->source == "rdma_process" && s.state.present &&
        s.signal->Label("counter") == "out_of_sequence") {
      exported += s.state.last_raw;
    }
  }
  EXPECT_EQ(exported, total);
}

// A span that names its process (process.pid) is judged against that
// process's own QP counters first: the fake kernel's counter object of pid
// 4242 moves by 340 out-of-sequence events inside the span while the port's
// own counters stay flat.
TEST_F(RdmaNetlinkTest, SpanWithProcessPidGetsTheProcessScopedVerdict) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-per-process", "true").ok());
  options_.proc_root = root_ + "/proc";
  WriteFile(root_ + "/proc/4242/comm", "vllm_worker\n");
  WriteFile(root_ + "/proc/5151/comm", "other_worker\n");
  kernel_.SetPrivileged(true);
  Make();
  auto objects = [](uint64_t oos_4242) {
    return std::vector<FakeRdmaQpCounter>{
        {.id = 1, .pid = 4242, .counters = {{"out_of_sequence", oos_4242}, {"packet_seq_err", 3}}},
        {.id = 2, .pid = 5151, .counters = {{"out_of_sequence", 900}}},
    };
  };
  kernel_.SetQpCounters("mlx5_0", 1, objects(1000));
  auto step = [&] {
    Tick(Tier::kHot);
    Tick(Tier::kMedium);
  };
  for (int i = 0; i < 30; ++i) step();  // baseline: nothing moves
  const int64_t t0 = ts_ + 1;
  step();
  kernel_.SetQpCounters("mlx5_0", 1, objects(1340));
  step();
  step();
  const int64_t t1 = ts_ + 1;
  for (int i = 0; i < 3; ++i) step();

  Correlator correlator(&store_, &ports_, CorrelationOptions{}, StallPolicy{});
  auto span = [&](uint32_t pid) {
    Span s;
    s.name = "decode_step";
    s.start_unix_nano = t0;
    s.end_unix_nano = t1;
    s.pid = pid;
    return correlator.Correlate(s);
  };
  const SpanCorrelation without = span(0);
  EXPECT_EQ(without.reason.find("this process"), std::string::npos) << without.reason;
  for (const SeriesCorrelation& s : without.series) EXPECT_NE(s.source, "rdma_process");

  const SpanCorrelation mine = span(4242);
  EXPECT_EQ(mine.verdict, Verdict::kFabric) << mine.reason;
  EXPECT_EQ(mine.reason.rfind("this process's QPs: out_of_sequence +340 (mlx5_0/1) [pid 4242 "
                              "vllm_worker]; ports: ",
                              0),
            0u)
      << mine.reason;
  EXPECT_NE(mine.reason.find(without.reason), std::string::npos);
  ASSERT_FALSE(mine.Anomalous().empty());
  EXPECT_EQ(mine.series[0].source, "rdma_process");
  EXPECT_EQ(mine.series[0].counter, "out_of_sequence");
  EXPECT_NEAR(mine.series[0].stats.delta, 340, 1e-6);
  for (const SeriesCorrelation& s : mine.Anomalous()) {
    EXPECT_NE(s.counter, "packet_seq_err") << "did not move";
  }

  // Another process on the same port, and a pid without series: as without.
  for (uint32_t pid : {5151u, 777u}) {
    const SpanCorrelation other = span(pid);
    EXPECT_EQ(other.verdict, without.verdict) << pid;
    EXPECT_EQ(other.reason, without.reason) << pid;
    EXPECT_EQ(other.series.size(), without.series.size()) << pid;
  }
  // An SDK inside a container reports its container pid: pid 7 of pod
  // vllm-0 is host pid 4242 in the pod table (its NSpid), and the span's
  // host.name is the pod's name: the same process-scoped verdict.
  PodTable pods;
  pods.processes.push_back({4242, 7, {"llm", "vllm-0", "engine", ""}, "cgroup"});
  ports_.SetPods(pods);
  Span in_container;
  in_container.name = "decode_step";
  in_container.start_unix_nano = t0;
  in_container.end_unix_nano = t1;
  in_container.pid = 7;
  in_container.attributes = {{"host.name", "vllm-0"}};
  const SpanCorrelation contained = correlator.Correlate(in_container);
  EXPECT_EQ(contained.reason.rfind("this process's QPs: out_of_sequence +340 (mlx5_0/1)", 0), 0u)
      << contained.reason;
  EXPECT_EQ(contained.pod.pod, "vllm-0");
  EXPECT_EQ(contained.pod_via, "process 7 in its container, 4242 on the host (cgroup)");
  ports_.SetPods(PodTable{});

  // A span scoped to another port does not see the process's series.
  Span elsewhere;
  elsewhere.start_unix_nano = t0;
  elsewhere.end_unix_nano = t1;
  elsewhere.pid = 4242;
  elsewhere.rdma_device = "mlx5_9";
  EXPECT_EQ(correlator.Correlate(elsewhere).reason.find("this process"), std::string::npos);
}

TEST_F(RdmaNetlinkTest, PerProcessWithoutThePrivilegeIsReportedOnce) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-per-process", "true").ok());
  Make();
  int denied = 0;
  for (const auto& e : discover_errors_) denied += e.first == CollectorErrorCode::kPermissionDenied;
  EXPECT_EQ(denied, 1);
  EXPECT_TRUE(Tick(Tier::kConfig).errors.empty());
  EXPECT_EQ(kernel_.Requests(RDMA_NLDEV_CMD_STAT_SET), 1u);
}

// The real kernel transport on this machine's kernel.
TEST_F(RdmaNetlinkTest, ThisKernelWithoutRdmaNetlinkIsUnsupportedOnce) {
  if (MakeKernelRdmaNetlinkTransport().ok()) {
    GTEST_SKIP() << "this kernel has NETLINK_RDMA (ib_core loaded)";
  }
  Make(MakeKernelRdmaNetlinkTransport);
  ASSERT_EQ(discover_errors_.size(), 1u);
  EXPECT_EQ(discover_errors_[0].first, CollectorErrorCode::kUnsupported);
  EXPECT_TRUE(netlink_->unsupported());
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(Tick(Tier::kHot).errors.empty());
    EXPECT_TRUE(Tick(Tier::kConfig).errors.empty());
  }
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").samples, 2u);
}

TEST_F(RdmaNetlinkTest, CreateNeverAsksTheKernelForAFixtureTree) {
  CollectorContext cc{&options_, &store_, &ports_, &clock_, &metrics_};
  auto c = RdmaNetlinkCollector::Create(cc);
  ASSERT_TRUE(c.ok());
  TestPollContext ctx(&store_, Tier::kConfig, Now());
  ASSERT_TRUE((*c)->Discover(ctx).ok());
  EXPECT_TRUE(ctx.errors.empty());
}

// Golden: the store-backed exposition of the port's hw_counters families as
// the netlink path fills them (tests/golden/rdma_netlink.metrics).
// --- What the reads cost the device, and the budget ---

double MetricValue(const std::string& text, const std::string& sample) {
  const size_t at = text.find(sample + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + sample.size() + 1));
}

// The fake kernel's accounting follows the kernel's rules: a STAT_GET costs
// get_hw_stats plus N x K, a counter-object dump K.
TEST(FakeRdmaCostTest, StatGetCostsNTimesKAndADumpK) {
  FakeRdmaNetlinkKernel kernel;
  FakeRdmaPort port{.port = 1};
  port.counters = {{"a", 1}, {"b", 2}, {"c", 3}};
  port.optional = {{"d", 4, true}, {"e", 5, false}};  // N = 4 served
  for (uint32_t i = 0; i < 5; ++i) port.qp_counters.push_back({.id = i + 1, .pid = 100 + i});
  kernel.AddDevice({.index = 1, .name = "mlx5_0", .ports = {port}, .get_hw_stats_commands = 3});
  std::unique_ptr<RdmaNetlinkTransport> t = kernel.NewTransport();
  std::vector<uint8_t> replies;
  for (int i = 0; i < 2; ++i) {
    nl_msg* m = BuildRdmaStatGet(1, 1);
    ASSERT_TRUE(t->Exchange(m, &replies).ok());
    nlmsg_free(m);
  }
  FakeDeviceQueries q = kernel.DeviceQueries("mlx5_0");
  EXPECT_EQ(q.get_hw_stats, 2u);
  EXPECT_EQ(q.hw_stats_commands, 6u);
  EXPECT_EQ(q.counter_object, 2u * 4 * 5);
  nl_msg* dump = BuildRdmaQpCounterDump(1);
  ASSERT_TRUE(t->Exchange(dump, &replies).ok());
  nlmsg_free(dump);
  EXPECT_EQ(kernel.DeviceQueries("mlx5_0").counter_object, 2u * 4 * 5 + 5);
  EXPECT_EQ(kernel.DeviceQueries().Total(), 6u + 40 + 5);
}

using TierIntervals = RdmaNetlinkCollector::TierIntervals;
const TierIntervals kDefaultIntervals = {absl::Milliseconds(10), absl::Milliseconds(100),
                                         absl::Seconds(1), absl::Seconds(10)};

RdmaNetlinkCollector::DeviceLoad Mlx5Port(uint32_t objects, bool per_process) {
  return {.ports = {{.served = 28, .objects = objects, .hot = true, .medium = true}},
          .get_hw_stats_commands = 3,
          .per_process = per_process};
}

// The default plan (no bound objects) is read at full rate well within the
// default budget; per-process mode with K = 8 and K = 64 is stretched into it,
// medium first, at the shortest strides that fit.
TEST(RdmaNetlinkBudgetTest, StridesKeepTheBudgetMediumFirst) {
  using C = RdmaNetlinkCollector;
  C::ReadStrides full = C::PlanStrides(Mlx5Port(0, false), kDefaultIntervals, 2000);
  EXPECT_EQ(full.hot, 1u);
  EXPECT_EQ(full.medium, 1u);
  EXPECT_TRUE(full.within);
  EXPECT_NEAR(full.per_second, 3 * (100 + 10 + 0.1), 1e-6);

  for (uint32_t k : {8u, 64u}) {
    const C::DeviceLoad load = Mlx5Port(k, true);
    C::ReadStrides r = C::PlanStrides(load, kDefaultIntervals, 2000);
    EXPECT_TRUE(r.within) << k;
    EXPECT_LE(r.per_second, 2000) << k;
    EXPECT_NEAR(r.per_second, C::QueriesPerSecond(load, kDefaultIntervals, r.hot, r.medium), 1e-9);
    EXPECT_GT(C::QueriesPerSecond(load, kDefaultIntervals, 1, 1), 20'000) << k;
    // The medium tier went first, to the slow interval (100 ms x 8 <= 1 s).
    EXPECT_GE(r.medium, 8u) << k;
    EXPECT_GT(r.hot, 1u) << k;
    // The shortest hot stride that fits: half of it does not.
    EXPECT_GT(C::QueriesPerSecond(load, kDefaultIntervals, r.hot / 2, r.medium), 2000) << k;
  }
  // No budget: full rate whatever it costs.
  C::ReadStrides none = C::PlanStrides(Mlx5Port(64, true), kDefaultIntervals, 0);
  EXPECT_EQ(none.hot, 1u);
  EXPECT_EQ(none.medium, 1u);
  // Beyond reach: the longest strides (the config interval), said so.
  C::ReadStrides over = C::PlanStrides(Mlx5Port(100'000, true), kDefaultIntervals, 2000);
  EXPECT_FALSE(over.within);
  EXPECT_EQ(over.hot, 512u);    // 10 ms x 512 <= 10 s < 10 ms x 1024
  EXPECT_EQ(over.medium, 64u);  // 100 ms x 64 <= 10 s
}

// What the collector counts equals what the fake kernel was asked, exactly,
// with and without bound counter objects; K is learned at the config tier
// (a change of K between two dumps is counted from the next one).
TEST_F(RdmaNetlinkTest, DeviceQueriesCountedAsTheKernelIssuesThem) {
  Make();
  auto counted = [&](const std::string& kind) {
    return MetricValue(SelfMetrics(),
                       "fabricscope_device_queries_total{device=\"mlx5_0\",kind=\"" + kind + "\"}");
  };
  auto run = [&] {
    for (int i = 0; i < 20; ++i) {
      Tick(Tier::kHot);
      if (i % 10 == 0) Tick(Tier::kMedium);
    }
  };
  run();
  FakeDeviceQueries q = kernel_.DeviceQueries("mlx5_0");
  EXPECT_EQ(q.counter_object, 0u);
  EXPECT_EQ(counted("hw_stats"), static_cast<double>(q.hw_stats_commands));
  // Discovery, then 19 hot and 1 medium reads (each tier starts on its tick
  // after first seeing the claim).
  EXPECT_EQ(q.hw_stats_commands, 3u * (1 + 19 + 1));
  kernel_.SetQpCounters("mlx5_0", 1, {{.id = 1, .pid = 200}, {.id = 2, .pid = 201}});
  Tick(Tier::kConfig);  // learns K = 2
  const double hw_before = counted("hw_stats");
  const double objects_before = counted("counter_object");
  q = kernel_.DeviceQueries("mlx5_0");
  run();
  const FakeDeviceQueries after = kernel_.DeviceQueries("mlx5_0");
  EXPECT_EQ(after.counter_object - q.counter_object, 22u * 3 * 2);  // 22 reads x N x K
  EXPECT_EQ(counted("counter_object") - objects_before,
            static_cast<double>(after.counter_object - q.counter_object));
  EXPECT_EQ(counted("hw_stats") - hw_before,
            static_cast<double>(after.hw_stats_commands - q.hw_stats_commands));
  const std::string m = SelfMetrics();
  EXPECT_EQ(MetricValue(m, "fabricscope_rdma_counter_objects{device=\"mlx5_0\",port=\"1\"}"), 2);
  // Within the default budget: full rate.
  EXPECT_EQ(
      MetricValue(m, "fabricscope_rdma_read_interval_seconds{device=\"mlx5_0\",tier=\"hot\"}"),
      0.01);
}

// Per-process mode with K = 64 bound objects: the plan is stretched into the
// default budget, and over ten simulated seconds the fake kernel is asked for
// no more than the budget allows; the hot series still get fresh samples.
TEST_F(RdmaNetlinkTest, PerProcessWithManyObjectsStaysWithinTheBudget) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-per-process", "true").ok());
  options_.proc_root = root_ + "/proc";
  kernel_.SetPrivileged(true);
  std::vector<FakeRdmaQpCounter> objects;
  for (uint32_t i = 0; i < 64; ++i) {
    objects.push_back({.id = i + 1, .pid = 1000 + i, .counters = {{"out_of_sequence", i}}});
  }
  kernel_.SetQpCounters("mlx5_0", 1, objects);
  Make();
  Tick(Tier::kConfig);  // K = 64 seen: the plan is stretched
  const RdmaNetlinkCollector::ReadStrides r = netlink_->StridesForTest("mlx5_0");
  EXPECT_TRUE(r.within);
  EXPECT_GT(r.hot, 1u);
  EXPECT_GT(r.medium, 1u);
  const uint64_t before = kernel_.DeviceQueries("mlx5_0").Total();
  const uint64_t stat_gets = kernel_.Requests(RDMA_NLDEV_CMD_STAT_GET);
  // Ten seconds at the default intervals: 1,000 hot, 100 medium, 1 config tick.
  for (int i = 1; i <= 1000; ++i) {
    Tick(Tier::kHot);
    if (i % 10 == 0) Tick(Tier::kMedium);
  }
  Tick(Tier::kConfig);
  const uint64_t used = kernel_.DeviceQueries("mlx5_0").Total() - before;
  EXPECT_LE(used, 2000u * 10) << "strides " << r.hot << "/" << r.medium;
  // Unbudgeted, the same ten seconds would cost (1 + 3 x 64) x 1,101 STAT_GETs.
  EXPECT_LT(used, (1 + 3 * 64) * 1101 / 5);
  const uint64_t reads = kernel_.Requests(RDMA_NLDEV_CMD_STAT_GET) - stat_gets;
  EXPECT_GE(reads, 1000u / r.hot);
  // The congestion series still move at the stretched hot interval.
  kernel_.SetCounter("mlx5_0", 1, "np_cnp_sent", 900);
  for (uint32_t i = 0; i < r.hot; ++i) Tick(Tier::kHot);
  EXPECT_EQ(State("hw_counters", "np_cnp_sent").last_raw, 900u);
  EXPECT_NE(SelfMetrics().find("fabricscope_device_queries_planned_per_second{device=\"mlx5_0\"}"),
            std::string::npos);
}

// The read plan (--explain-cost): the claimed port's STAT_GETs at their
// strides with N x K, no sysfs hw_counters reads for it, its PMA files one MAD
// each, the counter-object dumps; the queries agree with the budget's sum.
TEST_F(RdmaNetlinkTest, ReadPlanSaysWhatEachReadCosts) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-per-process", "true").ok());
  options_.proc_root = root_ + "/proc";
  kernel_.SetPrivileged(true);
  std::vector<FakeRdmaQpCounter> objects;
  for (uint32_t i = 0; i < 4; ++i) objects.push_back({.id = i + 1, .pid = 300 + i});
  kernel_.SetQpCounters("mlx5_0", 1, objects);
  Make();
  std::map<std::string, ReadPlanRow> rows;
  for (const ReadPlanRow& r : netlink_->ReadPlan()) rows[r.read + "@" + r.tier] = r;
  for (const ReadPlanRow& r : sysfs_->ReadPlan()) rows[r.read + "@" + r.tier] = r;
  ASSERT_TRUE(rows.contains("STAT_GET@hot")) << rows.size();
  const ReadPlanRow& hot = rows["STAT_GET@hot"];
  EXPECT_EQ(hot.values, 3u);  // N
  EXPECT_DOUBLE_EQ(hot.reads_per_second, 100);
  EXPECT_DOUBLE_EQ(hot.queries_per_second, (3 + 3 * 4) * 100.0);
  EXPECT_EQ(hot.note, "3 (get_hw_stats) + N x K = 3 x 4");
  EXPECT_TRUE(rows.contains("STAT_GET@medium"));
  EXPECT_TRUE(rows.contains("STAT_GET (re-probe)@config"));
  EXPECT_DOUBLE_EQ(rows["counter-object dump@config"].queries_per_second, 4 / 10.0);
  EXPECT_DOUBLE_EQ(rows["counter-object dump (--rdma-per-process)@medium"].queries_per_second,
                   4 / 0.1);
  // The claimed port's hw_counters are not read through sysfs; its PMA files are.
  EXPECT_FALSE(rows.contains("hw_counters files@hot"));
  const ReadPlanRow& pma = rows["counters/ files (IB PMA)@slow"];
  EXPECT_EQ(pma.values, 2u);
  EXPECT_DOUBLE_EQ(pma.queries_per_second, 2);
  // Within the budget the netlink rows add up to the plan's cost.
  double netlink = 0;
  for (const ReadPlanRow& r : netlink_->ReadPlan()) netlink += r.queries_per_second;
  RdmaNetlinkCollector::DeviceLoad load{
      .ports = {{.served = 3, .objects = 4, .hot = true, .medium = true}},
      .get_hw_stats_commands = 3,
      .per_process = true};
  EXPECT_NEAR(netlink, RdmaNetlinkCollector::QueriesPerSecond(load, options_.intervals, 1, 1),
              1e-9);
}

// Behind the kernel's lifespan cache the driver is asked on the first read
// after the staleness window: every 2nd 10 ms read for a 20 ms window.
TEST(RdmaSysfsReadPlanTest, RefreshesFollowTheStalenessWindow) {
  EXPECT_DOUBLE_EQ(RdmaSysfsCollector::HwStatsRefreshesPerSecond(10'000'000, 20'000'000), 50);
  EXPECT_DOUBLE_EQ(RdmaSysfsCollector::HwStatsRefreshesPerSecond(10'000'000, 11'000'000), 50);
  EXPECT_DOUBLE_EQ(RdmaSysfsCollector::HwStatsRefreshesPerSecond(10'000'000, 0), 100);
  EXPECT_DOUBLE_EQ(RdmaSysfsCollector::HwStatsRefreshesPerSecond(100'000'000, 20'000'000), 10);
}

TEST_F(RdmaNetlinkTest, GoldenMetrics) {
  ASSERT_TRUE(SetCollectorOption(&options_, "rdma-enable-optional-counters", "cc_rx_ce_pkts").ok());
  kernel_.SetPrivileged(true);
  Make();
  for (int i = 0; i < 2; ++i) {
    Tick(Tier::kHot);
    Tick(Tier::kMedium);
  }
  kernel_.SetCounter("mlx5_0", 1, "out_of_sequence", 400);
  kernel_.SetCounter("mlx5_0", 1, "cc_rx_ce_pkts", 2000);
  Tick(Tier::kHot);
  Tick(Tier::kMedium);
  Tick(Tier::kSlow);
  std::string got =
      prometheus::TextSerializer().Serialize(RenderStoreFamilies(store_, &ports_, ts_));
  // Only the families the netlink path writes, plus the source and optional gauges.
  std::string kept;
  std::istringstream lines(got + SelfMetrics());
  for (std::string line; std::getline(lines, line);) {
    if (line.find("fabricscope_rdma_errors_total") != std::string::npos ||
        line.find("fabricscope_cnp_sent_total") != std::string::npos ||
        line.find("fabricscope_rdma_hw_counters_source") != std::string::npos ||
        line.find("fabricscope_rdma_optional_counter_enabled") != std::string::npos) {
      kept += line + "\n";
    }
  }
  EXPECT_NE(kept.find("counter=\"out_of_sequence\"} 400"), std::string::npos) << kept;
  EXPECT_NE(kept.find("counter=\"cc_rx_ce_pkts\"} 2000"), std::string::npos) << kept;
  const std::string golden = SourceDir() + "/tests/golden/rdma_netlink.metrics";
  if (std::getenv("FABRICSCOPE_UPDATE_GOLDENS") != nullptr) {
    std::ofstream(golden, std::ios::trunc) << kept;
  }
  EXPECT_EQ(kept, ReadFile(golden))
      << "differs from " << golden
      << " (if intended: FABRICSCOPE_UPDATE_GOLDENS=1 build/release/unit_tests "
         "--gtest_filter=RdmaNetlinkTest.GoldenMetrics, or tools/update-goldens.sh)";
}

}  // namespace
}  // namespace rdma_netlink_collector_test
}  // namespace fabricscope
