// One ethtool collector tick on the 751-counter mlx5 name set of the ethq
// ConnectX-4 Lx dump (tests/fixtures/ethtool/mlx5).
//
//  - BM_EthtoolTickMappedCopy: the per-tick path once names are resolved: a
//    Read() that hands over the 751 values (the GSTATS buffer in production)
//    plus the copy of the mapped indexes into the store. The source here is
//    an in-memory reader, so no ioctl/firmware cost is included.
//  - BM_EthtoolTextParse / BM_EthtoolDirTick: the --ethtool-dir cost of
//    re-reading and parsing the text file each tick (values-only parse and a
//    full dir tick).
//  - BM_EthtoolResolve: resolving the 751 names through the signal table
//    (done once, and again when the name set changes; never per tick).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "collectors/ethtool_collector.h"
#include "collectors/ethtool_stats_source.h"
#include "collectors/ethtool_text.h"
#include "core/clock.h"
#include "core/log.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

std::string EthqText() {
  const char* src = std::getenv("FABRICSCOPE_SOURCE_DIR");
  std::string path = std::string(src ? src : ".") +
                     "/tests/fixtures/ethtool/mlx5/ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Ctx final : public PollContext {
 public:
  explicit Ctx(Store* s) : store_(s) {}
  Tier tier() const override { return Tier::kMedium; }
  int64_t ts_ns() const override { return ts_; }
  void Append(SeriesId id, uint64_t raw) override { store_->Append(id, ts_, raw); }
  void RecordError(CollectorErrorCode, absl::string_view, absl::string_view) override { ++errors; }
  int64_t ts_ = 1'700'000'000'000'000'000;
  int errors = 0;

 private:
  Store* store_;
};

// In-memory source: the parsed ethq set, values bumped each read.
class MemSource final : public EthtoolStatsSource {
 public:
  explicit MemSource(EthtoolTextStats stats) : stats_(std::move(stats)) {}
  class Reader final : public EthtoolStatsReader {
   public:
    explicit Reader(MemSource* s) : s_(s) {}
    absl::Status Read(bool* changed) override {
      *changed = first_;
      first_ = false;
      for (uint64_t& v : s_->stats_.values) v += 3;
      return absl::OkStatus();
    }
    const std::vector<std::string>& names() const override { return s_->stats_.names; }
    absl::Span<const uint64_t> values() const override { return s_->stats_.values; }

   private:
    MemSource* s_;
    bool first_ = true;
  };
  absl::StatusOr<std::vector<std::string>> ListNetdevs() override {
    return std::vector<std::string>{"eth0"};
  }
  std::unique_ptr<EthtoolStatsReader> Open(const std::string&) override {
    return std::make_unique<Reader>(this);
  }
  bool HasStandardStats() const override { return false; }
  absl::StatusOr<PauseStats> ReadPause(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<FecStats> ReadFec(const std::string&) override {
    return absl::UnimplementedError("");
  }

 private:
  EthtoolTextStats stats_;
};

void BM_EthtoolTickMappedCopy(benchmark::State& state) {
  std::string log;
  SetLogCaptureForTest(&log);
  EthtoolTextStats stats;
  if (!ParseEthtoolStatsText(EthqText(), &stats).ok() || stats.names.size() != 751) {
    state.SkipWithError("ethq fixture missing");
    return;
  }
  Store store;
  PortInventory ports;  // empty: the bench names its netdevs itself
  FakeClock clock;
  EthtoolCollector c(&store, &ports, &clock, std::make_unique<MemSource>(std::move(stats)), {});
  Ctx ctx(&store);
  (void)c.Discover(ctx);
  (void)c.Poll(ctx);  // resolves the names
  for (auto _ : state) {
    ctx.ts_ += 100'000'000;
    (void)c.Poll(ctx);
  }
  state.counters["mapped"] = static_cast<double>(c.MappedCount("eth0"));
  state.counters["names"] = 751;
  SetLogCaptureForTest(nullptr);
}
BENCHMARK(BM_EthtoolTickMappedCopy);

void BM_EthtoolTextParse(benchmark::State& state) {
  const std::string text = EthqText();
  EthtoolTextStats stats;
  (void)ParseEthtoolStatsText(text, &stats);
  std::vector<uint64_t> values;
  bool match = false;
  const bool full = state.range(0) == 1;
  for (auto _ : state) {
    if (full) {
      benchmark::DoNotOptimize(ParseEthtoolStatsText(text, &stats));
    } else {
      benchmark::DoNotOptimize(ParseEthtoolStatsValues(text, stats.names, &values, &match));
    }
  }
  state.SetBytesProcessed(state.iterations() * text.size());
  state.SetLabel(full ? "full parse (names+values)" : "values-only (names known)");
}
BENCHMARK(BM_EthtoolTextParse)->Arg(0)->Arg(1);

void BM_EthtoolDirTick(benchmark::State& state) {
  std::string log;
  SetLogCaptureForTest(&log);
  std::string dir =
      (std::filesystem::temp_directory_path() / ("fs-ethtool-bench-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/eth0") << EthqText(); }
  Store store;
  PortInventory ports;  // empty: the bench names its netdevs itself
  FakeClock clock;
  EthtoolCollector c(&store, &ports, &clock, MakeDirEthtoolSource(dir), {});
  Ctx ctx(&store);
  (void)c.Discover(ctx);
  (void)c.Poll(ctx);
  for (auto _ : state) {
    ctx.ts_ += 100'000'000;
    (void)c.Poll(ctx);
  }
  state.counters["errors"] = ctx.errors;
  std::filesystem::remove_all(dir);
  SetLogCaptureForTest(nullptr);
}
BENCHMARK(BM_EthtoolDirTick);

void BM_EthtoolResolve(benchmark::State& state) {
  std::string log;
  SetLogCaptureForTest(&log);
  EthtoolTextStats stats;
  (void)ParseEthtoolStatsText(EthqText(), &stats);
  for (auto _ : state) {
    Store store;
    PortInventory ports;
    FakeClock clock;
    EthtoolCollector c(&store, &ports, &clock, std::make_unique<MemSource>(stats), {});
    Ctx ctx(&store);
    (void)c.Discover(ctx);
    (void)c.Poll(ctx);
    benchmark::DoNotOptimize(c.MappedCount("eth0"));
  }
  SetLogCaptureForTest(nullptr);
}
BENCHMARK(BM_EthtoolResolve)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fabricscope

BENCHMARK_MAIN();
