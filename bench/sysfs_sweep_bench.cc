// One full sweep of the rdma_sysfs collector over a generated fake tree of
// 8 mlx5 devices x 2 RoCE ports, each with the full counters/ (21 PMA files)
// and hw_counters/ (28 counters + lifespan) sets: 16 x 49 = 784 counter reads
// per sweep (hot + medium + slow tier, the slow tier including its device
// rescan). Reported: time per sweep, and items/s = counter reads per second
// (ns per read = 1e9 / items_per_second). BM_PreadFloor is the floor under it:
// a plain pread loop over the same files kept open. See bench/README.md for figures.
//
// The tree lives in a temporary directory on a regular filesystem: this
// measures the collector's own cost (syscall, parse, store append), not the
// kernel's sysfs/firmware cost on a real NIC (counters.md section 7).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/mlx5_port_counters.h"
#include "collectors/collector.h"
#include "collectors/rdma_sysfs_collector.h"
#include "collectors/sysfs_reader.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

using bench::kHwCounters;
using bench::kPmaCounters;

namespace fs = std::filesystem;

constexpr int kDevices = 8;
constexpr int kPorts = 2;

void Write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::trunc) << s;
}

// Generates the tree once per process; removed at exit.
class GeneratedTree {
 public:
  static const GeneratedTree& Get() {
    static const GeneratedTree* tree = new GeneratedTree();
    return *tree;
  }
  const std::string& root() const { return root_; }
  size_t counter_files() const { return counter_files_; }

 private:
  GeneratedTree() {
    char tmpl[] = "/tmp/fabricscope_sweep_bench.XXXXXX";
    root_ = mkdtemp(tmpl);
    uint64_t v = 1234567;
    for (int d = 0; d < kDevices; ++d) {
      for (int p = 1; p <= kPorts; ++p) {
        fs::path port = fs::path(root_) / "class/infiniband" / ("mlx5_" + std::to_string(d)) /
                        "ports" / std::to_string(p);
        Write(port / "link_layer", "Ethernet\n");
        Write(port / "state", "4: ACTIVE\n");
        Write(port / "rate", "200 Gb/sec (4X HDR)\n");
        Write(port / "gid_attrs/ndevs/0",
              "ens" + std::to_string(d) + "f" + std::to_string(p) + "\n");
        Write(port / "hw_counters/lifespan", "10\n");
        for (const char* n : kPmaCounters) {
          Write(port / "counters" / n, std::to_string(v += 7919) + "\n");
          ++counter_files_;
        }
        for (const char* n : kHwCounters) {
          Write(port / "hw_counters" / n, std::to_string(v += 104729) + "\n");
          ++counter_files_;
        }
      }
    }
    std::atexit([] { fs::remove_all(Get().root_); });
  }
  std::string root_;
  size_t counter_files_ = 0;
};

// The scheduler's TickContext in miniature: with a store and a tick, the
// collector's readings go to Store::Append(tick, readings) in one call
// (`batch`, what the scheduler does) or one Store::Append(id, tick, raw) per
// reading (the path before the batch call).
class BenchPollContext final : public PollContext {
 public:
  BenchPollContext(Store* store, Tier tier, int64_t ts, const TickRef* tick = nullptr,
                   bool batch = true)
      : store_(store), tier_(tier), ts_(ts), tick_(tick), batch_(batch) {}
  Tier tier() const override { return tier_; }
  int64_t ts_ns() const override { return ts_; }
  void Append(SeriesId id, uint64_t raw) override {
    ++appends;
    if (store_ == nullptr) return;
    if (tick_ != nullptr) {
      store_->Append(id, *tick_, raw);
    } else {
      store_->Append(id, ts_, raw);
    }
  }
  void AppendReadings(absl::Span<const SeriesReading> readings) override {
    if (store_ == nullptr || tick_ == nullptr || !batch_) {
      PollContext::AppendReadings(readings);
      return;
    }
    appends += readings.size();
    store_->Append(*tick_, readings);
  }
  void RecordError(CollectorErrorCode, absl::string_view, absl::string_view) override { ++errors; }
  uint64_t appends = 0;
  uint64_t errors = 0;

 private:
  Store* store_;
  Tier tier_;
  int64_t ts_;
  const TickRef* tick_;
  bool batch_;
};

// range(0): 0 = samples discarded (collector cost alone); 1 = appended to the
// store as the scheduler does (one Store::Tick per tier, the tick's readings
// in one Store::Append call); 2 = the same with one Store::Append per reading.
void BM_FullSweep(benchmark::State& state) {
  const GeneratedTree& tree = GeneratedTree::Get();
  CollectorOptions config;
  config.sysfs_root = tree.root();
  Store store;
  PortInventory ports;
  FakeClock clock;
  MetricsRegistry metrics;
  RdmaSysfsCollector collector(CollectorContext{&config, &store, &ports, &clock, &metrics});
  Store* sink = state.range(0) != 0 ? &store : nullptr;
  const bool batch = state.range(0) != 2;
  TickColumn* columns[kNumTiers];
  for (TickColumn*& c : columns) c = store.AddTickColumn(absl::Milliseconds(10));
  int64_t ts = 1'700'000'000'000'000'000;
  {
    BenchPollContext ctx(sink, Tier::kConfig, ts);
    if (!collector.Discover(ctx).ok()) state.SkipWithError("discover failed");
  }
  uint64_t reads = 0;
  uint64_t errors = 0;
  for (auto _ : state) {
    ts += 10'000'000;
    for (Tier t : {Tier::kHot, Tier::kMedium, Tier::kSlow}) {
      const TickRef tick = store.Tick(columns[static_cast<int>(t)], ts);
      BenchPollContext ctx(sink, t, ts, &tick, batch);
      (void)collector.Poll(ctx);
      reads += ctx.appends;
      errors += ctx.errors;
    }
  }
  if (errors != 0) state.SkipWithError("errors during the sweep");
  if (reads != state.iterations() * tree.counter_files()) state.SkipWithError("short sweep");
  state.SetItemsProcessed(static_cast<int64_t>(reads));
  state.counters["reads_per_sweep"] = static_cast<double>(tree.counter_files());
}
BENCHMARK(BM_FullSweep)->ArgName("store")->Arg(1)->Arg(2)->Arg(0)->Unit(benchmark::kMicrosecond);

// The hot tier alone (12 congestion counters x 16 ports), what runs every 10 ms.
void BM_HotTier(benchmark::State& state) {
  const GeneratedTree& tree = GeneratedTree::Get();
  CollectorOptions config;
  config.sysfs_root = tree.root();
  Store store;
  PortInventory ports;
  FakeClock clock;
  MetricsRegistry metrics;
  RdmaSysfsCollector collector(CollectorContext{&config, &store, &ports, &clock, &metrics});
  int64_t ts = 1'700'000'000'000'000'000;
  BenchPollContext discover(&store, Tier::kConfig, ts);
  (void)collector.Discover(discover);
  TickColumn* column = store.AddTickColumn(absl::Milliseconds(10));
  uint64_t reads = 0;
  for (auto _ : state) {
    ts += 10'000'000;
    const TickRef tick = store.Tick(column, ts);
    BenchPollContext ctx(&store, Tier::kHot, ts, &tick);
    (void)collector.Poll(ctx);
    reads += ctx.appends;
  }
  state.SetItemsProcessed(static_cast<int64_t>(reads));
}
BENCHMARK(BM_HotTier)->Unit(benchmark::kMicrosecond);

// The floor under BM_FullSweep: the same counter files kept open and read with
// a plain pread loop (no parse, no store, no collector), as bench/pread_floor
// does for bench/run_all. BM_FullSweep/1 per read over this per read is the
// "times the floor" of issue 21.
void BM_PreadFloor(benchmark::State& state) {
  const GeneratedTree& tree = GeneratedTree::Get();
  std::vector<int> fds;
  for (const auto& e : fs::recursive_directory_iterator(tree.root())) {
    const fs::path& p = e.path();
    const std::string group = p.parent_path().filename().string();
    if (!e.is_regular_file() || (group != "counters" && group != "hw_counters") ||
        p.filename() == "lifespan") {
      continue;
    }
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      state.SkipWithError("open failed");
      break;
    }
    fds.push_back(fd);
  }
  if (fds.size() != tree.counter_files()) state.SkipWithError("not every counter file opened");
  uint64_t sum = 0;
  for (auto _ : state) {
    for (int fd : fds) {
      char buf[64];
      const ssize_t n = ::pread(fd, buf, sizeof(buf), 0);
      sum += n > 0 ? static_cast<unsigned char>(buf[0]) : 0;
    }
  }
  benchmark::DoNotOptimize(sum);
  for (int fd : fds) ::close(fd);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(fds.size()));
  state.counters["reads_per_sweep"] = static_cast<double>(fds.size());
}
BENCHMARK(BM_PreadFloor)->Unit(benchmark::kMicrosecond);

// One CounterFile::Read (pread + strict parse), the unit everything is built of.
void BM_CounterFileRead(benchmark::State& state) {
  const GeneratedTree& tree = GeneratedTree::Get();
  auto f =
      CounterFile::Open(tree.root() + "/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data");
  if (!f.ok()) {
    state.SkipWithError("open failed");
    return;
  }
  for (auto _ : state) {
    auto v = f->Read();
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CounterFileRead);

void BM_ParseCounter(benchmark::State& state) {
  for (auto _ : state) {
    auto v = ParseCounter("238334949937759\n");
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_ParseCounter);

}  // namespace
}  // namespace fabricscope

BENCHMARK_MAIN();
