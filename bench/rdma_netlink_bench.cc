// hw_counters of 8 mlx5 devices x 2 RoCE ports (the 28-name mlx5 set of
// sysfs_sweep_bench), read by the two paths, hot + medium tier per sweep:
//  - BM_SysfsHwCounters: rdma_sysfs alone, one pread + parse per file
//    (28 per port per sweep);
//  - BM_NetlinkHwCounters: rdma_sysfs (which then skips the claimed ports)
//    plus rdma_netlink, one RDMA_NLDEV_CMD_STAT_GET per port per tier tick,
//    served by the fake kernel of tests/support/rdma_netlink_fake.h (which
//    renders the reply with libnl and walks it with ScanNetlinkReplies, as the
//    socket transport does after recvmsg);
//  - BM_ParseStatGetReply: the collector's share of one port's netlink tick
//    alone: parse one 28-counter reply.
// Reported per sweep; counters: ports, requests (netlink round trips) per
// sweep. Neither path here pays the kernel: no sysfs show() / firmware query,
// no netlink syscalls (see bench/README.md for what that leaves out).
#include <benchmark/benchmark.h>
#include <netlink/msg.h>
#include <rdma/rdma_netlink.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/mlx5_port_counters.h"
#include "collectors/collector.h"
#include "collectors/rdma_netlink.h"
#include "collectors/rdma_netlink_collector.h"
#include "collectors/rdma_sysfs_collector.h"
#include "core/clock.h"
#include "core/hot_counters.h"
#include "core/metrics.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/support/rdma_netlink_fake.h"

namespace fabricscope {
namespace {

using bench::kHwCounters;

namespace fs = std::filesystem;

constexpr int kDevices = 8;
constexpr int kPorts = 2;

constexpr size_t kNames = sizeof(kHwCounters) / sizeof(kHwCounters[0]);

void Write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << s;
}

// The sysfs tree (hw_counters only) and the same counters in a fake kernel.
class Setup {
 public:
  static Setup& Get() {
    static Setup* s = new Setup();
    return *s;
  }
  const std::string& root() const { return root_; }
  FakeRdmaNetlinkKernel& kernel() { return kernel_; }

 private:
  Setup() {
    char tmpl[] = "/tmp/fabricscope_netlink_bench.XXXXXX";
    root_ = mkdtemp(tmpl);
    uint64_t v = 1234567;
    for (int d = 0; d < kDevices; ++d) {
      const std::string dev = "mlx5_" + std::to_string(d);
      FakeRdmaDevice fd{.index = static_cast<uint32_t>(d + 1), .name = dev};
      for (int p = 1; p <= kPorts; ++p) {
        fs::path port = fs::path(root_) / "class/infiniband" / dev / "ports" / std::to_string(p);
        Write(port / "link_layer", "Ethernet\n");
        Write(port / "state", "4: ACTIVE\n");
        Write(port / "gid_attrs/ndevs/0",
              "ens" + std::to_string(d) + "f" + std::to_string(p) + "\n");
        FakeRdmaPort fp{.port = static_cast<uint32_t>(p)};
        for (const char* n : kHwCounters) {
          Write(port / "hw_counters" / n, std::to_string(v += 104729) + "\n");
          fp.counters.push_back({n, v});
        }
        fd.ports.push_back(std::move(fp));
      }
      kernel_.AddDevice(std::move(fd));
    }
    std::atexit([] { fs::remove_all(Get().root_); });
  }
  std::string root_;
  FakeRdmaNetlinkKernel kernel_;
};

class BenchPollContext final : public PollContext {
 public:
  BenchPollContext(Store* store, Tier tier, int64_t ts) : store_(store), tier_(tier), ts_(ts) {}
  Tier tier() const override { return tier_; }
  int64_t ts_ns() const override { return ts_; }
  void Append(SeriesId id, uint64_t raw) override {
    ++appends;
    store_->Append(id, ts_, raw);
  }
  void RecordError(CollectorErrorCode, absl::string_view, absl::string_view) override { ++errors; }
  uint64_t appends = 0;
  uint64_t errors = 0;

 private:
  Store* store_;
  Tier tier_;
  int64_t ts_;
};

// range(0): 0 = sysfs only, 1 = netlink preferred (sysfs polled too, skipping).
void BM_HwCounters(benchmark::State& state) {
  Setup& setup = Setup::Get();
  const bool netlink = state.range(0) != 0;
  CollectorOptions options;
  options.sysfs_root = setup.root();
  Store store;
  PortInventory ports;
  FakeClock clock;
  MetricsRegistry metrics;
  CollectorContext cc{&options, &store, &ports, &clock, &metrics};
  RdmaSysfsCollector sysfs(cc);
  std::unique_ptr<RdmaNetlinkCollector> nl;
  if (netlink) nl = std::make_unique<RdmaNetlinkCollector>(cc, setup.kernel().Factory());
  int64_t ts = 1'700'000'000'000'000'000;
  {
    BenchPollContext ctx(&store, Tier::kConfig, ts);
    (void)sysfs.Discover(ctx);
    if (nl != nullptr) (void)nl->Discover(ctx);
  }
  auto sweep = [&](uint64_t* appends, uint64_t* errors) {
    ts += 10'000'000;
    for (Tier t : {Tier::kHot, Tier::kMedium}) {
      BenchPollContext ctx(&store, t, ts);
      (void)sysfs.Poll(ctx);
      if (nl != nullptr) (void)nl->Poll(ctx);
      *appends += ctx.appends;
      *errors += ctx.errors;
    }
  };
  uint64_t warm_appends = 0, errors = 0;
  sweep(&warm_appends, &errors);  // the tiers' first sight of the claims
  const uint64_t requests0 = setup.kernel().Requests(RDMA_NLDEV_CMD_STAT_GET);
  uint64_t appends = 0;
  for (auto _ : state) sweep(&appends, &errors);
  const uint64_t expected = state.iterations() * kDevices * kPorts * kNames;
  if (errors != 0) state.SkipWithError("errors during the sweep");
  if (appends != expected) state.SkipWithError("short sweep");
  state.SetItemsProcessed(static_cast<int64_t>(appends));
  state.counters["ports"] = kDevices * kPorts;
  state.counters["requests_per_sweep"] =
      static_cast<double>(setup.kernel().Requests(RDMA_NLDEV_CMD_STAT_GET) - requests0) /
      static_cast<double>(state.iterations());
}
BENCHMARK(BM_HwCounters)->Arg(0)->Arg(1)->ArgName("netlink")->Unit(benchmark::kMicrosecond);

void BM_ParseStatGetReply(benchmark::State& state) {
  Setup& setup = Setup::Get();
  auto t = setup.kernel().NewTransport();
  std::vector<uint8_t> replies;
  nl_msg* m = BuildRdmaStatGet(1, 1);
  if (!t->Exchange(m, &replies).ok()) state.SkipWithError("no reply");
  nlmsg_free(m);
  for (auto _ : state) {
    auto stats = ParseRdmaStatGet(replies);
    benchmark::DoNotOptimize(stats);
  }
  state.SetItemsProcessed(state.iterations() * kNames);
  state.counters["reply_bytes"] = static_cast<double>(replies.size());
}
BENCHMARK(BM_ParseStatGetReply);

}  // namespace
}  // namespace fabricscope

BENCHMARK_MAIN();
