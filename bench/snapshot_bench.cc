// State snapshot benchmarks (daemon/state/snapshot.h): how long SIGTERM's
// snapshot and the next start's restore take for a full store.
//
// The store is filled to its budget (--store-memory, the Arg in MiB) by 512
// series of counters moving irregularly every 10 ms (about 3 bytes per
// sample, so the budget holds millions of samples), plus 20000 spans. Then:
//   BM_Write     WriteSnapshot to a file in $TMPDIR (page cache + fsync)
//   BM_Restore   RestoreSnapshot into empty stores from the mapped file, as
//                the daemon starts: every CRC and chunk header checked, then
//                restored (on up to 4 threads: wall time, CPU of all threads)
// Counters: snapshot_MiB (file size), samples, and MiB/s of the file.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "daemon/state/snapshot.h"

namespace fabricscope {
namespace {

constexpr int64_t kT = 1'700'000'000'000'000'000;

struct Filled {
  std::unique_ptr<FakeClock> clock;
  std::unique_ptr<Store> store;
  std::unique_ptr<SpanStore> spans;
  std::unique_ptr<EventLog> events;
  int64_t end_ns = 0;
};

Filled Fill(uint64_t mib) {
  Filled f;
  StoreOptions o;
  o.memory_bytes = mib << 20;
  f.store = std::make_unique<Store>(o);
  std::vector<SeriesId> ids;
  for (int i = 0; i < 512; ++i) {
    SeriesKey k{"hw_counters", "out_of_sequence", "mlx5_" + std::to_string(i), 1, ""};
    ids.push_back(f.store->Register(k, *MapCounter(k)));
  }
  std::mt19937_64 rng(1);
  std::vector<uint64_t> value(ids.size(), 0);
  int64_t ts = kT;
  // Appended as the scheduler does: one time column tick per 10 ms.
  TickColumn* column = f.store->AddTickColumn(absl::Milliseconds(10));
  // Until the store evicts: it is full (Stats walks the store: every 1000 ticks).
  for (int tick = 0; tick % 1000 != 0 || f.store->Stats().evicted_samples == 0; ++tick) {
    ts += 10'000'000 + static_cast<int64_t>(rng() % 40'000) - 20'000;
    const TickRef t = f.store->Tick(column, ts);
    for (size_t i = 0; i < ids.size(); ++i) {
      value[i] += rng() % 5000;
      f.store->Append(ids[i], t, value[i]);
    }
  }
  f.end_ns = ts;
  f.clock = std::make_unique<FakeClock>(ts);
  f.spans = std::make_unique<SpanStore>(SpanStoreOptions{}, f.clock.get(), nullptr);
  for (int i = 0; i < 20000; ++i) {
    Span s;
    s.trace_id[0] = static_cast<uint8_t>(i);
    s.trace_id[1] = static_cast<uint8_t>(i >> 8);
    s.span_id[0] = static_cast<uint8_t>(i);
    s.name = "decode_step";
    s.kind = SpanKind::kDecodeStep;
    s.start_unix_nano = ts - 60'000'000'000 + int64_t{i} * 1'000'000;
    s.end_unix_nano = s.start_unix_nano + 30'000'000;
    s.attributes = {{"service.name", "vllm"}, {"gen_ai.request.model", "llama-3-70b"}};
    s.protocol = "otlp";
    f.spans->Add(std::move(s));
  }
  f.events = std::make_unique<EventLog>(10000, nullptr);
  return f;
}

std::string TempPath() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/fabricscope-snapshot-bench." +
         std::to_string(getpid());
}

void BM_Write(benchmark::State& state) {
  Filled f = Fill(static_cast<uint64_t>(state.range(0)));
  const std::string path = TempPath();
  SnapshotCounts counts;
  for (auto _ : state) {
    absl::Status s = WriteSnapshot(path, *f.store, *f.spans, *f.events, f.end_ns,
                                   absl::InfiniteFuture(), &counts);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  std::remove(path.c_str());
  state.counters["snapshot_MiB"] = static_cast<double>(counts.bytes) / (1 << 20);
  state.counters["samples"] = static_cast<double>(counts.samples);
  state.counters["MiB/s"] = benchmark::Counter(
      static_cast<double>(counts.bytes) / (1 << 20) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void BM_Restore(benchmark::State& state) {
  Filled f = Fill(static_cast<uint64_t>(state.range(0)));
  const std::string path = TempPath();
  SnapshotCounts counts;
  if (!WriteSnapshot(path, *f.store, *f.spans, *f.events, f.end_ns, absl::InfiniteFuture(), &counts)
           .ok()) {
    state.SkipWithError("write failed");
    return;
  }
  uint64_t bytes = 0;
  for (auto _ : state) {
    StoreOptions o;
    o.memory_bytes = static_cast<uint64_t>(state.range(0)) << 20;
    auto store = std::make_unique<Store>(o);
    auto spans = std::make_unique<SpanStore>(SpanStoreOptions{}, f.clock.get(), nullptr);
    auto events = std::make_unique<EventLog>(10000, nullptr);
    // What the daemon does at start: maps the file (written just before: in
    // the page cache), RestoreSnapshot checks all of it, then restores it,
    // and the mapping goes.
    {
      MappedSnapshot file;
      bool missing;
      SnapshotStatus r = file.Open(path, 1ull << 34, &missing);
      if (r.ok()) r = RestoreSnapshot(file.data(), store.get(), spans.get(), events.get(), &counts);
      if (!r.ok()) state.SkipWithError(("restore failed: " + r.detail).c_str());
      bytes = file.data().size();
    }
    state.PauseTiming();  // tearing the stores down is not part of the start
    store.reset();
    spans.reset();
    events.reset();
    state.ResumeTiming();
  }
  state.counters["snapshot_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["samples"] = static_cast<double>(counts.samples);
  state.counters["MiB/s"] = benchmark::Counter(
      static_cast<double>(bytes) / (1 << 20) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  std::remove(path.c_str());
}

BENCHMARK(BM_Write)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond)->Iterations(3);
// Wall time (the start waits for it) and the CPU of every thread of the
// process. One iteration: a daemon restores once, into a fresh heap (a second
// restore in the same process reuses the first one's freed memory, without its
// page faults, and is 2-4x faster).
BENCHMARK(BM_Restore)
    ->Arg(16)  // bench/run_all --smoke
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace fabricscope

BENCHMARK_MAIN();
