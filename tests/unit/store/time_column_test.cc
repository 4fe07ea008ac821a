// Tick time columns: the block codec, and the store's tick appends (shared
// timestamps, mixing with own-timestamp appends, the budget).
#include "store/time_column.h"

#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "store/store.h"

namespace fabricscope {
namespace time_column_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT = 1'700'000'000'000'000'000;

TEST(TimeBlockTest, RoundTripsJitterStepsAndExtremes) {
  TimeBlock b(100, 10 * kMs);
  std::vector<int64_t> in;
  std::mt19937_64 rng(3);
  int64_t ts = kT;
  for (int i = 0; i < 3000; ++i) {
    if (i == 2000) {
      ts = INT64_MAX - 7;  // absurd values still round-trip
    } else if (i == 2001) {
      ts = INT64_MIN + 3;
    } else {
      ts += 10 * kMs + static_cast<int64_t>(rng() % 40'001) - 20'000;
      if (i == 1000) ts -= 5'000 * kMs;  // a realtime clock step back
    }
    while (!b.Add(ts)) {
      ASSERT_TRUE(b.CanGrow());
      b.Grow();
    }
    in.push_back(ts);
  }
  std::vector<int64_t> out;
  b.Read(&out);
  EXPECT_EQ(out, in);
  // +-20 us of jitter costs about 20 bits a tick, not 64.
  TimeBlockImage im = b.Image();
  EXPECT_LT(im.data.size(), 3000u * 4);
  b.Seal();
  EXPECT_FALSE(b.Add(ts));
  out.clear();
  b.Read(&out);
  EXPECT_EQ(out, in);
  // The image reads back; a corrupt one is refused.
  std::string error;
  std::shared_ptr<TimeBlock> c = TimeBlock::FromImage(im, &error);
  ASSERT_NE(c, nullptr) << error;
  EXPECT_EQ(c->first_tick, 100);
  out.clear();
  c->Read(&out);
  EXPECT_EQ(out, in);
  im.last_ts += 1;
  EXPECT_EQ(TimeBlock::FromImage(im, &error), nullptr);
  im.last_ts -= 1;
  im.count += 5000;  // more ticks than the stream holds
  EXPECT_EQ(TimeBlock::FromImage(im, &error), nullptr);
}

TEST(TimeBlockTest, HoldsAtMostTicksPerBlock) {
  TimeBlock b(0, 10 * kMs);
  uint32_t n = 0;
  for (int64_t i = 0; i < kTicksPerBlock + 10; ++i) {
    bool added = b.Add(kT + i * 10 * kMs);
    while (!added && b.CanGrow()) {
      b.Grow();
      added = b.Add(kT + i * 10 * kMs);
    }
    if (!added) break;
    ++n;
  }
  EXPECT_EQ(n, kTicksPerBlock);
}

Signal Ecn() { return *MapCounter({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""}); }

SeriesKey Key(int i) {
  return {"hw_counters", "np_ecn_marked_roce_packets", "mlx5_" + std::to_string(i), 1, ""};
}

TEST(StoreTickTest, SeriesOfOneTickShareItsTimestamp) {
  Store store;
  TickColumn* col = store.AddTickColumn(absl::Milliseconds(10));
  const SeriesId a = store.Register(Key(0), Ecn());
  const SeriesId b = store.Register(Key(1), Ecn());
  std::vector<int64_t> times;
  std::mt19937_64 rng(9);
  int64_t ts = kT;
  // Three blocks' worth of ticks; b is polled every third tick only.
  for (int i = 0; i < 20000; ++i) {
    ts += 10 * kMs + static_cast<int64_t>(rng() % 40'001) - 20'000;
    const TickRef t = store.Tick(col, ts);
    ASSERT_NE(t.block, nullptr);
    EXPECT_EQ(t.tick, i);
    store.Append(a, t, static_cast<uint64_t>(i) * 7);
    if (i % 3 == 0) store.Append(b, t, static_cast<uint64_t>(i / 30));
    times.push_back(ts);
  }
  std::vector<Sample> ra = store.ReadRange(a, INT64_MIN, INT64_MAX);
  ASSERT_EQ(ra.size(), times.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    ASSERT_EQ(ra[i].ts_ns, times[i]) << i;
    ASSERT_EQ(ra[i].value, i * 7) << i;
  }
  std::vector<Sample> rb = store.ReadRange(b, INT64_MIN, INT64_MAX);
  ASSERT_EQ(rb.size(), (times.size() + 2) / 3);
  for (size_t i = 0; i < rb.size(); ++i) ASSERT_EQ(rb[i].ts_ns, times[i * 3]) << i;
  // Range bounds and deltas use the real timestamps.
  std::vector<Sample> part = store.ReadRange(a, times[100], times[199]);
  ASSERT_EQ(part.size(), 100u);
  EXPECT_EQ(part.front().ts_ns, times[100]);
  auto d = store.Delta(a, times[10000], times[15000]);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->raw_delta, 5000u * 7);
  EXPECT_EQ(d->first_ts_ns, times[10000]);
  EXPECT_EQ(d->last_ts_ns, times[15000]);
  EXPECT_EQ(store.Stats().samples, ra.size() + rb.size());
}

// Every AppendEvent an observer saw, flattened for comparison.
class EventRecorder final : public AppendObserver {
 public:
  void OnAppend(const AppendEvent& e) override {
    events.push_back({e.id, e.start_ns, e.end_ns, e.gauge, e.delta, e.rate, e.rate_valid, e.value,
                      e.microburst});
    EXPECT_NE(e.key, nullptr);
    EXPECT_NE(e.signal, nullptr);
  }
  void OnAppends(absl::Span<const AppendEvent> events) override {
    EXPECT_GT(events.size(), 0u);
    EXPECT_LE(events.size(), 32u);
    ++batches;
    for (const AppendEvent& e : events) OnAppend(e);
  }
  using Event = std::tuple<SeriesId, int64_t, int64_t, bool, double, double, bool, double, bool>;
  std::vector<Event> events;
  uint64_t batches = 0;  // OnAppends calls
};

void ExpectSameStore(const Store& a, const Store& b, SeriesId n) {
  for (SeriesId id = 0; id < n; ++id) {
    SCOPED_TRACE(id);
    const std::optional<SeriesSnapshot> x = a.Get(id);
    const std::optional<SeriesSnapshot> y = b.Get(id);
    ASSERT_TRUE(x.has_value() && y.has_value());
    const SeriesState& p = x->state;
    const SeriesState& q = y->state;
    EXPECT_EQ(p.has_value, q.has_value);
    EXPECT_EQ(p.last_ts_ns, q.last_ts_ns);
    EXPECT_EQ(p.last_raw, q.last_raw);
    EXPECT_EQ(p.total, q.total);
    EXPECT_EQ(p.resets, q.resets);
    EXPECT_EQ(p.saturated, q.saturated);
    EXPECT_EQ(p.last_rate, q.last_rate);
    EXPECT_EQ(p.rate_valid, q.rate_valid);
    EXPECT_EQ(p.samples, q.samples);
    EXPECT_EQ(p.peak_rate, q.peak_rate);
    EXPECT_EQ(p.peak_valid, q.peak_valid);
    EXPECT_EQ(p.microbursts, q.microbursts);
    EXPECT_EQ(a.ReadRange(id, INT64_MIN, INT64_MAX), b.ReadRange(id, INT64_MIN, INT64_MAX));
  }
  const StoreStats sa = a.Stats();
  const StoreStats sb = b.Stats();
  EXPECT_EQ(sa.bytes, sb.bytes);
  EXPECT_EQ(sa.samples, sb.samples);
  EXPECT_EQ(sa.evicted_samples, sb.evicted_samples);
  EXPECT_EQ(sa.chunks, sb.chunks);
}

// Store::Append(tick, readings) is exactly one Append(id, tick, raw) per
// reading, in order: same samples, derived state (counter semantics: resets,
// 32-bit wraps, saturation; peak and microburst windows), observer events,
// chunks and budget (a small one: heads seal and the oldest chunks go), for
// batches shorter and longer than its prefetch distance, series repeated
// within a batch, ids the store does not know, and ticks without a block.
TEST(StoreTickTest, BatchAppendIsExactlyOneAppendPerReading) {
  StoreOptions o;
  o.memory_bytes = 256 << 10;
  Store one(o);
  Store batch(o);
  EventRecorder one_events;
  EventRecorder batch_events;
  one.SetObserver(&one_events);
  batch.SetObserver(&batch_events);
  std::vector<Signal> signals;
  const char* const kNames[] = {"np_ecn_marked_roce_packets", "rx_write_requests", "out_of_buffer",
                                "np_cnp_sent"};
  for (const char* n : kNames) signals.push_back(*MapCounter({"hw_counters", n, "mlx5_0", 1, ""}));
  Signal wrap = signals[0];
  wrap.semantics = {CounterKind::kWrap32, 32};
  Signal sat = signals[0];
  sat.semantics = {CounterKind::kSaturating, 16};
  Signal gauge = signals[0];
  gauge.semantics = {CounterKind::kGauge, 64};
  signals.push_back(wrap);
  signals.push_back(sat);
  signals.push_back(gauge);
  constexpr SeriesId kSeries = 60;
  std::vector<uint64_t> value(kSeries);
  for (SeriesId i = 0; i < kSeries; ++i) {
    const Signal& sig = signals[i % signals.size()];
    SeriesKey key{"hw_counters", "c" + std::to_string(i), "mlx5_" + std::to_string(i), 1, ""};
    ASSERT_EQ(one.Register(key, sig), i);
    ASSERT_EQ(batch.Register(key, sig), i);
  }
  TickColumn* col_one = one.AddTickColumn(absl::Milliseconds(10));
  TickColumn* col_batch = batch.AddTickColumn(absl::Milliseconds(10));
  std::mt19937_64 rng(21);
  int64_t ts = kT;
  std::vector<SeriesReading> readings;
  for (int tick = 0; tick < 4000; ++tick) {
    ts += 10 * kMs + static_cast<int64_t>(rng() % 40'001) - 20'000;
    readings.clear();
    const size_t n = rng() % 3 == 0 ? rng() % 12 : rng() % 90;  // around the prefetch distance
    for (size_t k = 0; k < n; ++k) {
      const uint64_t pick = rng() % 100;
      SeriesId id = static_cast<SeriesId>(rng() % kSeries);
      if (pick == 0) id = kInvalidSeries;
      if (pick == 1) id = kSeries + 5;  // not registered
      uint64_t& v = value[id < kSeries ? id : 0];
      const uint64_t move = rng() % 1000;
      if (move == 0) {
        v = rng() % 100;  // reset
      } else if (move == 1) {
        v = UINT32_MAX - rng() % 50;  // about to wrap a 32-bit counter
      } else if (move == 2) {
        v = 65535;  // a 16-bit saturating counter stuck
      } else {
        v += (rng() % 4 == 0) ? rng() % 1'000'000 : rng() % 10;
      }
      readings.push_back({id, v});
    }
    TickRef t_one = one.Tick(col_one, ts);
    TickRef t_batch = batch.Tick(col_batch, ts);
    if (tick % 97 == 5) {  // a tick the column could not record: own timestamps
      t_one = {nullptr, t_one.tick, ts};
      t_batch = {nullptr, t_batch.tick, ts};
    }
    for (const SeriesReading& r : readings) one.Append(r.id, t_one, r.raw);
    batch.Append(t_batch, readings);
  }
  EXPECT_GT(one.Stats().evicted_samples, 0u);  // the budget was exercised
  ExpectSameStore(one, batch, kSeries);
  EXPECT_EQ(one_events.events, batch_events.events);
  EXPECT_GT(one_events.events.size(), 100'000u);
  // The batched appends' events came through OnAppends, 32 at a time at most.
  EXPECT_EQ(one_events.batches, 0u);
  EXPECT_GE(batch_events.batches, batch_events.events.size() / 32);
}

TEST(StoreTickTest, OwnTimestampAppendsMixWithTicks) {
  Store store;
  TickColumn* col = store.AddTickColumn(absl::Milliseconds(10));
  const SeriesId a = store.Register(Key(0), Ecn());
  std::vector<Sample> want;
  int64_t ts = kT;
  for (int i = 0; i < 3000; ++i) {
    ts += 10 * kMs + (i % 5) * 1000;
    const uint64_t v = static_cast<uint64_t>(i) * 3;
    if ((i / 100) % 2 == 0) {
      store.Append(a, store.Tick(col, ts), v);
    } else {
      store.Tick(col, ts);  // the tier ticked; this sample came from elsewhere (replay)
      store.Append(a, ts, v);
    }
    want.push_back({ts, v});
  }
  EXPECT_EQ(store.ReadRange(a, INT64_MIN, INT64_MAX), want);
  auto d = store.Delta(a, want[150].ts_ns, want[2950].ts_ns);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->raw_delta, 2800u * 3);
}

TEST(StoreTickTest, BudgetHoldsBlocksAndReleasesThemWithTheirChunks) {
  StoreOptions o;
  o.memory_bytes = 256 << 10;
  Store store(o);
  TickColumn* col = store.AddTickColumn(absl::Milliseconds(10));
  std::vector<SeriesId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(store.Register(Key(i), Ecn()));
  std::mt19937_64 rng(1);
  int64_t ts = kT;
  uint64_t v = 0;
  // ~12 blocks of ticks: the oldest chunks and then their blocks must go.
  for (int i = 0; i < 100000; ++i) {
    ts += 10 * kMs + static_cast<int64_t>(rng() % 40'001) - 20'000;
    const TickRef t = store.Tick(col, ts);
    v += rng() % 1000;
    for (SeriesId id : ids) store.Append(id, t, v);
    if (i % 5000 == 0) {
      ASSERT_LE(store.Stats().bytes, o.memory_bytes) << i;
    }
  }
  const StoreStats st = store.Stats();
  EXPECT_LE(st.bytes, o.memory_bytes);
  EXPECT_GT(st.evicted_samples, 0u);
  // What is left is the newest history, still readable with its timestamps.
  std::vector<Sample> r = store.ReadRange(ids[0], INT64_MIN, INT64_MAX);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.back().ts_ns, ts);
  EXPECT_EQ(r.back().value, v);
  for (size_t i = 1; i < r.size(); ++i) ASSERT_LT(r[i - 1].ts_ns, r[i].ts_ns);
  // Blocks no chunk refers to were released: bytes held are about what the
  // samples need, not one block per tick range ever seen.
  EXPECT_GT(static_cast<double>(st.samples) * 0.5, static_cast<double>(st.bytes) / 8);
}

// A restored chunk is decoded only when first read: one that does not
// decode to its header is dropped then, counted once, and never served.
TEST(StoreTickTest, ARestoredChunkThatDoesNotDecodeIsNeverServed) {
  std::vector<Sample> first, second;
  for (int i = 0; i < 500; ++i) first.push_back({kT + i * 10 * kMs, uint64_t(i) * 11});
  for (int i = 500; i < 1000; ++i) second.push_back({kT + i * 10 * kMs, uint64_t(i) * 11});
  std::vector<EncodedChunk> chunks;
  chunks.push_back(EncodeChunk(first));
  chunks.push_back(EncodeChunk(second));
  ASSERT_GT(chunks[0].data.size(), 10u);
  chunks[0].data[chunks[0].data.size() / 2] ^= 0x5a;  // a stream its CRC would have matched
  Store store;
  SeriesState state;
  state.has_value = true;
  state.last_ts_ns = second.back().ts_ns;
  state.last_raw = second.back().value;
  const SeriesId id = store.Restore(Key(0), Ecn(), state, std::move(chunks));
  ASSERT_NE(id, kInvalidSeries);
  EXPECT_EQ(store.Stats().corrupt_chunks, 0u);
  EXPECT_EQ(store.ReadRange(id, INT64_MIN, INT64_MAX), second);
  EXPECT_EQ(store.Stats().corrupt_chunks, 1u);
  EXPECT_EQ(store.ReadRange(id, INT64_MIN, INT64_MAX), second);
  auto d = store.Delta(id, first.front().ts_ns, second.back().ts_ns);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->first_ts_ns, second.front().ts_ns);  // nothing from the corrupt chunk
  EXPECT_EQ(store.Stats().corrupt_chunks, 1u);      // counted once
}

// The two-step restore of the state snapshot: without eviction a series'
// chunks are linked all or none; with it, as Restore.
TEST(StoreTickTest, RestoreChunksWithoutEvictionLinksAllOrNothing) {
  std::vector<EncodedChunk> encoded;
  for (int c = 0; c < 40; ++c) {
    std::vector<Sample> samples;
    for (int i = 0; i < 500; ++i) {
      const int64_t n = c * 500 + i;
      samples.push_back({kT + n * 10 * kMs, uint64_t(n) * uint64_t(n)});
    }
    encoded.push_back(EncodeChunk(samples));
  }
  std::vector<RestoredChunk> chunks;
  for (const EncodedChunk& c : encoded) chunks.push_back({c.header, c.data.data(), nullptr});
  StoreOptions o;
  o.memory_bytes = 32 << 10;  // the series and some of them, not all
  Store store(o);
  const SeriesId id = store.RestoreSeries(Key(0), Ecn(), SeriesState{});
  ASSERT_NE(id, kInvalidSeries);
  const uint64_t before = store.Stats().bytes;
  uint64_t dropped = 0;
  EXPECT_FALSE(store.RestoreChunks(id, chunks, /*may_evict=*/false, &dropped));
  EXPECT_EQ(dropped, chunks.size());
  StoreStats st = store.Stats();
  EXPECT_EQ(st.chunks, 0u);
  EXPECT_EQ(st.bytes, before);
  EXPECT_EQ(st.evicted_samples, 0u);
  EXPECT_TRUE(store.RestoreChunks(id, chunks, /*may_evict=*/true, &dropped));
  st = store.Stats();
  EXPECT_GT(st.chunks, 0u);
  EXPECT_LT(dropped + st.chunks, chunks.size() + 1);  // the oldest went
  EXPECT_LE(st.bytes, o.memory_bytes);
  EXPECT_GT(st.evicted_samples, 0u);
  std::vector<Sample> r = store.ReadRange(id, INT64_MIN, INT64_MAX);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.back().ts_ns, kT + 19999 * 10 * kMs);  // the newest stayed
  // A store that holds them all: every chunk, every sample.
  Store big;
  const SeriesId all = big.RestoreSeries(Key(0), Ecn(), SeriesState{});
  EXPECT_TRUE(big.RestoreChunks(all, chunks, /*may_evict=*/false, &dropped));
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(big.Stats().samples, 20000u);
  EXPECT_EQ(big.ReadRange(all, INT64_MIN, INT64_MAX).size(), 20000u);
  // A key restored already is refused.
  EXPECT_EQ(big.RestoreSeries(Key(0), Ecn(), SeriesState{}), kInvalidSeries);
}

// Series restored concurrently share their time blocks: each block is
// accounted once, as in a sequential restore, and released with its last
// chunk.
TEST(StoreTickTest, ConcurrentRestoreChunksAccountSharedBlocksOnce) {
  Store source;
  TickColumn* col = source.AddTickColumn(absl::Milliseconds(10));
  std::vector<SeriesId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(source.Register(Key(i), Ecn()));
  int64_t ts = kT;
  for (int i = 0; i < 20000; ++i) {  // 3 blocks
    ts += 10 * kMs + (i % 3) * 1000;
    const TickRef t = source.Tick(col, ts);
    for (SeriesId id : ids) source.Append(id, t, uint64_t(i) * (id + 1));
  }
  // The dump as a snapshot reader gets it: the chunks' bytes, and blocks of
  // their own (TimeBlock::FromImage) for each store restored into.
  std::vector<std::vector<std::vector<uint8_t>>> bytes;
  struct Restorable {
    std::map<const TimeBlock*, std::shared_ptr<TimeBlock>> blocks;
    std::vector<std::vector<RestoredChunk>> chunks;
  };
  Restorable seq_in, con_in;
  source.Dump([&](const SeriesDump& d) {
    bytes.emplace_back();
    for (const SeriesDump::ChunkRef& c : d.chunks) {
      bytes.back().emplace_back(c.data, c.data + ChunkWriter::ByteSize(c.header));
    }
    for (Restorable* in : {&seq_in, &con_in}) {
      in->chunks.emplace_back();
      for (size_t k = 0; k < d.chunks.size(); ++k) {
        const SeriesDump::ChunkRef& c = d.chunks[k];
        std::shared_ptr<TimeBlock> block;
        if (c.block != nullptr) {
          std::shared_ptr<TimeBlock>& b = in->blocks[c.block];
          if (b == nullptr) {
            std::string error;
            b = TimeBlock::FromImage(c.block->Image(), &error);
            EXPECT_NE(b, nullptr) << error;
          }
          block = b;
        }
        in->chunks.back().push_back({c.header, bytes.back()[k].data(), block});
      }
    }
    return true;
  });
  ASSERT_EQ(bytes.size(), ids.size());
  ASSERT_EQ(con_in.blocks.size(), 3u);
  Store sequential, concurrent;
  std::vector<SeriesId> seq_ids, con_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    seq_ids.push_back(sequential.RestoreSeries(Key(static_cast<int>(i)), Ecn(), SeriesState{}));
    con_ids.push_back(concurrent.RestoreSeries(Key(static_cast<int>(i)), Ecn(), SeriesState{}));
    ASSERT_TRUE(sequential.RestoreChunks(seq_ids[i], seq_in.chunks[i], /*may_evict=*/true));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < ids.size(); i += 2) {
        EXPECT_TRUE(concurrent.RestoreChunks(con_ids[i], con_in.chunks[i], /*may_evict=*/false));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(concurrent.Stats().bytes, sequential.Stats().bytes);
  EXPECT_EQ(concurrent.Stats().samples, source.Stats().samples);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(concurrent.ReadRange(con_ids[i], INT64_MIN, INT64_MAX),
              source.ReadRange(ids[i], INT64_MIN, INT64_MAX));
  }
  // Each block holds one budget reference per chunk that refers to it.
  for (const auto& [orig, b] : con_in.blocks) {
    int64_t refs = 0;
    for (const auto& list : con_in.chunks) {
      for (const RestoredChunk& c : list) refs += c.block == b ? 1 : 0;
    }
    EXPECT_EQ(b->refs.load(), refs);
  }
}

}  // namespace
}  // namespace time_column_test
}  // namespace fabricscope
