// What the store's files share (store.cc, store_append.cc, store_time.cc,
// store_read.cc, store_snapshot.cc: one concern each, see their heads): the
// memory accounting, the thread-local caches of decoded tick times and
// chunk seek indexes (SegmentCache), the chunk summaries' helpers, the
// prefetch hints, and the definitions of the store's private types (a
// sealed Chunk, a Series with its head, a ReadView, a TickColumn).
// Included only by store/store*.cc; store.h is the one public header.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstring>
#include <deque>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

#include "store/store.h"

namespace fabricscope {
namespace store_internal {

// Allocator bookkeeping we assume per heap block (glibc: 8-16 bytes, rounded
// to 16): generous so that accounted bytes bound the real footprint.
inline constexpr uint64_t kMallocOverhead = 16;

inline uint64_t RoundUp16(uint64_t n) { return (n + 15) & ~uint64_t{15}; }

inline uint64_t StringHeap(const std::string& s) {
  return s.capacity() > 15 ? RoundUp16(s.capacity() + 1) + kMallocOverhead : 0;
}

inline uint64_t KeyHeap(const SeriesKey& k) {
  return StringHeap(k.source) + StringHeap(k.name) + StringHeap(k.device) + StringHeap(k.netdev);
}

inline uint64_t HeadAccounted(size_t capacity) { return RoundUp16(capacity) + kMallocOverhead; }

// A time block: the make_shared block (TimeBlock + control block) and its buffer.
inline uint64_t BlockAccounted(size_t capacity) {
  return RoundUp16(sizeof(TimeBlock) + 16) + RoundUp16(capacity) + 2 * kMallocOverhead;
}

// The timestamps of the ticks of the last time blocks a thread decoded: the
// chunks of one tick's series share their block, so a read of many series
// decodes it once; a few blocks are kept because a read alternates between
// the tiers' columns (a 10 ms series, then a 100 ms one).
struct TickCache {
  struct Entry {
    uint64_t serial = 0;
    uint64_t used = 0;  // read order, for replacing the least recently used
    std::vector<int64_t> ts;
  };
  static constexpr size_t kEntries = 4;
  Entry entries[kEntries];
  uint64_t clock = 0;

  // The timestamps of `block` holding at least tick `last_tick`.
  const std::vector<int64_t>& For(const TimeBlock* block, int64_t last_tick) {
    const int64_t need = last_tick - block->first_tick;
    Entry* victim = &entries[0];
    for (Entry& e : entries) {
      if (e.serial == block->serial) {
        if (need >= 0 && static_cast<uint64_t>(need) < e.ts.size()) {
          e.used = ++clock;
          return e.ts;
        }
        victim = &e;
        break;
      }
      if (e.used < victim->used) victim = &e;
    }
    victim->ts.clear();
    victim->serial = block->serial;
    victim->used = ++clock;
    block->Read(&victim->ts);
    return victim->ts;
  }
};

// The timestamps of `block`'s ticks, at least up to tick `last_tick`
// (this thread's TickCache; valid until its next call).
inline const std::vector<int64_t>& TickTimes(const TimeBlock* block, int64_t last_tick) {
  thread_local TickCache cache;
  return cache.For(block, last_tick);
}

// Replaces the tick indexes of `samples` by their timestamps: `ts` holds
// those of a block's ticks from `first_tick` on (TickTimes); false when one
// names a tick `ts` does not hold.
inline bool MapTickIndexes(const std::vector<int64_t>& ts, int64_t first_tick,
                           absl::Span<Sample> samples) {
  const int64_t* const t = ts.data();  // a local: the writes below cannot move it
  const uint64_t n = ts.size();
  for (Sample& s : samples) {
    const uint64_t idx = static_cast<uint64_t>(s.ts_ns - first_tick);
    if (idx >= n) return false;
    s.ts_ns = t[idx];
  }
  return true;
}

// The same for out[start..] and the ticks of `block` up to `last_tick`.
inline bool MapTicks(const TimeBlock* block, int64_t last_tick, std::vector<Sample>* out,
                     size_t start) {
  return MapTickIndexes(TickTimes(block, last_tick), block->first_tick,
                        absl::MakeSpan(*out).subspan(start));
}

// Appends the samples of one chunk to `out` with their real timestamps;
// false (nothing appended) when the chunk does not decode to its header or
// names a tick its block does not hold (corrupt: never served).
inline bool DecodeSamples(const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
                          std::vector<Sample>* out) {
  const size_t start = out->size();
  DecodeChunk(h, data, out);
  if (out->size() - start != h.count || (*out)[start].ts_ns != h.first_t ||
      (*out)[start].value != h.first_value || out->back().ts_ns != h.last_t ||
      out->back().value != h.last_value) {
    out->resize(start);
    return false;
  }
  // Ticks only grow within a chunk.
  if (block != nullptr && !MapTicks(block, h.last_t, out, start)) {
    out->resize(start);
    return false;
  }
  return true;
}

// Identities of chunks for readers' caches (SegmentCache): unique in the
// process, never reused.
inline std::atomic<uint64_t> next_chunk_serial{1};
inline uint64_t NewChunkSerial() {
  return next_chunk_serial.fetch_add(1, std::memory_order_relaxed);
}

inline constexpr uint8_t kSummaryNone = 0;
inline constexpr uint8_t kSummaryBusy = 1;
inline constexpr uint8_t kSummaryReady = 2;

// Fills the interval sums of `sum` from a chunk's decoded samples (see
// ChunkSummary).
inline void SummarizeSamples(CounterSemantics sem, absl::Span<const Sample> samples,
                             ChunkSummary* sum) {
  if (samples.empty()) return;
  CounterTracker tracker(sem);
  sum->above32 = samples[0].value > UINT32_MAX;
  sum->all_valid = true;
  sum->max_rate = 0;
  tracker.Update(samples[0].value);
  for (size_t i = 1; i < samples.size(); ++i) {
    const CounterUpdate u = tracker.Update(samples[i].value);
    sum->above32 = sum->above32 || samples[i].value > UINT32_MAX;
    const int64_t len = samples[i].ts_ns - samples[i - 1].ts_ns;
    if (len <= 0 || !u.rate_valid) {
      sum->all_valid = false;
      continue;
    }
    sum->valid_delta += static_cast<double>(u.delta);
    sum->valid_ns += len;
    sum->max_valid_ns = std::max(sum->max_valid_ns, len);
    sum->wrapped = sum->wrapped || u.event == CounterEvent::kWrapped;
    if (u.delta != 0) {
      sum->max_rate =
          std::max(sum->max_rate, static_cast<double>(u.delta) * (1.0 / static_cast<double>(len)));
    }
  }
}

// Whether the intervals of `sum` all have a positive length and are valid,
// each moving by the difference of its values (no reset, saturation or wrap),
// and sum to below 2^53 (exact as doubles): then the intervals from any of
// its samples to any later one sum to the difference of the two.
inline bool Telescopes(const ChunkSummary& sum) {
  const ChunkHeader& h = sum.header;
  return sum.all_valid && !sum.wrapped && h.last_value >= h.first_value &&
         h.last_value - h.first_value < (uint64_t{1} << 53);
}

// Seek index of a chunk (Store::ScanRange): the chunk cut into segments of
// kSegmentSamples consecutive samples, each with the decoder checkpoint at
// its first sample, its own header (real timestamps, first/last value,
// count) and its summary (ChunkSummary over the segment's inner intervals,
// a tracker started at its first sample). A scan hands the segments to the
// RangeScanner as if they were chunks, so a chunk at the edge of what the
// scanner needs decodes only the segments it must see as samples.
//
// Kept in memory only, per reading thread (SegmentCache), never in the
// chunk: built from one full decode the first time a thread reads a chunk
// at its edge, extended as the head chunk grows (a head keeps its identity,
// `serial`, when it is sealed). A chunk's bytes never change under a serial
// (the head only appends), so a cached index is valid as long as its serial
// is. Only complete segments are indexed; the samples after the last one
// are decoded from its end checkpoint.
inline constexpr uint32_t kSegmentSamples = 64;

struct Segment {
  ChunkCheckpoint start;
  ChunkSummary summary;  // summary.header: the segment's (real timestamps)
};

// The hot part of a segment's record, apart from the rest (checkpoint,
// header, summary: 160 bytes) so that finding the segments that overlap a
// range touches 32 bytes per segment, and only those before the first one
// reaching the range and after the last one are found by binary search.
struct SegmentBounds {
  int64_t min_ts = 0;
  int64_t max_ts = 0;
  int64_t max_upto = 0;    // the largest max_ts of this segment and those before it
  int64_t min_onward = 0;  // the smallest min_ts of this segment and those after it
};

struct SegmentIndex {
  uint64_t serial = 0;                // 0: empty slot
  std::vector<Segment> segments;      // complete segments, oldest first
  std::vector<SegmentBounds> bounds;  // ... their bounds, alike
  ChunkCheckpoint next;               // the first sample after them
  // The samples after the complete segments, as a shorter segment, while
  // the chunk held `rest_count` samples (0: not known): a chunk's first n
  // samples never change, so a scan that does not need these samples, or
  // needs only their summary, skips their decode.
  Segment rest;
  uint32_t rest_count = 0;
};

// Index bytes per segment, as accounted.
inline constexpr int64_t kSegmentBytes = sizeof(Segment) + sizeof(SegmentBounds);

// Per thread: direct-mapped by serial, bounded in bytes. A thread's cache
// (its slot table and every slot's segments) is cleared whole, but for the
// slot in use, when it is over kSegmentCacheBytes or when the caches of all
// threads together are over kProcessSegmentBytes: any number of threads may
// scan (the correlation worker, up to 32 gRPC query threads), and this memory
// is outside the store's budget. The slot table starts at kMinSlots and
// doubles, up to kMaxSlots, once its collisions have evicted as many live
// entries as half its slots: a thread that reads a few chunks (a query
// thread) keeps a small table.
class SegmentCache {
 public:
  static constexpr size_t kMinSlots = 512;
  static constexpr size_t kMaxSlots = 16384;
  static constexpr int64_t kSegmentCacheBytes = 16 << 20;
  static constexpr int64_t kProcessSegmentBytes = 48 << 20;

  SegmentCache() = default;
  SegmentCache(const SegmentCache&) = delete;
  SegmentCache& operator=(const SegmentCache&) = delete;
  ~SegmentCache() { Add(-bytes_); }

  SegmentIndex* Slot(uint64_t serial) {
    if (slots_.empty()) Resize(kMinSlots);
    SegmentIndex* e = &slots_[serial & (slots_.size() - 1)];
    if (e->serial != serial) {
      if (e->serial != 0 && slots_.size() < kMaxSlots && ++evictions_ >= slots_.size() / 2) {
        Resize(slots_.size() * 2);
        e = &slots_[serial & (slots_.size() - 1)];
        if (e->serial == serial) return e;
      }
      Add(-static_cast<int64_t>(e->segments.capacity()) * kSegmentBytes);
      std::vector<Segment>().swap(e->segments);
      std::vector<SegmentBounds>().swap(e->bounds);
      e->serial = serial;
      e->next = ChunkCheckpoint{};
      e->rest_count = 0;
    }
    return e;
  }
  // The slot `serial` maps to, as it is (for a read-ahead: the caller checks
  // its serial); null before the first Slot(). Valid until the next Slot().
  const SegmentIndex* SlotOf(uint64_t serial) const {
    return slots_.empty() ? nullptr : &slots_[serial & (slots_.size() - 1)];
  }
  // Accounts growth of a slot's vector; clears every slot but `keep` when
  // this thread's cache or all threads' caches are over their bound.
  void Grew(SegmentIndex* keep, size_t old_capacity) {
    const int64_t process =
        Add(static_cast<int64_t>(keep->segments.capacity() - old_capacity) * kSegmentBytes);
    if (bytes_ <= kSegmentCacheBytes && process <= kProcessSegmentBytes) return;
    int64_t freed = 0;
    for (SegmentIndex& e : slots_) {
      if (&e == keep) continue;
      freed += static_cast<int64_t>(e.segments.capacity()) * kSegmentBytes;
      std::vector<Segment>().swap(e.segments);
      std::vector<SegmentBounds>().swap(e.bounds);
      e.serial = 0;
    }
    Add(-freed);
  }

  // Every thread's cache together.
  static int64_t ProcessBytes() { return process_bytes_.load(std::memory_order_relaxed); }

 private:
  // Adds `delta` to this thread's and the process' byte counts; returns the
  // process' new count.
  int64_t Add(int64_t delta) {
    bytes_ += delta;
    return process_bytes_.fetch_add(delta, std::memory_order_relaxed) + delta;
  }

  // A table of `n` slots (a power of two), the entries kept: each old slot
  // maps to one of two new ones, its own.
  void Resize(size_t n) {
    std::vector<SegmentIndex> bigger(n);
    for (SegmentIndex& e : slots_) {
      if (e.serial != 0) bigger[e.serial & (n - 1)] = std::move(e);
    }
    Add(static_cast<int64_t>(n - slots_.size()) * static_cast<int64_t>(sizeof(SegmentIndex)));
    slots_ = std::move(bigger);
    evictions_ = 0;
  }

  static inline std::atomic<int64_t> process_bytes_{0};
  std::vector<SegmentIndex> slots_;
  size_t evictions_ = 0;  // live entries evicted by collisions since the last Resize
  int64_t bytes_ = 0;
};

// The segments of `idx` that may overlap [from_ns, to_ns]: those before
// the first end before the range (the largest max_ts up to them is), those
// from the last on start after it.
inline std::pair<size_t, size_t> SegmentSpan(const SegmentIndex& idx, int64_t from_ns,
                                             int64_t to_ns) {
  const SegmentBounds* const bounds = idx.bounds.data();
  const size_t n = idx.bounds.size();
  const size_t first =
      std::partition_point(bounds, bounds + n,
                           [from_ns](const SegmentBounds& b) { return b.max_upto < from_ns; }) -
      bounds;
  const size_t last =
      std::partition_point(bounds + first, bounds + n,
                           [to_ns](const SegmentBounds& b) { return b.min_onward <= to_ns; }) -
      bounds;
  return {first, last};
}

// This thread's seek index (ScanRange, Store::ScanAhead).
inline SegmentCache& ThreadSegmentCache() {
  thread_local SegmentCache cache;
  return cache;
}

// Prefetches the cache lines of [begin, end), at most `max_lines` of them,
// for reading (kWrite 0) or writing (1).
template <int kWrite>
inline void PrefetchRange(const void* begin, const void* end, int max_lines) {
  constexpr uintptr_t kLine = 64;
  for (uintptr_t p = reinterpret_cast<uintptr_t>(begin) & ~(kLine - 1);
       p < reinterpret_cast<uintptr_t>(end) && max_lines > 0; p += kLine, --max_lines) {
    __builtin_prefetch(reinterpret_cast<const void*>(p), kWrite, 3);
  }
}

// For reading, at most `max_lines` lines (Store::ScanAhead).
inline void PrefetchLines(const void* begin, const void* end, int max_lines) {
  PrefetchRange<0>(begin, end, max_lines);
}

// For writing, every line (Store::Append(tick, readings)).
inline void PrefetchForWrite(const void* begin, const void* end) {
  PrefetchRange<1>(begin, end, std::numeric_limits<int>::max());
}

// The header of decoded samples (real timestamps) as ScanRange shows it.
inline ChunkHeader HeaderOf(absl::Span<const Sample> samples) {
  ChunkHeader h;
  h.count = static_cast<uint32_t>(samples.size());
  h.first_ts = h.min_ts = h.max_ts = samples.front().ts_ns;
  h.last_ts = samples.back().ts_ns;
  h.first_value = samples.front().value;
  h.last_value = samples.back().value;
  for (const Sample& s : samples) {
    h.min_ts = std::min(h.min_ts, s.ts_ns);
    h.max_ts = std::max(h.max_ts, s.ts_ns);
  }
  h.first_t = h.first_ts;
  h.last_t = h.last_ts;
  return h;
}

// Brings `idx` up to every complete segment of the chunk (h, data, block);
// false when the chunk is corrupt. `sealed`: the chunk will not grow, so
// the decode is checked against its header's last sample.
inline bool ExtendIndex(SegmentCache* cache, SegmentIndex* idx, CounterSemantics sem,
                        const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
                        bool sealed, std::vector<Sample>* tmp) {
  const uint32_t full = h.count / kSegmentSamples * kSegmentSamples;
  if (idx->next.index >= full && (!sealed || idx->next.index > 0)) return true;
  const size_t old_capacity = idx->segments.capacity();
  const size_t old_size = idx->segments.size();
  idx->segments.reserve(full / kSegmentSamples);
  idx->bounds.reserve(full / kSegmentSamples);
  // Ticks only grow within a chunk: the block's timestamps up to the
  // chunk's last tick cover every sample.
  const std::vector<int64_t>* ticks = block != nullptr ? &TickTimes(block, h.last_t) : nullptr;
  Sample buf[kSegmentSamples];
  while (idx->next.index < full) {
    Segment seg;
    seg.start = idx->next;
    bool ok = true;
    if (DecodeChunkInto(h, data, &idx->next, kSegmentSamples, buf, &ok) != kSegmentSamples || !ok ||
        (ticks != nullptr && !MapTickIndexes(*ticks, block->first_tick, absl::MakeSpan(buf)))) {
      idx->serial = 0;  // start over next time (a corrupt chunk is dropped)
      return false;
    }
    seg.summary.header = HeaderOf(buf);
    SummarizeSamples(sem, buf, &seg.summary);
    idx->segments.push_back(seg);
    const ChunkHeader& sh = seg.summary.header;
    const int64_t upto =
        idx->bounds.empty() ? sh.max_ts : std::max(idx->bounds.back().max_upto, sh.max_ts);
    idx->bounds.push_back({sh.min_ts, sh.max_ts, upto, sh.min_ts});
  }
  // The new segments' smallest min_ts onward, carried back into the old
  // ones as far as it lowers theirs.
  for (size_t k = idx->bounds.size() - 1; k > 0 && idx->bounds.size() > old_size; --k) {
    const int64_t m = std::min(idx->bounds[k - 1].min_ts, idx->bounds[k].min_onward);
    if (k - 1 < old_size && idx->bounds[k - 1].min_onward == m) break;
    idx->bounds[k - 1].min_onward = m;
  }
  cache->Grew(idx, old_capacity);
  if (sealed) {  // the rest decodes to the header's last sample
    ChunkCheckpoint cp = idx->next;
    tmp->clear();
    if (!DecodeChunkFrom(h, data, &cp, h.count, tmp) || cp.index != h.count ||
        cp.t != static_cast<uint64_t>(h.last_t) || cp.value != h.last_value) {
      idx->serial = 0;
      return false;
    }
  }
  return true;
}

inline uint64_t SeriesOverhead(const SeriesKey& key, const Signal& signal, size_t series_size,
                               size_t agg_bytes) {
  uint64_t b = RoundUp16(series_size) + kMallocOverhead;
  b += KeyHeap(key);
  b += StringHeap(signal.name);
  b += RoundUp16(signal.label_values.capacity() * sizeof(std::string)) + kMallocOverhead;
  for (const std::string& v : signal.label_values) b += StringHeap(v);
  b += agg_bytes;
  // Table entries: series_ (unique_ptr, doubling), by_key_ (a copy of the key
  // in a slot, load factor >= 7/16 after growth), one eviction-heap entry.
  b += 2 * sizeof(void*);
  b += (sizeof(std::pair<const SeriesKey, SeriesId>) + 1) * 5 / 2 + KeyHeap(key);
  b += 2 * sizeof(void*) * 2;
  return b;
}

}  // namespace store_internal

// The store's files use the helpers unqualified.
using namespace store_internal;  // NOLINT(build/namespaces): store/*.cc only

// A sealed chunk: immutable once linked, except `next`, which the series'
// writer sets exactly once (under the series lock) when it seals the next
// chunk. Readers only follow `next` up to the newest chunk they saw under the
// lock, so they never read a `next` that is still being written.
struct Store::Chunk {
  ChunkHeader h;
  std::unique_ptr<uint8_t[]> data;
  uint64_t accounted = 0;
  std::shared_ptr<TimeBlock> block;  // null: the stream holds timestamps
  // Set once when the chunk turns out not to decode to its header (a
  // restored chunk is decoded only when first read): never served again.
  mutable std::atomic<bool> corrupt{false};
  // The cached ChunkSummary (Store::ScanRange): kSummaryNone until a scan
  // claims it (kSummaryBusy), writes the fields below and publishes them
  // (kSummaryReady, release); readers read the fields only after an acquire
  // load of kSummaryReady. Packed beside `corrupt`.
  mutable std::atomic<uint8_t> summary_state{0};
  mutable uint8_t summary_flags = 0;  // bit 0: wrapped, bit 1: above32
  mutable double summary_delta = 0;
  mutable int64_t summary_ns = 0;
  mutable int64_t summary_max_ns = 0;
  // Identity for readers' seek-index caches (the head's, once sealed).
  uint64_t serial = 0;
  std::shared_ptr<Chunk> next;

  // Releases a long chain iteratively (a reader may have held the oldest
  // chunk across many evictions): a chunk destroyed while another chunk's
  // destructor runs on this thread hands its `next` to that outer destructor
  // instead of recursing. Only reference releases are used (never a peek at
  // use_count()), so every release is ordered by the control block.
  ~Chunk() {
    thread_local std::vector<std::shared_ptr<Chunk>>* pending = nullptr;
    if (next == nullptr) return;
    if (pending != nullptr) {
      pending->push_back(std::move(next));
      return;
    }
    std::vector<std::shared_ptr<Chunk>> list;
    list.push_back(std::move(next));
    pending = &list;
    while (!list.empty()) {
      std::shared_ptr<Chunk> p = std::move(list.back());
      list.pop_back();
      p.reset();  // may destroy a chunk, which pushes its own `next`
    }
    pending = nullptr;
  }
};

struct Store::Series {
  Series(SeriesKey k, Signal s, const PeakGeometry& g)
      : signal(std::move(s)), tracker(signal.semantics), key(std::move(k)) {
    if (signal.semantics.kind != CounterKind::kGauge) {
      agg = std::make_unique<Aggregates>(g, BurstFloorFor(signal.name));
    }
  }
  struct Aggregates {
    Aggregates(const PeakGeometry& g, double f) : peak(g), floor(f) {}
    // In the order an append uses them; the burst window's ring last.
    PeakWindow peak;
    double floor;
    BurstWindow burst;
  };

  // What an append reads and writes comes first, from `signal` to
  // `head_serial` (Append(tick, readings) prefetches that range); the key and
  // the sealed chain after it.
  const Signal signal;

  mutable std::mutex mu;
  // Written by the series' writer under `mu`; the writer also reads them
  // without `mu` (it is the only thread that writes them); readers copy them
  // under `mu`.
  CounterTracker tracker;
  SeriesState state;
  std::unique_ptr<Aggregates> agg;
  ChunkHeader head;
  std::unique_ptr<uint8_t[]> head_data;  // zero beyond ByteSize(head)
  size_t head_cap = 0;
  std::shared_ptr<TimeBlock> head_block;  // the head's time block (one budget reference)
  uint64_t head_serial = 0;               // set when the head gets its first sample
  const SeriesKey key;
  uint64_t accounted = 0;  // per-series overhead, set once at registration
  // Written by the writer (seal) and by evictors, always under `mu`.
  std::shared_ptr<Chunk> oldest;
  Chunk* newest = nullptr;  // owned through the chain from `oldest`
  // The sealed chunks, oldest first, each with the largest max_ts up to it
  // (non-decreasing even across clock steps) and its own min_ts: where a
  // read from a time on starts, found by binary search instead of walking
  // the chain, and where it can stop.
  struct SeekEntry {
    int64_t max_ts_so_far;
    int64_t min_ts;
    const Chunk* chunk;
  };
  std::deque<SeekEntry> seek;
  // The entries of `seek` that may reach [from_ns, to_ns]: from the first
  // whose chunk can reach from_ns (those before end earlier) to the last
  // that may start by to_ns (at most 64 skipped from the newest back; any
  // stopping point is correct: the readers filter). Under `mu`.
  std::pair<std::deque<SeekEntry>::const_iterator, std::deque<SeekEntry>::const_iterator> SeekRange(
      int64_t from_ns, int64_t to_ns) const {
    auto it = std::partition_point(seek.begin(), seek.end(), [from_ns](const SeekEntry& e) {
      return e.max_ts_so_far < from_ns;
    });
    auto end = seek.end();
    for (int n = 0; n < 64 && end != it && std::prev(end)->min_ts > to_ns; ++n) --end;
    return {it, end};
  }
  uint64_t sealed_chunks = 0;
  uint64_t sealed_samples = 0;
};

// What a reader copies under the series lock; everything else happens after.
struct Store::ReadView {
  const Series* series = nullptr;
  std::shared_ptr<Chunk> oldest;  // keeps the chain from `first` on alive
  // The first sealed chunk that may reach from_ns (those before end earlier)
  // and the last one that may reach to_ns (those after start later); null:
  // none does.
  const Chunk* first = nullptr;
  const Chunk* last = nullptr;
  ChunkHeader head;
  // A head never outgrows kMaxChunkBytes: copied without a heap allocation.
  absl::InlinedVector<uint8_t, kMaxChunkBytes> head_data;
  std::shared_ptr<TimeBlock> head_block;
  uint64_t head_serial = 0;

  // f(header, data, block, chunk): every chunk oldest first (but those found
  // corrupt), the head last (chunk null).
  template <typename F>
  void ForEachChunk(F&& f) const {
    for (const Chunk* c = first; c != nullptr; c = c == last ? nullptr : c->next.get()) {
      if (!c->corrupt.load(std::memory_order_relaxed)) f(c->h, c->data.get(), c->block.get(), c);
    }
    if (head.count > 0) f(head, head_data.data(), head_block.get(), nullptr);
  }
};

class TickColumn {
 public:
  explicit TickColumn(int64_t interval) : interval_ns(interval) {}
  const int64_t interval_ns;
  // The writer's: the next tick's index and the open block (one budget
  // reference while open).
  int64_t next_tick = 0;
  std::shared_ptr<TimeBlock> open;
};

}  // namespace fabricscope
