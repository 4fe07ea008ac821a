// Store benchmarks: ns per appended sample and bytes per sample.
//
// Bytes per sample are reported as counters:
//   store_B/sample  every byte the store accounts against --store-memory
//                   (chunks, head buffers, per-series overhead) / samples held
//   codec_B/sample  the compressed bit stream alone / samples (each series
//                   re-encoded with its own timestamps, as without a column)
// on (a) counters replayed with realistic movement and (b) constant counters.
//
// Realistic movement: the counters of the mlx5_0 port 1 fixture
// (tests/fixtures/sysfs, origin: prometheus/procfs testdata, Apache-2.0) are
// taken as the totals of a port that has been up 30 days; each 10 ms tick adds
// a random increment with that mean rate (uniform in [0, 2 x mean] when the
// mean is >= 1 per tick, else one event with probability = mean). Timestamps
// advance by exactly 10 ms ("regular") or by 10 ms +- 20 us ("jitter", what a
// realtime clock read at each tick looks like). "column:1" appends as the
// scheduler does (each tick recorded once in a time column, samples appended
// with the TickRef); "column:0" appends every sample with its own timestamp
// (what the store did before time columns, and what a sample outside a tick
// still costs).
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "store/chunk.h"
#include "store/store.h"

namespace fabricscope {
namespace {

struct FixtureCounter {
  const char* source;
  const char* name;
  uint64_t value;
};
// mlx5_0 port 1, tests/fixtures (procfs testdata).
constexpr FixtureCounter kFixture[] = {
    {"counters", "port_rcv_data", 18126345378ull},
    {"counters", "port_rcv_packets", 541889824ull},
    {"counters", "port_xmit_data", 2880761508848ull},
    {"counters", "port_xmit_packets", 10907922116ull},
    {"counters", "unicast_rcv_packets", 541889824ull},
    {"counters", "unicast_xmit_packets", 10907922116ull},
    {"counters", "multicast_rcv_packets", 0},
    {"counters", "multicast_xmit_packets", 0},
    {"counters", "port_rcv_errors", 0},
    {"counters", "port_xmit_discards", 0},
    {"counters", "symbol_error", 0},
    {"counters", "link_downed", 0},
    {"counters", "port_xmit_wait", 0},
    {"hw_counters", "duplicate_request", 41},
    {"hw_counters", "local_ack_timeout_err", 131},
    {"hw_counters", "out_of_buffer", 0},
    {"hw_counters", "out_of_sequence", 1},
    {"hw_counters", "packet_seq_err", 1},
    {"hw_counters", "req_cqe_error", 3481},
    {"hw_counters", "req_cqe_flush_error", 80},
    {"hw_counters", "resp_cqe_error", 8109},
    {"hw_counters", "resp_cqe_flush_error", 4708},
    {"hw_counters", "roce_adp_retrans", 99},
    {"hw_counters", "roce_adp_retrans_to", 4},
    {"hw_counters", "roce_slow_restart_cnps", 131},
    {"hw_counters", "rx_read_requests", 175528982ull},
    {"hw_counters", "rx_write_requests", 742114ull},
    {"hw_counters", "rnr_nak_retry_err", 0},
};
constexpr double kUptimeTicks = 30.0 * 86400 * 100;  // 30 days of 10 ms ticks
constexpr int64_t kTickNs = 10'000'000;

Signal SignalFor(const SeriesKey& key) {
  if (auto s = MapCounter(key)) return *s;
  Signal s;  // unmapped names still get stored as plain 64-bit counters
  s.name = key.name;
  return s;
}

struct Replay {
  std::vector<SeriesId> ids;
  std::vector<uint64_t> values;
  std::vector<double> mean_per_tick;
};

// Registers `copies` x the fixture port.
Replay Setup(Store* store, int copies) {
  Replay r;
  for (int c = 0; c < copies; ++c) {
    for (const FixtureCounter& f : kFixture) {
      SeriesKey key{f.source, f.name, "mlx5_" + std::to_string(c), 1, ""};
      r.ids.push_back(store->Register(key, SignalFor(key)));
      r.values.push_back(f.value);
      r.mean_per_tick.push_back(static_cast<double>(f.value) / kUptimeTicks);
    }
  }
  return r;
}

uint64_t Increment(std::mt19937_64& rng, double mean) {
  if (mean <= 0) return 0;
  if (mean < 1) return std::uniform_real_distribution<double>(0, 1)(rng) < mean ? 1 : 0;
  return rng() % (static_cast<uint64_t>(2 * mean) + 1);
}

enum Movement { kRealistic = 0, kConstant = 1 };

// Appends `ticks` ticks to every series; returns the samples appended.
uint64_t RunTicks(Store* store, Replay* r, int ticks, Movement m, bool jitter, bool column,
                  int64_t* ts, std::mt19937_64& rng) {
  TickColumn* col = store->AddTickColumn(absl::Nanoseconds(kTickNs));
  for (int t = 0; t < ticks; ++t) {
    *ts += kTickNs + (jitter ? static_cast<int64_t>(rng() % 40'001) - 20'000 : 0);
    const TickRef tick = column ? store->Tick(col, *ts) : TickRef{nullptr, 0, *ts};
    for (size_t i = 0; i < r->ids.size(); ++i) {
      if (m == kRealistic) r->values[i] += Increment(rng, r->mean_per_tick[i]);
      store->Append(r->ids[i], tick, r->values[i]);
    }
  }
  return uint64_t(ticks) * r->ids.size();
}

// ns per appended sample: steady state (chunks seal and the budget evicts).
void BM_Append(benchmark::State& state) {
  const Movement m = static_cast<Movement>(state.range(0));
  StoreOptions o;
  o.memory_bytes = 64ull << 20;
  Store store(o);
  Replay r = Setup(&store, 36);  // ~1000 series
  std::mt19937_64 rng(42);
  int64_t ts = 1'700'000'000'000'000'000;
  // Pre-generate increments so that the RNG is not timed.
  const int kTicks = 256;
  std::vector<std::vector<uint64_t>> inc(kTicks, std::vector<uint64_t>(r.ids.size()));
  for (int t = 0; t < kTicks; ++t) {
    for (size_t i = 0; i < r.ids.size(); ++i) {
      inc[t][i] = m == kRealistic ? Increment(rng, r.mean_per_tick[i]) : 0;
    }
  }
  TickColumn* col = store.AddTickColumn(absl::Nanoseconds(kTickNs));
  uint64_t n = 0;
  int t = 0;
  for (auto _ : state) {
    ts += kTickNs;
    const TickRef tick = store.Tick(col, ts);
    const std::vector<uint64_t>& d = inc[t];
    for (size_t i = 0; i < r.ids.size(); ++i) store.Append(r.ids[i], tick, r.values[i] += d[i]);
    n += r.ids.size();
    if (++t == kTicks) t = 0;
  }
  state.SetItemsProcessed(static_cast<int64_t>(n));
  state.counters["ns/sample"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Append)->Arg(kRealistic)->Arg(kConstant)->ArgNames({"constant"});

// One tick of a sweep as the daemon runs it: 28 x 28 = 784 series (a full
// rdma_sysfs sweep), realistic movement, appended after the caches were
// flushed of the store's data (a 16 MiB buffer written between ticks, not
// counted: in the daemon the tick's preads and the sleep between ticks do
// that). Two stores fed the same readings, alternately in each iteration:
// one Store::Append(id, tick, raw) per reading (`single_ns`), and the tick's
// readings in one Store::Append(tick, readings) call, which prefetches the
// series ahead (`batch_ns`, what the scheduler does). Reported: the medians
// over the iterations of each side's thread CPU time per sample (paired and
// medians, so that other load on the machine affects both sides alike).
void BM_AppendTickCold(benchmark::State& state) {
  StoreOptions o;
  o.memory_bytes = 64ull << 20;
  Store single(o);
  Store batched(o);
  Replay rs = Setup(&single, 28);
  Replay rb = Setup(&batched, 28);
  std::mt19937_64 rng(42);
  int64_t ts = 1'700'000'000'000'000'000;
  const int kTicks = 64;
  std::vector<std::vector<uint64_t>> inc(kTicks, std::vector<uint64_t>(rs.ids.size()));
  for (int t = 0; t < kTicks; ++t) {
    for (size_t i = 0; i < rs.ids.size(); ++i) inc[t][i] = Increment(rng, rs.mean_per_tick[i]);
  }
  std::vector<SeriesReading> readings(rb.ids.size());
  std::vector<uint8_t> flush(16u << 20);
  TickColumn* col_s = single.AddTickColumn(absl::Nanoseconds(kTickNs));
  TickColumn* col_b = batched.AddTickColumn(absl::Nanoseconds(kTickNs));
  auto thread_ns = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
  };
  uint8_t fill = 0;
  auto flush_caches = [&] {
    std::memset(flush.data(), ++fill, flush.size());
    benchmark::ClobberMemory();
  };
  std::vector<double> single_ns, batch_ns;
  int t = 0;
  for (auto _ : state) {
    ts += kTickNs;
    const std::vector<uint64_t>& d = inc[t];
    for (size_t i = 0; i < rb.ids.size(); ++i) readings[i] = {rb.ids[i], rb.values[i] += d[i]};
    const bool batch_first = (t & 1) != 0;
    for (int side = 0; side < 2; ++side) {
      flush_caches();
      const int64_t t0 = thread_ns();
      if ((side == 0) == batch_first) {
        const TickRef tick = batched.Tick(col_b, ts);
        batched.Append(tick, readings);
        batch_ns.push_back(static_cast<double>(thread_ns() - t0) / readings.size());
      } else {
        const TickRef tick = single.Tick(col_s, ts);
        for (size_t i = 0; i < rs.ids.size(); ++i) {
          single.Append(rs.ids[i], tick, rs.values[i] += d[i]);
        }
        single_ns.push_back(static_cast<double>(thread_ns() - t0) / rs.ids.size());
      }
    }
    if (++t == kTicks) t = 0;
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  state.counters["single_ns"] = median(single_ns);
  state.counters["batch_ns"] = median(batch_ns);
}
BENCHMARK(BM_AppendTickCold)->Unit(benchmark::kMicrosecond);

// Bytes per sample held, after 30 minutes of 10 ms polling (180k samples per
// series, no eviction).
void BM_BytesPerSample(benchmark::State& state) {
  const Movement m = static_cast<Movement>(state.range(0));
  const bool jitter = state.range(1) != 0;
  const bool column = state.range(2) != 0;
  double store_bps = 0, codec_bps = 0;
  for (auto _ : state) {
    StoreOptions o;
    o.memory_bytes = 1ull << 30;
    Store store(o);
    Replay r = Setup(&store, 1);
    std::mt19937_64 rng(7);
    int64_t ts = 1'700'000'000'000'000'000;
    const uint64_t before = store.Stats().bytes;
    RunTicks(&store, &r, 180'000, m, jitter, column, &ts, rng);
    StoreStats st = store.Stats();
    store_bps = static_cast<double>(st.bytes) / static_cast<double>(st.samples);
    // Codec alone: re-encode what is held.
    uint64_t bytes = 0, samples = 0;
    for (SeriesId id : r.ids) {
      auto s = store.ReadRange(id, INT64_MIN, INT64_MAX);
      for (size_t i = 0; i < s.size(); i += kMaxChunkSamples) {
        std::vector<Sample> part(s.begin() + i,
                                 s.begin() + std::min(s.size(), i + kMaxChunkSamples));
        EncodedChunk c = EncodeChunk(part);
        bytes += c.data.size() + 2 * sizeof(uint64_t);  // stream + first sample
      }
      samples += s.size();
    }
    codec_bps = static_cast<double>(bytes) / static_cast<double>(samples);
    state.counters["overhead_B"] = static_cast<double>(before);
  }
  state.counters["store_B/sample"] = store_bps;
  state.counters["codec_B/sample"] = codec_bps;
}
BENCHMARK(BM_BytesPerSample)
    ->Args({kRealistic, 0, 1})
    ->Args({kRealistic, 1, 1})
    ->Args({kConstant, 0, 1})
    ->Args({kConstant, 1, 1})
    ->ArgNames({"constant", "jitter", ""})  // bench/run_all reads constant:C/jitter:J
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
// The same without a time column: every sample keeps its own timestamp (what
// the store did before time columns; samples appended outside a tick).
void BM_BytesPerSampleOwnTimestamps(benchmark::State& state) { BM_BytesPerSample(state); }
BENCHMARK(BM_BytesPerSampleOwnTimestamps)
    ->Args({kRealistic, 1, 0})
    ->Args({kConstant, 1, 0})
    ->ArgNames({"constant", "jitter", ""})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fabricscope

BENCHMARK_MAIN();
