// ReadWindowStats (chunk summaries for the baseline, Store::ScanRange)
// against ComputeWindowStats over Store::ReadRange (every raw sample): a
// property test on random series with resets, wraps, saturation, gaps and
// realtime steps, appended on their own timestamps and on tick columns.
#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/correlate/correlator.h"
#include "gtest/gtest.h"
#include "store/store.h"

namespace fabricscope {
namespace window_stats_store_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT = 1'700'000'000 * kSec;

Signal SignalWith(CounterSemantics sem, double scale) {
  auto s = MapCounter(SeriesKey{"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""});
  EXPECT_TRUE(s.has_value());
  s->semantics = sem;
  s->scale = scale;
  return *s;
}

void ExpectSame(const WindowStats& want, const WindowStats& got, const std::string& where) {
  SCOPED_TRACE(where);
  // The window's intervals run through the same arithmetic in the same order.
  EXPECT_EQ(want.delta, got.delta);
  EXPECT_EQ(want.rate, got.rate);
  EXPECT_EQ(want.peak_rate, got.peak_rate);
  EXPECT_EQ(want.coverage, got.coverage);
  EXPECT_EQ(want.resets, got.resets);
  EXPECT_EQ(want.saturated_ns, got.saturated_ns);
  EXPECT_EQ(want.reset_ns, got.reset_ns);
  EXPECT_EQ(want.gap_ns, got.gap_ns);
  EXPECT_EQ(want.before_first_ns, got.before_first_ns);
  EXPECT_EQ(want.after_last_ns, got.after_last_ns);
  // Covered time is integer nanoseconds: exact. The baseline's deltas are
  // summed per chunk: equal up to rounding.
  EXPECT_EQ(want.baseline_coverage, got.baseline_coverage);
  EXPECT_NEAR(want.baseline_rate, got.baseline_rate,
              1e-9 * std::max(1.0, std::fabs(want.baseline_rate)));
}

struct Kind {
  CounterSemantics sem;
  double scale;
};

// One random series: mostly regular polls with jitter, some moving fast (few
// samples per chunk) or not at all (long runs); resets, wraps, saturation,
// missed polls (gaps), and now and then a realtime step backwards.
void FillRandom(Store* store, SeriesId id, TickColumn* column, const Kind& kind,
                std::mt19937_64* rng, std::vector<TickRef>* ticks, bool on_ticks) {
  const uint64_t max = kind.sem.MaxValue();
  uint64_t v = kind.sem.kind == CounterKind::kWrap32 ? UINT32_MAX - 5000 : 0;
  const int style = static_cast<int>((*rng)() % 3);  // 0 moving, 1 mostly flat, 2 bursty
  for (size_t i = 0; i < ticks->size(); ++i) {
    const uint64_t r = (*rng)() % 1000;
    if (r < 20) continue;  // a missed poll (a gap when several follow)
    if (r < 22) {
      i += 1 + (*rng)() % 400;  // a long gap: several seconds
      if (i >= ticks->size()) break;
    }
    if (style == 0 || (style == 2 && (*rng)() % 8 == 0) || (style == 1 && (*rng)() % 200 == 0)) {
      v += (*rng)() % 100000;
    }
    if (r >= 990) v = (*rng)() % 1000;                                              // reset
    if (r >= 985 && r < 988 && kind.sem.kind == CounterKind::kSaturating) v = max;  // sits
    if (r >= 980 && r < 982 && kind.sem.kind == CounterKind::kWrap32) v = UINT32_MAX - 10;
    if (kind.sem.kind == CounterKind::kSaturating && v > max) v = max;
    if (kind.sem.kind == CounterKind::kWrap32 && v > UINT32_MAX &&
        (*rng)() % 50 != 0) {  // wraps, and rarely reports 64 bits after all
      v &= UINT32_MAX;
    }
    const TickRef& tick = (*ticks)[i];
    if (on_ticks && tick.block != nullptr) {
      store->Append(id, tick, v);
    } else {
      int64_t ts = tick.ts_ns;
      if ((*rng)() % 3000 == 0) ts -= 2 * kSec;  // a realtime step backwards
      store->Append(id, ts, v);
    }
  }
  (void)column;
}

TEST(WindowStatsStoreTest, ChunkSummariesGiveTheRawSampleResult) {
  const Kind kinds[] = {
      {{CounterKind::kCounter64, 64}, 1.0},
      {{CounterKind::kWrap32, 32}, 4.0},
      {{CounterKind::kSaturating, 16}, 1.0},
      {{CounterKind::kSaturating, 32}, 1e-6},
  };
  std::mt19937_64 rng(20261202);
  for (int round = 0; round < 2; ++round) {
    Store store;
    TickColumn* column = store.AddTickColumn(absl::Milliseconds(10));
    std::vector<TickRef> ticks;
    for (int64_t i = 0; i < 4000; ++i) {  // 40 s of 10 ms ticks, +-20 us jitter
      const int64_t jitter = static_cast<int64_t>(rng() % 40'000) - 20'000;
      ticks.push_back(store.Tick(column, kT + i * 10 * kMs + jitter));
    }
    std::vector<std::pair<SeriesId, Kind>> series;
    for (int n = 0; n < 16; ++n) {
      const Kind& kind = kinds[n % 4];
      SeriesKey key{"hw_counters", absl::StrCat("c", n), "mlx5_0", 1, ""};
      const SeriesId id = store.Register(key, SignalWith(kind.sem, kind.scale));
      FillRandom(&store, id, column, kind, &rng, &ticks, n % 2 == 0);
      series.emplace_back(id, kind);
    }
    ASSERT_GT(store.Stats().chunks, 48u);  // the baselines span whole chunks
    for (int q = 0; q < 60; ++q) {
      const int64_t t0 = kT + static_cast<int64_t>(rng() % (42 * kSec)) - kSec;
      const int64_t len = (q % 5 == 0) ? 0 : static_cast<int64_t>(rng() % (3 * kSec));
      const int64_t baseline = (q % 7 == 0) ? 0 : static_cast<int64_t>(1 + rng() % (20 * kSec));
      const int64_t gap = (q % 3 == 0) ? 50 * kMs : 3 * kSec;
      for (const auto& [id, kind] : series) {
        const std::vector<Sample> raw = store.ReadRange(id, t0 - baseline - gap, t0 + len + gap);
        const WindowStats want =
            ComputeWindowStats(kind.sem, kind.scale, raw, t0, t0 + len, baseline, gap);
        // Twice: the first scan computes the summaries, the second reads them.
        for (int pass = 0; pass < 2; ++pass) {
          const WindowStats got =
              ReadWindowStats(store, id, kind.sem, kind.scale, t0, t0 + len, baseline, gap);
          ExpectSame(
              want, got,
              absl::StrCat("round ", round, " query ", q, " series ", id, " pass ", pass, " t0 ",
                           t0 - kT, " len ", len, " baseline ", baseline, " gap ", gap));
        }
        if (HasFailure()) return;
      }
    }
  }
}

// The seek index follows the head chunk as it grows (and is sealed): spans
// near the newest samples, read between appends, on a 10 ms and a 100 ms
// column (the 100 ms series mostly constant: long heads, never sealed).
TEST(WindowStatsStoreTest, SegmentsOfAGrowingHeadGiveTheRawSampleResult) {
  const Kind kinds[] = {
      {{CounterKind::kCounter64, 64}, 1.0},
      {{CounterKind::kWrap32, 32}, 4.0},
      {{CounterKind::kSaturating, 16}, 1.0},
  };
  std::mt19937_64 rng(7);
  Store store;
  TickColumn* fast = store.AddTickColumn(absl::Milliseconds(10));
  TickColumn* slow = store.AddTickColumn(absl::Milliseconds(100));
  struct S {
    SeriesId id;
    Kind kind;
    bool slow;
    int style;
    uint64_t v;
  };
  std::vector<S> series;
  for (int n = 0; n < 9; ++n) {
    const Kind& kind = kinds[n % 3];
    const SeriesId id =
        store.Register(SeriesKey{"hw_counters", absl::StrCat("c", n), "mlx5_0", 1, ""},
                       SignalWith(kind.sem, kind.scale));
    series.push_back(
        {id, kind, n >= 3, n % 3, kind.sem.kind == CounterKind::kWrap32 ? UINT32_MAX - 500 : 0});
  }
  for (int64_t i = 0; i < 3000; ++i) {
    const int64_t ts = kT + i * 10 * kMs + static_cast<int64_t>(rng() % 40'000) - 20'000;
    const TickRef ft = store.Tick(fast, ts);
    TickRef st;
    if (i % 10 == 0) st = store.Tick(slow, ts);
    for (S& s : series) {
      if (s.slow && i % 10 != 0) continue;
      const uint64_t r = rng() % 1000;
      if (r < 10) continue;  // a missed poll
      if (s.style == 0 || (s.style == 1 && r < 20)) s.v += rng() % 5000;
      if (r >= 997) s.v = rng() % 100;  // reset
      if (s.kind.sem.kind == CounterKind::kSaturating &&
          (s.v > s.kind.sem.MaxValue() || r == 996)) {
        s.v = s.kind.sem.MaxValue();
      }
      if (s.kind.sem.kind == CounterKind::kWrap32) s.v &= UINT32_MAX;
      store.Append(s.id, s.slow ? st : ft, s.v);
    }
    if (i % 250 != 249) continue;
    for (int q = 0; q < 6; ++q) {  // spans over the last 12 s, some reaching past the newest
      const int64_t now = kT + i * 10 * kMs;
      const int64_t t0 = now - static_cast<int64_t>(rng() % (12 * kSec));
      const int64_t len = static_cast<int64_t>(rng() % (2 * kSec));
      const int64_t baseline = static_cast<int64_t>(rng() % (10 * kSec));
      const int64_t gap = (q % 2 == 0) ? 50 * kMs : 3 * kSec;
      for (const S& s : series) {
        const std::vector<Sample> raw = store.ReadRange(s.id, t0 - baseline - gap, t0 + len + gap);
        const WindowStats want =
            ComputeWindowStats(s.kind.sem, s.kind.scale, raw, t0, t0 + len, baseline, gap);
        const WindowStats got =
            ReadWindowStats(store, s.id, s.kind.sem, s.kind.scale, t0, t0 + len, baseline, gap);
        ExpectSame(want, got,
                   absl::StrCat("tick ", i, " series ", s.id, " t0 ", t0 - kT, " len ", len,
                                " baseline ", baseline, " gap ", gap));
        if (HasFailure()) return;
      }
    }
  }
}

// Collects every sample ScanRange hands over, always planning kSamples.
class CollectingScanner : public RangeScanner {
 public:
  Plan PlanChunk(const ChunkHeader&) override { return Plan::kSamples; }
  bool OnSummary(const ChunkSummary&) override { return false; }
  void OnSamples(absl::Span<const Sample> samples) override {
    got.insert(got.end(), samples.begin(), samples.end());
  }
  std::vector<Sample> got;
};

// `n` 64-bit counter series c0, c1, ... of mlx5_0/1.
std::vector<SeriesId> RegisterCounters64(Store* store, int n) {
  std::vector<SeriesId> ids;
  for (int k = 0; k < n; ++k) {
    ids.push_back(store->Register(SeriesKey{"hw_counters", absl::StrCat("c", k), "mlx5_0", 1, ""},
                                  SignalWith({CounterKind::kCounter64, 64}, 1.0)));
  }
  return ids;
}

// StoreStats::seek_index_bytes (fabricscope_store_seek_index_bytes) counts
// the seek index a reading thread builds, and what the thread held goes
// with it when it ends.
TEST(WindowStatsStoreTest, StatsCountEachReadersSeekIndexUntilItsThreadEnds) {
  Store store;
  const std::vector<SeriesId> ids = RegisterCounters64(&store, 8);
  std::mt19937_64 rng(1204);
  uint64_t v = 0;
  for (int64_t i = 0; i < 3000; ++i) {  // long chunks: read by segments
    for (SeriesId id : ids) store.Append(id, kT + i * 10 * kMs, v += rng() % 1000);
  }
  const uint64_t before = store.Stats().seek_index_bytes;
  uint64_t during = 0;
  size_t read = 0;
  std::thread reader([&] {
    for (SeriesId id : ids) {
      CollectingScanner scan;
      store.ScanRange(id, kT + 10 * kSec, kT + 11 * kSec, &scan);
      read += scan.got.size();
    }
    during = store.Stats().seek_index_bytes;
  });
  reader.join();
  EXPECT_EQ(read, ids.size() * 101);  // 10.00 s .. 11.00 s of each
  // Eight series' chunks indexed: at least a segment record per 64 samples
  // of each chunk read (the slot table comes on top).
  EXPECT_GE(during, before + ids.size() * 1000 / 64 * 32);
  // A thread that reads a few chunks keeps a small slot table (its first
  // 512 slots, not the 16384 a busy reader grows to: 4.3 MiB).
  EXPECT_LT(during, before + (1u << 20));
  EXPECT_EQ(store.Stats().seek_index_bytes, before);
}

// A reader of many chunks grows its slot table (the entries it holds move
// with it); every scan before, during and after the growth hands over
// exactly ReadRange's samples, and what the thread held goes with it.
TEST(WindowStatsStoreTest, SlotTableGrowsWithTheChunksAThreadReads) {
  Store store;
  const std::vector<SeriesId> ids = RegisterCounters64(&store, 160);
  std::mt19937_64 rng(1203);
  std::vector<uint64_t> values(ids.size(), 0);
  for (int64_t i = 0; i < 4000; ++i) {  // 40 s: several long chunks per series
    for (size_t k = 0; k < ids.size(); ++k) {
      store.Append(ids[k], kT + i * 10 * kMs, values[k] += rng() % 1000);
    }
  }
  ASSERT_GT(store.Stats().chunks, 1000u);  // more chunks than a small table's slots
  const uint64_t before = store.Stats().seek_index_bytes;
  uint64_t during = 0;
  std::thread reader([&] {
    for (int pass = 0; pass < 3; ++pass) {
      for (SeriesId id : ids) {
        const int64_t from = kT + static_cast<int64_t>(rng() % (30 * kSec));
        const int64_t to = from + static_cast<int64_t>(rng() % (10 * kSec));
        CollectingScanner scan;
        store.ScanRange(id, from, to, &scan);
        const std::vector<Sample> want = store.ReadRange(id, from, to);
        ASSERT_EQ(scan.got.size(), want.size()) << "pass " << pass << " series " << id;
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(scan.got[i].ts_ns, want[i].ts_ns);
          ASSERT_EQ(scan.got[i].value, want[i].value);
        }
      }
    }
    during = store.Stats().seek_index_bytes;
  });
  reader.join();
  // (The reader's table doubles once here, from 512 slots to 1024: checked
  // by hand with a print in SegmentCache::Resize.)
  EXPECT_GT(during, before);
  EXPECT_EQ(store.Stats().seek_index_bytes, before);
}

// The seek index finds the segments that overlap a range by binary search
// over each segment's bounds (the largest max_ts up to it, the smallest
// min_ts from it on), and keeps the header of the samples after the last
// complete segment per chunk length: a head chunk that grows with realtime
// steps both ways (a later segment reaching back before earlier ones), read
// between appends over random ranges, hands over exactly ReadRange's
// samples.
TEST(WindowStatsStoreTest, ScanRangeFindsSegmentsAcrossRealtimeSteps) {
  std::mt19937_64 rng(1202);
  Store store;
  const std::vector<SeriesId> ids = RegisterCounters64(&store, 4);
  std::vector<uint64_t> values(ids.size(), 0);
  int64_t ts = kT;
  for (int64_t i = 0; i < 6000; ++i) {
    ts += 10 * kMs;
    const uint64_t r = rng() % 1000;
    if (r < 3) ts -= static_cast<int64_t>(1 + rng() % 5) * kSec;     // a step back
    if (r >= 997) ts += static_cast<int64_t>(1 + rng() % 3) * kSec;  // a step forward
    for (size_t n = 0; n < ids.size(); ++n) {
      if (rng() % 50 == 0) continue;  // a missed poll
      values[n] += rng() % 1000;
      store.Append(ids[n], ts, values[n]);
    }
    if (i % 97 != 96) continue;
    for (int q = 0; q < 8; ++q) {
      const int64_t from = ts - static_cast<int64_t>(rng() % (40 * kSec));
      const int64_t to = from + static_cast<int64_t>(rng() % (8 * kSec));
      for (SeriesId id : ids) {
        CollectingScanner scan;
        store.ScanRange(id, from, to, &scan);
        const std::vector<Sample> want = store.ReadRange(id, from, to);
        ASSERT_EQ(want.size(), scan.got.size())
            << "tick " << i << " series " << id << " from " << from - kT << " to " << to - kT;
        for (size_t k = 0; k < want.size(); ++k) {
          ASSERT_EQ(want[k].ts_ns, scan.got[k].ts_ns) << k;
          ASSERT_EQ(want[k].value, scan.got[k].value) << k;
        }
      }
    }
  }
  EXPECT_GT(store.Stats().chunks, 4u);
}

// Store::ScanAhead is a hint: scans of many series with the read-ahead
// running (its cursors in every step, the seek index warm and cold, the
// head and sealed chunks, ranges overlapping the decoded ones or not) hand
// over exactly ReadRange's samples; and with a writer sealing and evicting
// chunks meanwhile (the read-ahead holds chunks between its steps), every
// scan still hands over only samples in its range (sanitizer builds check
// the chunks' lifetimes).
TEST(WindowStatsStoreTest, ScanAheadChangesNoScan) {
  std::mt19937_64 rng(1203);
  StoreOptions options;
  options.memory_bytes = 1 << 20;  // evicts while the writer runs
  Store store(options);
  const std::vector<SeriesId> ids = RegisterCounters64(&store, 64);
  std::vector<uint64_t> values(ids.size(), 0);
  int64_t ts = kT;
  auto append_ticks = [&](int ticks) {
    for (int i = 0; i < ticks; ++i) {
      ts += 10 * kMs;
      for (size_t n = 0; n < ids.size(); ++n) {
        values[n] += (n % 4 == 0) ? 0 : rng() % 1000;  // some constant
        store.Append(ids[n], ts, values[n]);
      }
    }
  };
  append_ticks(3000);
  for (int q = 0; q < 40; ++q) {
    const int64_t t1 = ts - static_cast<int64_t>(rng() % (28 * kSec));
    const int64_t t0 = t1 - static_cast<int64_t>(rng() % (2 * kSec));
    const int64_t from = t0 - 2 * kSec, to = t1 + kSec;
    const std::pair<int64_t, int64_t> decoded[] = {{t0 - kSec, t0 - kSec}, {t0, t1}};
    Store::ScanAhead ahead(store, ids, from, to, decoded);
    for (size_t i = 0; i < ids.size(); ++i) {
      ahead.Before(i);
      CollectingScanner scan;
      store.ScanRange(ids[i], from, to, &scan);
      const std::vector<Sample> want = store.ReadRange(ids[i], from, to);
      ASSERT_EQ(want.size(), scan.got.size()) << "query " << q << " series " << i;
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_EQ(want[k].ts_ns, scan.got[k].ts_ns) << k;
        ASSERT_EQ(want[k].value, scan.got[k].value) << k;
      }
    }
    if (q % 8 == 7) append_ticks(97);  // the head grows, chunks seal
  }
  // A writer appends (sealing and evicting) while scans read ahead.
  const int64_t start = ts;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 wrng(7);
    int64_t wts = start;
    std::vector<uint64_t> wv = values;
    while (!stop.load(std::memory_order_relaxed)) {
      wts += 10 * kMs;
      for (size_t n = 0; n < ids.size(); ++n) {
        wv[n] += wrng() % 1000;
        store.Append(ids[n], wts, wv[n]);
      }
    }
  });
  // At least 200 rounds, and on until the writer has evicted something.
  for (int q = 0; q < 200 || (store.Stats().evicted_samples == 0 && q < 1'000'000); ++q) {
    const int64_t from = start - static_cast<int64_t>(rng() % (30 * kSec));
    const int64_t to = from + static_cast<int64_t>(rng() % (10 * kSec));
    const std::pair<int64_t, int64_t> decoded[] = {{from, from}, {to - kSec, to}};
    Store::ScanAhead ahead(store, ids, from, to, decoded);
    for (size_t i = 0; i < ids.size(); ++i) {
      ahead.Before(i);
      CollectingScanner scan;
      store.ScanRange(ids[i], from, to, &scan);
      for (const Sample& s : scan.got) {
        ASSERT_GE(s.ts_ns, from);
        ASSERT_LE(s.ts_ns, to);
      }
    }
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(store.Stats().evicted_samples, 0u);
}

// A scanner that takes every summary it is offered and records what it saw.
class SummingScanner : public RangeScanner {
 public:
  Plan PlanChunk(const ChunkHeader&) override { return Plan::kSummary; }
  bool OnSummary(const ChunkSummary& s) override {
    ++summaries;
    delta += s.valid_delta;
    covered += s.valid_ns;
    return true;
  }
  void OnSamples(absl::Span<const Sample> samples) override { decoded += samples.size(); }
  int summaries = 0;
  double delta = 0;
  int64_t covered = 0;
  size_t decoded = 0;
};

TEST(WindowStatsStoreTest, ScanRangeSummariesSumTheChunksIntervals) {
  Store store;
  const SeriesId id = store.Register(SeriesKey{"hw_counters", "x", "mlx5_0", 1, ""},
                                     SignalWith({CounterKind::kCounter64, 64}, 1.0));
  std::mt19937_64 rng(3);
  uint64_t v = 0;
  for (int64_t i = 0; i < 5000; ++i) {
    v = (i == 2500) ? 7 : v + rng() % 100000;  // one reset
    store.Append(id, kT + i * 10 * kMs, v);
  }
  SummingScanner scan;
  store.ScanRange(id, INT64_MIN, INT64_MAX, &scan);
  const std::vector<Sample> all = store.ReadRange(id, INT64_MIN, INT64_MAX);
  ASSERT_GT(scan.summaries, 2);
  ASSERT_GT(scan.decoded, 0u);  // the head chunk has no summary
  ASSERT_LT(scan.decoded, all.size());
  // Every interval inside a sealed chunk is valid but the reset's (if it is
  // inside one): the summaries and the head's samples together hold every
  // sample, and the summed deltas are those of the chunks' inner intervals.
  double inner = 0;
  int64_t inner_ns = 0;
  size_t at = 0;
  SummingScanner again;
  store.ScanRange(id, INT64_MIN, INT64_MAX, &again);  // cached this time
  EXPECT_EQ(again.summaries, scan.summaries);
  EXPECT_EQ(again.delta, scan.delta);
  EXPECT_EQ(again.covered, scan.covered);
  // Recompute from the raw samples, chunk by chunk, using the summaries'
  // sample counts as seen by a scanner that records the headers.
  class Headers : public RangeScanner {
   public:
    Plan PlanChunk(const ChunkHeader& h) override {
      counts.push_back(h.count);
      return Plan::kSkip;
    }
    bool OnSummary(const ChunkSummary&) override { return true; }
    void OnSamples(absl::Span<const Sample>) override {}
    std::vector<uint32_t> counts;
  } headers;
  store.ScanRange(id, INT64_MIN, INT64_MAX, &headers);
  ASSERT_EQ(headers.counts.size(), static_cast<size_t>(scan.summaries) + 1);
  for (size_t c = 0; c + 1 < headers.counts.size(); ++c) {
    for (uint32_t k = 1; k < headers.counts[c]; ++k) {
      const Sample& a = all[at + k - 1];
      const Sample& b = all[at + k];
      if (b.value >= a.value) {
        inner += static_cast<double>(b.value - a.value);
        inner_ns += b.ts_ns - a.ts_ns;
      }
    }
    at += headers.counts[c];
  }
  EXPECT_EQ(at + scan.decoded, all.size());
  EXPECT_EQ(scan.covered, inner_ns);
  EXPECT_NEAR(scan.delta, inner, 1e-6 * inner);
}

// Summaries are computed by whichever scan comes first and published with
// the chunk while the writer keeps appending: every scan sees the same
// summary for a chunk (and the writer's sealing never disturbs it). The head
// chunk has no summary: it is handed over as samples, or as segments once
// longer than two of them (the thread's own seek index, not compared here).
TEST(WindowStatsStoreTest, ConcurrentScansAgreeOnEveryChunksSummary) {
  Store store;
  const SeriesId id = store.Register(SeriesKey{"hw_counters", "x", "mlx5_0", 1, ""},
                                     SignalWith({CounterKind::kCounter64, 64}, 1.0));
  class Recorder : public RangeScanner {
   public:
    Plan PlanChunk(const ChunkHeader&) override { return Plan::kSummary; }
    bool OnSummary(const ChunkSummary& s) override {
      // The head chunk is offered as 64-sample segments (their summaries
      // are the readers' own): only sealed chunks (~430 samples) count here.
      if (s.header.count > 64) seen[s.header.first_ts] = {s.valid_delta, s.valid_ns};
      return true;
    }
    void OnSamples(absl::Span<const Sample>) override {}
    std::map<int64_t, std::pair<double, int64_t>> seen;
  };
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::mt19937_64 rng(9);
    uint64_t v = 0;
    for (int64_t i = 0; i < 20000; ++i) {
      v += rng() % 100000;
      store.Append(id, kT + i * 10 * kMs, v);
    }
    stop = true;
  });
  Recorder readers[2];
  std::vector<std::thread> threads;
  for (Recorder& r : readers) {
    threads.emplace_back([&store, &stop, &r, id] {
      while (!stop) store.ScanRange(id, INT64_MIN, INT64_MAX, &r);
    });
  }
  writer.join();
  for (std::thread& t : threads) t.join();
  Recorder last;
  store.ScanRange(id, INT64_MIN, INT64_MAX, &last);
  ASSERT_GT(last.seen.size(), 10u);
  for (const Recorder& r : readers) {
    for (const auto& [first, sum] : r.seen) {
      auto it = last.seen.find(first);  // sealed chunks only: none is evicted
      ASSERT_NE(it, last.seen.end()) << "chunk at " << first - kT;
      EXPECT_EQ(sum, it->second) << "chunk at " << first - kT;
    }
  }
}

}  // namespace
}  // namespace window_stats_store_test
}  // namespace fabricscope
