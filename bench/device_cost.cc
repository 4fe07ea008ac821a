// What the daemon's RDMA reads cost one device, in device (firmware) queries
// per second per port (issue 34 item 1): the real rdma_sysfs and rdma_netlink
// collectors poll one mlx5 RoCE port (the 28-name hw_counters set of
// rdma_netlink_bench, the 21 IB PMA counters/ files of the captured mlx5
// fixture) for ten simulated seconds at the default tier intervals (1,000 hot,
// 100 medium, 10 slow and 1 config tick), against the fake kernel of
// tests/support/rdma_netlink_fake.h, which accounts device queries by the
// kernel's rules (ARCHITECTURE.md, "What a read costs the device"): a STAT_GET
// costs get_hw_stats (3 firmware commands on mlx5) plus N x K, a dump of the
// counter objects K.
//
// Rows: the netlink path at the defaults; with --rdma-per-process and K = 1,
// 8, 64 counter objects bound on the port, without a budget (before issue 34)
// and with the default --device-query-budget (after); the sysfs-only fallback
// (no RDMA netlink), from the files the real rdma_sysfs collector reads per
// tier and the sysfs rules: each hw_counters read costs K, the driver is asked
// on the first read after the staleness window (10 ms = 3 jiffies at HZ 250:
// a 16 ms window, every 2nd 10 ms read: 50/s), each counters/ read is one PMA
// MAD. Every row includes the PMA files (read through sysfs on both paths) and
// counts syscalls: 2 per netlink request (sendmsg + recvmsg), 1 per file read.
//
// Plain C++ (no Google Benchmark: nothing here is timed); prints a Markdown
// table. Usage: device_cost
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/mlx5_port_counters.h"
#include "collectors/collector.h"
#include "collectors/rdma_netlink_collector.h"
#include "collectors/rdma_sysfs_collector.h"
#include "collectors/registry.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/support/rdma_netlink_fake.h"

namespace fabricscope {
namespace {

using bench::kHwCounters;
using bench::kPmaCounters;

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << s;
}

class Ctx final : public PollContext {
 public:
  Ctx(Store* store, Tier tier, int64_t ts) : store_(store), tier_(tier), ts_(ts) {}
  Tier tier() const override { return tier_; }
  int64_t ts_ns() const override { return ts_; }
  void Append(SeriesId id, uint64_t raw) override { store_->Append(id, ts_, raw); }
  void RecordError(CollectorErrorCode, absl::string_view, absl::string_view) override {}

 private:
  Store* store_;
  Tier tier_;
  int64_t ts_;
};

struct Row {
  std::string config;
  double before = 0;  // queries/s without a budget
  double after = 0;   // with the default budget
  std::string intervals;
};

// One run's collector world: options, store, port inventory, clock, metrics.
struct Host {
  CollectorOptions options;
  Store store;
  PortInventory ports;
  FakeClock clock;
  MetricsRegistry metrics;
  CollectorContext Context() { return {&options, &store, &ports, &clock, &metrics}; }
};

// Every RDMA netlink request the fake kernel served.
uint64_t AllRequests(const FakeRdmaNetlinkKernel& kernel) {
  uint64_t n = 0;
  for (int cmd = 0; cmd < 64; ++cmd) n += kernel.Requests(cmd);
  return n;
}

struct Cost {
  double queries = 0;   // device queries per second (netlink and PMA MADs)
  double syscalls = 0;  // per second: 2 per netlink request, 1 per file read
  std::string intervals;
};

// One port, K bound objects, ten simulated seconds.
Cost NetlinkRun(const std::string& root, uint32_t objects, bool per_process, bool budget) {
  FakeRdmaNetlinkKernel kernel;
  FakeRdmaPort port{.port = 1};
  uint64_t v = 1000;
  for (const char* n : kHwCounters) port.counters.push_back({n, v += 7});
  for (uint32_t i = 0; i < objects; ++i) {
    port.qp_counters.push_back(
        {.id = i + 1, .pid = 1000 + i, .counters = {{"out_of_sequence", i}}});
  }
  FakeRdmaDevice dev{.index = 1, .name = "mlx5_0", .ports = {port}, .get_hw_stats_commands = 3};
  kernel.AddDevice(dev);
  kernel.SetPrivileged(true);
  Host host;
  host.options.sysfs_root = root;
  host.options.proc_root = root + "/proc";
  if (per_process) (void)SetCollectorOption(&host.options, "rdma-per-process", "true");
  if (!budget) (void)SetCollectorOption(&host.options, "device-query-budget", "0");
  RdmaSysfsCollector sysfs(host.Context());
  RdmaNetlinkCollector netlink(host.Context(), kernel.Factory());
  int64_t ts = 1'700'000'000'000'000'000;
  auto tick = [&](Tier t) {
    Ctx ctx(&host.store, t, ts += 1'000'000);
    (void)sysfs.Poll(ctx);
    (void)netlink.Poll(ctx);
  };
  {
    Ctx ctx(&host.store, Tier::kConfig, ts);
    (void)sysfs.Discover(ctx);
    (void)netlink.Discover(ctx);
  }
  tick(Tier::kConfig);  // K seen, the plan made
  const uint64_t before = kernel.DeviceQueries().Total();
  const uint64_t requests_before = AllRequests(kernel);
  for (int i = 1; i <= 1000; ++i) {
    tick(Tier::kHot);
    if (i % 10 == 0) tick(Tier::kMedium);
    if (i % 100 == 0) tick(Tier::kSlow);
  }
  tick(Tier::kConfig);
  const RdmaNetlinkCollector::ReadStrides r = netlink.StridesForTest("mlx5_0");
  Cost c;
  c.intervals = std::to_string(10 * r.hot) + " ms / " + std::to_string(100 * r.medium) + " ms";
  const uint64_t requests = AllRequests(kernel);
  // The IB PMA counters/ files stay on sysfs: one MAD and one pread each, 10
  // slow ticks.
  const double pma = static_cast<double>(sysfs.OpenFilesForTest(Tier::kSlow));
  c.queries = static_cast<double>(kernel.DeviceQueries().Total() - before) / 10.0 + pma;
  c.syscalls = 2.0 * static_cast<double>(requests - requests_before) / 10.0 + pma;
  return c;
}

// The sysfs-only fallback: files per tier from the real collector, the
// kernel's sysfs rules applied to them.
Cost SysfsRun(const std::string& root, uint32_t objects) {
  Host host;
  host.options.sysfs_root = root;
  RdmaSysfsCollector sysfs(host.Context());
  Ctx ctx(&host.store, Tier::kConfig, 1);
  (void)sysfs.Discover(ctx);
  for (Tier t : {Tier::kHot, Tier::kMedium, Tier::kSlow, Tier::kConfig}) {
    Ctx c(&host.store, t, 2);
    (void)sysfs.Poll(c);
  }
  const double hot = static_cast<double>(sysfs.OpenFilesForTest(Tier::kHot));
  const double medium = static_cast<double>(sysfs.OpenFilesForTest(Tier::kMedium));
  const double pma = static_cast<double>(sysfs.OpenFilesForTest(Tier::kSlow));
  // HZ 250, lifespan 10 ms (3 jiffies): the driver asked on the first 10 ms
  // read after the 16 ms staleness window, every 2nd read.
  const double refreshes = RdmaSysfsCollector::HwStatsRefreshesPerSecond(
      10'000'000, RdmaSysfsCollector::StaleWindowNs(10, 250));
  Cost c;
  c.queries = 3 * refreshes + (hot * 100 + medium * 10) * objects + pma * 1;
  c.syscalls = hot * 100 + medium * 10 + pma;
  c.intervals = "10 ms / 100 ms";
  return c;
}

int Main() {
  char tmpl[] = "/tmp/fabricscope_device_cost.XXXXXX";
  const std::string root = mkdtemp(tmpl);
  const fs::path port = fs::path(root) / "class/infiniband/mlx5_0/ports/1";
  Write(port / "link_layer", "Ethernet\n");
  Write(port / "state", "4: ACTIVE\n");
  Write(port / "gid_attrs/ndevs/0", "ens1f0np0\n");
  for (const char* n : kHwCounters) Write(port / "hw_counters" / n, "1\n");
  for (const char* n : kPmaCounters) Write(port / "counters" / n, "1\n");

  std::printf(
      "| configuration | device queries/s per port, no budget | with the default budget "
      "(2000/s) | syscalls/s with it | hot / medium read interval with it |\n"
      "|---|---|---|---|---|\n");
  auto row = [](const std::string& name, const Cost& before, const Cost& after) {
    std::printf("| %s | %.0f | %.0f | %.0f | %s |\n", name.c_str(), before.queries, after.queries,
                after.syscalls, after.intervals.c_str());
  };
  row("netlink, defaults (K = 0)", NetlinkRun(root, 0, false, false),
      NetlinkRun(root, 0, false, true));
  for (uint32_t k : {1u, 8u, 64u}) {
    row("netlink, --rdma-per-process, K = " + std::to_string(k), NetlinkRun(root, k, true, false),
        NetlinkRun(root, k, true, true));
  }
  for (uint32_t k : {0u, 8u}) {
    const Cost c = SysfsRun(root, k);
    std::printf(
        "| sysfs only (no RDMA netlink), K = %u | %.0f | (no budget on sysfs yet) | %.0f | "
        "%s |\n",
        k, c.queries, c.syscalls, c.intervals.c_str());
  }
  fs::remove_all(root);
  return 0;
}

}  // namespace
}  // namespace fabricscope

int main() { return fabricscope::Main(); }
