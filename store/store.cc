#include "store/store.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <deque>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace fabricscope {
namespace {

// Allocator bookkeeping we assume per heap block (glibc: 8-16 bytes, rounded
// to 16): generous so that accounted bytes bound the real footprint.
constexpr uint64_t kMallocOverhead = 16;

uint64_t RoundUp16(uint64_t n) { return (n + 15) & ~uint64_t{15}; }

uint64_t StringHeap(const std::string& s) {
  return s.capacity() > 15 ? RoundUp16(s.capacity() + 1) + kMallocOverhead : 0;
}

uint64_t KeyHeap(const SeriesKey& k) {
  return StringHeap(k.source) + StringHeap(k.name) + StringHeap(k.device) + StringHeap(k.netdev);
}

uint64_t HeadAccounted(size_t capacity) { return RoundUp16(capacity) + kMallocOverhead; }

// A time block: the make_shared block (TimeBlock + control block) and its buffer.
uint64_t BlockAccounted(size_t capacity) {
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
const std::vector<int64_t>& TickTimes(const TimeBlock* block, int64_t last_tick) {
  thread_local TickCache cache;
  return cache.For(block, last_tick);
}

// Replaces the tick indexes of `samples` by their timestamps: `ts` holds
// those of a block's ticks from `first_tick` on (TickTimes); false when one
// names a tick `ts` does not hold.
bool MapTickIndexes(const std::vector<int64_t>& ts, int64_t first_tick,
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
bool MapTicks(const TimeBlock* block, int64_t last_tick, std::vector<Sample>* out, size_t start) {
  return MapTickIndexes(TickTimes(block, last_tick), block->first_tick,
                        absl::MakeSpan(*out).subspan(start));
}

// Appends the samples of one chunk to `out` with their real timestamps;
// false (nothing appended) when the chunk does not decode to its header or
// names a tick its block does not hold (corrupt: never served).
bool DecodeSamples(const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
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
std::atomic<uint64_t> next_chunk_serial{1};
uint64_t NewChunkSerial() { return next_chunk_serial.fetch_add(1, std::memory_order_relaxed); }

constexpr uint8_t kSummaryNone = 0;
constexpr uint8_t kSummaryBusy = 1;
constexpr uint8_t kSummaryReady = 2;

// Fills the interval sums of `sum` from a chunk's decoded samples (see
// ChunkSummary).
void SummarizeSamples(CounterSemantics sem, absl::Span<const Sample> samples, ChunkSummary* sum) {
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
bool Telescopes(const ChunkSummary& sum) {
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
constexpr uint32_t kSegmentSamples = 64;

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
constexpr int64_t kSegmentBytes = sizeof(Segment) + sizeof(SegmentBounds);

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
std::pair<size_t, size_t> SegmentSpan(const SegmentIndex& idx, int64_t from_ns, int64_t to_ns) {
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
SegmentCache& ThreadSegmentCache() {
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
ChunkHeader HeaderOf(absl::Span<const Sample> samples) {
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
bool ExtendIndex(SegmentCache* cache, SegmentIndex* idx, CounterSemantics sem, const ChunkHeader& h,
                 const uint8_t* data, const TimeBlock* block, bool sealed,
                 std::vector<Sample>* tmp) {
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

}  // namespace

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

namespace {

uint64_t SeriesOverhead(const SeriesKey& key, const Signal& signal, size_t series_size,
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

}  // namespace

Store::Store(StoreOptions options)
    : options_(options), peak_geometry_(PeakGeometry::For(options.peak_window)) {}

Store::~Store() {
  // Tear chains down iteratively (Chunk's destructor handles it per chain).
  std::unique_lock lock(table_mu_);
  for (auto& s : series_) {
    std::lock_guard series_lock(s->mu);
    s->newest = nullptr;
    s->oldest.reset();
  }
}

TickColumn* Store::AddTickColumn(absl::Duration interval) {
  std::lock_guard lock(columns_mu_);
  columns_.push_back(std::make_unique<TickColumn>(absl::ToInt64Nanoseconds(interval)));
  return columns_.back().get();
}

TickRef Store::Tick(TickColumn* c, int64_t ts_ns) {
  const int64_t tick = c->next_tick++;
  if (c->open != nullptr && c->open->Add(ts_ns)) return {c->open, tick, ts_ns};
  if (c->open != nullptr && c->open->CanGrow()) {
    const uint64_t before = c->open->accounted;
    const uint64_t after = BlockAccounted(std::min(kBlockBytes, c->open->capacity() * 2));
    if (Reserve(after)) {
      c->open->Grow();
      c->open->accounted = after;
      Release(before);
      if (c->open->Add(ts_ns)) return {c->open, tick, ts_ns};
    }
  }
  if (c->open != nullptr) {  // full: seal it, return what it no longer uses
    const uint64_t before = c->open->accounted;
    c->open->Seal();
    c->open->accounted = BlockAccounted(c->open->capacity());
    Release(before - c->open->accounted);
    DropBlockRef(c->open.get());  // the column's reference
    c->open.reset();
  }
  const uint64_t bytes = BlockAccounted(kInitialBlockBytes);
  if (!Reserve(bytes)) return {nullptr, tick, ts_ns};
  auto b = std::make_shared<TimeBlock>(tick, c->interval_ns);
  b->accounted = bytes;
  b->refs.store(1, std::memory_order_relaxed);
  b->Add(ts_ns);
  c->open = b;
  return {std::move(b), tick, ts_ns};
}

void Store::DropBlockRef(TimeBlock* block) {
  if (block->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) Release(block->accounted);
}

void Store::DropBlockRefLocked(TimeBlock* block) {
  if (block->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) used_bytes_ -= block->accounted;
}

bool Store::AcquireRestoredBlock(TimeBlock* block) {
  // Restore runs before any writer: nothing else changes `refs` meanwhile
  // but the evictions of Reserve, which drop references of other chunks.
  if (block->refs.load(std::memory_order_acquire) > 0) {
    block->refs.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const uint64_t bytes = BlockAccounted(block->capacity());
  if (!Reserve(bytes)) return false;
  block->accounted = bytes;
  block->refs.store(1, std::memory_order_release);
  return true;
}

SeriesId Store::Register(const SeriesKey& key, const Signal& signal) {
  {
    std::shared_lock lock(table_mu_);
    auto it = by_key_.find(key);
    if (it != by_key_.end()) {
      Series* existing = series_[it->second].get();
      std::lock_guard series_lock(existing->mu);
      existing->state.present = true;
      return it->second;
    }
  }
  auto series = std::make_unique<Series>(key, signal, peak_geometry_);
  size_t agg_bytes = 0;
  if (series->agg) {
    agg_bytes = RoundUp16(sizeof(Series::Aggregates)) + kMallocOverhead +
                RoundUp16(series->agg->peak.MemoryBytes() - sizeof(PeakWindow)) + kMallocOverhead;
  }
  series->accounted = SeriesOverhead(key, signal, sizeof(Series), agg_bytes);
  const uint64_t bytes = series->accounted + HeadAccounted(kInitialHeadBytes);
  if (!Reserve(bytes)) {
    rejected_series_.fetch_add(1, std::memory_order_relaxed);
    return kInvalidSeries;
  }
  series->head_data.reset(new uint8_t[kInitialHeadBytes]());
  series->head_cap = kInitialHeadBytes;
  std::unique_lock lock(table_mu_);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {  // registered concurrently
    Release(bytes);
    return it->second;
  }
  SeriesId id = static_cast<SeriesId>(series_.size());
  if ((id >> kLookupBlockBits) >= kLookupBlocks) {  // 1M series: refuse
    Release(bytes);
    rejected_series_.fetch_add(1, std::memory_order_relaxed);
    return kInvalidSeries;
  }
  std::unique_ptr<std::atomic<Series*>[]>& block = lookup_->owned[id >> kLookupBlockBits];
  if (block == nullptr) {
    // A new block of lookup slots is accounted whole when it is allocated.
    if (!Reserve(kLookupBlock * sizeof(void*) + kMallocOverhead)) {
      Release(bytes);
      rejected_series_.fetch_add(1, std::memory_order_relaxed);
      return kInvalidSeries;
    }
    block.reset(new std::atomic<Series*>[kLookupBlock]());
    lookup_->blocks[id >> kLookupBlockBits].store(block.get(), std::memory_order_release);
  }
  block[id & (kLookupBlock - 1)].store(series.get(), std::memory_order_release);
  series_.push_back(std::move(series));
  by_key_.emplace(key, id);
  lookup_size_.store(id + 1, std::memory_order_release);
  return id;
}

std::optional<SeriesId> Store::Find(const SeriesKey& key) const {
  std::shared_lock lock(table_mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

Store::Series* Store::Lookup(SeriesId id) const {
  if (id >= lookup_size_.load(std::memory_order_acquire)) return nullptr;
  std::atomic<Series*>* block =
      lookup_->blocks[id >> kLookupBlockBits].load(std::memory_order_acquire);
  return block[id & (kLookupBlock - 1)].load(std::memory_order_acquire);
}

void Store::PushHeapLocked(HeapEntry e) {
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(),
                 [](const HeapEntry& a, const HeapEntry& b) { return a.ts_ns > b.ts_ns; });
}

bool Store::EvictOldestLocked() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(),
                [](const HeapEntry& a, const HeapEntry& b) { return a.ts_ns > b.ts_ns; });
  Series* s = heap_.back().series;
  heap_.pop_back();
  std::shared_ptr<Chunk> victim;
  bool more = false;
  int64_t next_ts = 0;
  {
    std::lock_guard lock(s->mu);
    victim = std::move(s->oldest);
    if (victim == nullptr) return true;  // cannot happen: one entry per non-empty chain
    s->oldest = victim->next;
    if (s->oldest == nullptr) s->newest = nullptr;
    s->seek.pop_front();
    --s->sealed_chunks;
    s->sealed_samples -= victim->h.count;
    more = s->oldest != nullptr;
    if (more) next_ts = s->oldest->h.min_ts;
  }
  evicted_.fetch_add(victim->h.count, std::memory_order_relaxed);
  used_bytes_ -= victim->accounted;
  if (victim->block != nullptr) DropBlockRefLocked(victim->block.get());
  if (more) PushHeapLocked({next_ts, s});
  return true;
}

bool Store::Reserve(uint64_t bytes) {
  std::lock_guard lock(evict_mu_);
  if (bytes > options_.memory_bytes) return false;
  while (used_bytes_ + bytes > options_.memory_bytes) {
    if (!EvictOldestLocked()) return false;
  }
  used_bytes_ += bytes;
  return true;
}

void Store::Release(uint64_t bytes) {
  std::lock_guard lock(evict_mu_);
  used_bytes_ -= bytes;
}

void Store::DropHead(Series* s) {
  std::shared_ptr<TimeBlock> block;
  {
    std::lock_guard lock(s->mu);
    evicted_.fetch_add(s->head.count, std::memory_order_relaxed);
    std::memset(s->head_data.get(), 0, s->head_cap);
    s->head = ChunkHeader{};
    block = std::move(s->head_block);
  }
  if (block != nullptr) DropBlockRef(block.get());
}

void Store::PrepareHead(Series* s, bool seal) {
  const size_t used = ChunkWriter::ByteSize(s->head);
  if (!seal && s->head.count < kMaxChunkSamples && s->head_cap < kMaxChunkBytes) {
    const size_t cap = std::min(kMaxChunkBytes, s->head_cap * 2);
    if (!Reserve(HeadAccounted(cap))) {
      DropHead(s);
      return;
    }
    std::unique_ptr<uint8_t[]> buf(new uint8_t[cap]());
    std::memcpy(buf.get(), s->head_data.get(), std::min(used + 1, s->head_cap));
    const size_t old_cap = s->head_cap;
    {
      std::lock_guard lock(s->mu);
      s->head_data.swap(buf);
      s->head_cap = cap;
    }
    Release(HeadAccounted(old_cap));
    return;
  }
  // Seal the head into an immutable chunk (its block reference goes with it).
  if (!LinkSealed(s, s->head, s->head_data.get(), used, s->head_block, s->head_serial)) {
    DropHead(s);
    return;
  }
  std::lock_guard lock(s->mu);
  std::memset(s->head_data.get(), 0, std::min(used + 1, s->head_cap));
  s->head = ChunkHeader{};
  s->head_block.reset();
}

uint64_t Store::SealedChunkBytes(size_t used) {
  // The make_shared block (Chunk + a 16-byte control block), the payload
  // block and the series' seek entry.
  return RoundUp16(sizeof(Chunk) + 16) + 2 * kMallocOverhead +
         RoundUp16(std::max<size_t>(used, 1)) + sizeof(Series::SeekEntry);
}

std::shared_ptr<Store::Chunk> Store::NewSealedChunk(const ChunkHeader& h, const uint8_t* data,
                                                    size_t used, std::shared_ptr<TimeBlock> block,
                                                    uint64_t serial) {
  auto c = std::make_shared<Chunk>();
  c->h = h;
  c->data.reset(new uint8_t[std::max<size_t>(used, 1)]);
  if (used > 0) std::memcpy(c->data.get(), data, used);
  c->accounted = SealedChunkBytes(used);
  c->block = std::move(block);
  c->serial = serial != 0 ? serial : NewChunkSerial();
  return c;
}

void Store::LinkChain(Series* s, std::shared_ptr<Chunk> first, Chunk* last, uint64_t n,
                      uint64_t samples) {
  const int64_t first_min_ts = first->h.min_ts;
  bool was_empty;
  {
    std::lock_guard lock(s->mu);
    was_empty = s->oldest == nullptr;
    const Chunk* k = first.get();
    if (was_empty) {
      s->oldest = std::move(first);
    } else {
      s->newest->next = std::move(first);
    }
    s->newest = last;
    // The seek list: each entry keeps the running max of max_ts.
    for (; k != nullptr; k = k->next.get()) {
      s->seek.push_back(
          {s->seek.empty() ? k->h.max_ts : std::max(s->seek.back().max_ts_so_far, k->h.max_ts),
           k->h.min_ts, k});
    }
    s->sealed_chunks += n;
    s->sealed_samples += samples;
  }
  if (was_empty) {
    std::lock_guard lock(evict_mu_);
    PushHeapLocked({first_min_ts, s});
  }
}

bool Store::LinkSealed(Series* s, const ChunkHeader& h, const uint8_t* data, size_t used,
                       std::shared_ptr<TimeBlock> block, uint64_t serial) {
  if (!Reserve(SealedChunkBytes(used))) return false;
  std::shared_ptr<Chunk> c = NewSealedChunk(h, data, used, std::move(block), serial);
  Chunk* raw = c.get();
  LinkChain(s, std::move(c), raw, 1, h.count);
  return true;
}

void Store::Dump(const std::function<bool(const SeriesDump&)>& fn) const {
  uint32_t n;
  {
    std::shared_lock lock(table_mu_);
    n = static_cast<uint32_t>(series_.size());
  }
  SeriesDump dump;
  for (SeriesId id = 0; id < n; ++id) {
    ReadView view;
    if (!View(id, INT64_MIN, INT64_MAX, &view)) continue;
    dump.key = &view.series->key;
    dump.signal = &view.series->signal;
    {
      std::lock_guard lock(view.series->mu);
      dump.state = view.series->state;
    }
    dump.chunks.clear();
    view.ForEachChunk(
        [&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block, const Chunk*) {
          dump.chunks.push_back({h, data, block});
        });
    if (!fn(dump)) return;
  }
}

SeriesId Store::Restore(const SeriesKey& key, const Signal& signal, const SeriesState& state,
                        std::vector<EncodedChunk> chunks, uint64_t* chunks_dropped) {
  std::vector<RestoredChunk> refs;
  refs.reserve(chunks.size());
  for (EncodedChunk& c : chunks) refs.push_back({c.header, c.data.data(), std::move(c.block)});
  const SeriesId id = RestoreSeries(key, signal, state);
  if (id == kInvalidSeries) {
    if (chunks_dropped != nullptr) {
      *chunks_dropped = 0;
      for (const RestoredChunk& c : refs) *chunks_dropped += c.header.count > 0 ? 1 : 0;
    }
    return kInvalidSeries;
  }
  RestoreChunks(id, refs, /*may_evict=*/true, chunks_dropped);
  return id;
}

void Store::Append(SeriesId id, int64_t ts_ns, uint64_t raw) {
  Series* s = Lookup(id);
  if (s == nullptr) return;
  AppendEvent ev;
  AppendSample(id, s, nullptr, ts_ns, ts_ns, raw, &ev);
  if (observer_ != nullptr) observer_->OnAppend(ev);
}

void Store::Append(SeriesId id, const TickRef& tick, uint64_t raw) {
  Series* s = Lookup(id);
  if (s == nullptr) return;
  AppendEvent ev;
  if (tick.block == nullptr) {
    AppendSample(id, s, nullptr, tick.ts_ns, tick.ts_ns, raw, &ev);
  } else {
    AppendSample(id, s, tick.block, tick.tick, tick.ts_ns, raw, &ev);
  }
  if (observer_ != nullptr) observer_->OnAppend(ev);
}

void Store::PrefetchSeries(const Series* s) {
  // What an append reads and writes of the series itself: the signal (scale,
  // family), the lock, the counter tracker, the derived state and the head.
  PrefetchForWrite(&s->signal, &s->key);
}

void Store::PrefetchAppendState(const Series* s, int64_t ts_ns) {
  // The head chunk's write position and what an append touches of the
  // aggregate windows: their fields and the burst window's bucket of ts_ns.
  const uint8_t* write = s->head_data.get() + ChunkWriter::ByteSize(s->head);
  PrefetchForWrite(write, write + kMaxSampleBytes);
  if (s->agg != nullptr) {
    PrefetchForWrite(s->agg.get(), s->agg->burst.ring());
    const void* bucket = s->agg->burst.BucketOf(ts_ns);
    PrefetchForWrite(bucket, static_cast<const uint8_t*>(bucket) + BurstWindow::kBucketBytes);
  }
}

void Store::Append(const TickRef& tick, absl::Span<const SeriesReading> readings) {
  // A software pipeline over the readings: the series of reading i + 2k is
  // looked up and its own fields prefetched; those of reading i + k are in
  // cache by then, so what they point to is prefetched; reading i is
  // appended. k readings' appends cover one prefetch's latency.
  constexpr size_t kAhead = 4;
  constexpr size_t kRing = 2 * kAhead;
  Series* ring[kRing] = {};
  // The observer's events, delivered kEvents at a time (one detector-engine
  // lock for all of them) after their appends.
  constexpr size_t kEvents = 32;
  AppendEvent events[kEvents];
  size_t pending = 0;
  const size_t n = readings.size();
  for (size_t j = 0; j < std::min(n, kRing); ++j) {
    ring[j] = Lookup(readings[j].id);
    if (ring[j] != nullptr) PrefetchSeries(ring[j]);
  }
  for (size_t j = 0; j < std::min(n, kAhead); ++j) {
    if (ring[j] != nullptr) PrefetchAppendState(ring[j], tick.ts_ns);
  }
  for (size_t i = 0; i < n; ++i) {
    Series* s = ring[i % kRing];
    if (i + kAhead < n) {
      Series* next = ring[(i + kAhead) % kRing];
      if (next != nullptr) PrefetchAppendState(next, tick.ts_ns);
    }
    if (s != nullptr) {
      AppendEvent& ev = events[pending];  // AppendSample sets every field
      if (tick.block == nullptr) {
        AppendSample(readings[i].id, s, nullptr, tick.ts_ns, tick.ts_ns, readings[i].raw, &ev);
      } else {
        AppendSample(readings[i].id, s, tick.block, tick.tick, tick.ts_ns, readings[i].raw, &ev);
      }
      if (observer_ != nullptr && ++pending == kEvents) {
        observer_->OnAppends(absl::MakeConstSpan(events, pending));
        pending = 0;
      }
    }
    if (i + kRing < n) {
      Series* far = Lookup(readings[i + kRing].id);
      ring[i % kRing] = far;
      if (far != nullptr) PrefetchSeries(far);
    }
  }
  if (pending > 0) observer_->OnAppends(absl::MakeConstSpan(events, pending));
}

void Store::AppendSample(SeriesId id, Series* s, const std::shared_ptr<TimeBlock>& block, int64_t t,
                         int64_t ts_ns, uint64_t raw, AppendEvent* ev) {
  // Writer-owned head fields: read without the lock (see Series).
  if (s->head.count > 0 && s->head_block != block) {
    PrepareHead(s, /*seal=*/true);
  } else if (s->head.count >= kMaxChunkSamples ||
             ChunkWriter::ByteSize(s->head) + kMaxSampleBytes > s->head_cap) {
    PrepareHead(s, /*seal=*/false);
  }
  {
    std::lock_guard lock(s->mu);
    if (s->head.count == 0) {
      s->head_serial = NewChunkSerial();
      if (s->head_block != block) {
        // An empty head holds no block (seal and DropHead let go of it).
        s->head_block = block;
        if (block != nullptr) block->refs.fetch_add(1, std::memory_order_relaxed);
      }
    }
    AppendLocked(s, t, ts_ns, raw, ev);
  }
  ev->id = id;
  ev->key = &s->key;
  ev->signal = &s->signal;
}

void Store::AppendLocked(Series* s, int64_t t, int64_t ts_ns, uint64_t raw, AppendEvent* ev) {
  ChunkWriter::Append(&s->head, s->head_data.get(), t, ts_ns, raw);
  SeriesState& st = s->state;
  const int64_t prev_ts = st.last_ts_ns;
  CounterUpdate u = s->tracker.Update(raw);
  const double scale = s->signal.scale;
  switch (u.event) {
    case CounterEvent::kGauge:
      st.total = static_cast<double>(raw) * scale;
      break;
    case CounterEvent::kFirst:
    case CounterEvent::kSaturated:
      if (!st.has_value)
        st.total = static_cast<double>(raw) * scale;
      else
        st.total += static_cast<double>(u.delta) * scale;
      break;
    case CounterEvent::kReset:
      ++st.resets;
      break;
    case CounterEvent::kNormal:
    case CounterEvent::kWrapped:
      st.total += static_cast<double>(u.delta) * scale;
      break;
  }
  const int64_t dt = ts_ns - prev_ts;
  st.rate_valid = u.rate_valid && st.has_value && dt > 0;
  st.last_rate = st.rate_valid ? static_cast<double>(u.delta) * scale * 1e9 / dt : 0;
  st.saturated = s->tracker.saturated();
  ev->start_ns = st.has_value ? prev_ts : ts_ns;
  ev->end_ns = ts_ns;
  ev->gauge = u.event == CounterEvent::kGauge;
  ev->rate_valid = st.rate_valid;
  ev->rate = st.last_rate;
  ev->delta = st.rate_valid ? static_cast<double>(u.delta) * scale : 0;
  ev->value = st.total;
  ev->microburst = false;
  if (s->agg != nullptr && st.has_value) {
    s->agg->peak.Add(ts_ns, st.last_rate, st.rate_valid);
    st.peak_valid = s->agg->peak.peak(&st.peak_rate);
    if (s->agg->burst.Add(ts_ns, dt, static_cast<double>(u.delta) * scale, st.last_rate,
                          st.rate_valid, options_.burst_factor, s->agg->floor)) {
      ++st.microbursts;
      ev->microburst = true;
    }
  }
  st.has_value = true;
  st.last_ts_ns = ts_ns;
  st.last_raw = raw;
  ++st.samples;
}

void Store::SetPresent(SeriesId id, bool present) {
  Series* s = Lookup(id);
  if (s == nullptr) return;
  std::lock_guard lock(s->mu);
  s->state.present = present;
}

std::vector<SeriesSnapshot> Store::Snapshot() const {
  std::vector<Series*> all;
  {
    std::shared_lock lock(table_mu_);
    all.reserve(series_.size());
    for (const auto& s : series_) all.push_back(s.get());
  }
  std::vector<SeriesSnapshot> out;
  out.reserve(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    SeriesSnapshot snap;
    snap.id = static_cast<SeriesId>(i);
    snap.key = &all[i]->key;
    snap.signal = &all[i]->signal;
    {
      std::lock_guard lock(all[i]->mu);
      snap.state = all[i]->state;
    }
    out.push_back(std::move(snap));
  }
  return out;
}

std::optional<SeriesSnapshot> Store::Get(SeriesId id) const {
  Series* s = Lookup(id);
  if (s == nullptr) return std::nullopt;
  SeriesSnapshot snap{id, &s->key, &s->signal, {}};
  std::lock_guard lock(s->mu);
  snap.state = s->state;
  return snap;
}

bool Store::View(SeriesId id, int64_t from_ns, int64_t to_ns, ReadView* view) const {
  Series* s = Lookup(id);
  if (s == nullptr) return false;
  view->series = s;
  std::lock_guard lock(s->mu);
  view->oldest = s->oldest;
  const auto [it, end] = s->SeekRange(from_ns, to_ns);
  if (it != end) {
    view->first = it->chunk;
    view->last = std::prev(end)->chunk;
  }
  view->head = s->head;
  if (s->head.count > 0 && s->head.max_ts >= from_ns && s->head.min_ts <= to_ns) {
    const uint8_t* p = s->head_data.get();
    view->head_data.assign(p, p + ChunkWriter::ByteSize(s->head));
    view->head_block = s->head_block;
    view->head_serial = s->head_serial;
  } else if (s->head.count > 0) {
    // Not needed for the range: keep only what the header says (last sample).
    view->head.bits = 0;
    view->head.count = 0;
  }
  return true;
}

std::vector<Sample> Store::ReadRange(SeriesId id, int64_t from_ns, int64_t to_ns) const {
  std::vector<Sample> out;
  ReadView v;
  if (from_ns > to_ns || !View(id, from_ns, to_ns, &v)) return out;
  std::vector<Sample> tmp;
  v.ForEachChunk(
      [&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block, const Chunk* chunk) {
        if (h.max_ts < from_ns || h.min_ts > to_ns) return;
        tmp.clear();
        if (!DecodeSamples(h, data, block, &tmp)) MarkCorrupt(chunk);
        for (const Sample& s : tmp) {
          if (s.ts_ns >= from_ns && s.ts_ns <= to_ns) out.push_back(s);
        }
      });
  return out;
}

void Store::ScanRange(SeriesId id, int64_t from_ns, int64_t to_ns, RangeScanner* scanner) const {
  ReadView v;
  if (from_ns > to_ns || !View(id, from_ns, to_ns, &v)) return;
  const CounterSemantics sem = v.series->signal.semantics;
  std::vector<Sample> tmp;  // the decoded chunk
  std::vector<Sample> in_range;
  // Decodes a chunk into `tmp`; false (counted) when it is corrupt.
  auto decode = [&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
                    const Chunk* chunk) {
    tmp.clear();
    if (DecodeSamples(h, data, block, &tmp)) return true;
    MarkCorrupt(chunk);
    return false;
  };
  // Hands the samples of `tmp` within the range to the scanner (`h`: their
  // header, real timestamps).
  auto hand_over = [&](const ChunkHeader& h) {
    if (h.min_ts >= from_ns && h.max_ts <= to_ns) {
      scanner->OnSamples(tmp);
      return;
    }
    in_range.clear();
    for (const Sample& s : tmp) {
      if (s.ts_ns >= from_ns && s.ts_ns <= to_ns) in_range.push_back(s);
    }
    if (!in_range.empty()) scanner->OnSamples(in_range);
  };
  // The samples of a chunk the scanner wants decoded, segment by segment
  // through its seek index (SegmentCache): each segment that overlaps the
  // range is planned like a chunk of its own. False when the chunk is
  // corrupt (counted).
  // The samples of one segment (header `sh`) from its checkpoint, decoded in
  // batches into `buf` with their real timestamps and handed over as far as
  // they are in the range; once the scanner is satisfied (the samples after
  // those matter only through the last one), the rest of the segment is
  // offered again through PlanChunk and not decoded when it plans kSkip.
  // False when the chunk is corrupt (not counted here).
  constexpr uint32_t kBatch = 16;
  Sample buf[kBatch];
  auto stream = [&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
                    ChunkCheckpoint cp, const ChunkHeader& sh, uint32_t left) {
    // Ticks only grow within a chunk: the block's timestamps up to the
    // chunk's last tick cover every sample.
    // In locals: the loop below writes samples, which the compiler would
    // otherwise assume may alias them (and reload them per sample).
    const std::vector<int64_t>* ticks = block != nullptr ? &TickTimes(block, h.last_t) : nullptr;
    const int64_t* const tick_ts = ticks != nullptr ? ticks->data() : nullptr;
    const uint64_t tick_count = ticks != nullptr ? ticks->size() : 0;
    const int64_t first_tick = block != nullptr ? block->first_tick : 0;
    const int64_t lo = from_ns, hi = to_ns;
    bool offered = false;
    while (left > 0) {
      bool ok = true;
      const uint32_t got = DecodeChunkInto(h, data, &cp, std::min(left, kBatch), buf, &ok);
      if (!ok || got == 0) return false;
      left -= got;
      uint32_t m = 0;
      for (uint32_t i = 0; i < got; ++i) {
        int64_t ts = buf[i].ts_ns;
        if (tick_ts != nullptr) {
          const uint64_t k = static_cast<uint64_t>(ts - first_tick);
          if (k >= tick_count) return false;
          ts = tick_ts[k];
        }
        if (ts >= lo && ts <= hi) buf[m++] = Sample{ts, buf[i].value};
      }
      if (m > 0) scanner->OnSamples(absl::MakeConstSpan(buf, m));
      if (left > 0 && !offered && scanner->Satisfied()) {
        if (scanner->PlanChunk(sh) == RangeScanner::Plan::kSkip) return true;
        offered = true;
      }
    }
    return true;
  };
  // A segment whose samples in (lo, hi] the scanner takes as one summary
  // (RangeScanner::SummarySpan): decoded up to its first sample after hi,
  // those before the span and after it handed over as samples (as far as
  // they are in the range), the span's offered as the difference of its first
  // and last sample (the segment telescopes); when the scanner refuses that,
  // they are handed over too. False when the chunk is corrupt (not counted
  // here).
  auto split = [&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
                   const Segment& seg, int64_t lo, int64_t hi) {
    const ChunkHeader& sh = seg.summary.header;
    assert(sh.count <= kSegmentSamples);
    const std::vector<int64_t>* ticks = block != nullptr ? &TickTimes(block, h.last_t) : nullptr;
    Sample all[kSegmentSamples];
    ChunkCheckpoint cp = seg.start;
    uint32_t n = 0;
    uint32_t i0 = sh.count;  // the first sample after lo
    uint32_t i1 = sh.count;  // ... after hi
    // The last sample at or before hi: the segment's last (then the span's
    // samples after its first are not decoded), or the one before i1.
    const bool to_end = sh.last_ts <= hi;
    while (n < sh.count && i1 == sh.count && !(to_end && i0 < sh.count)) {
      bool ok = true;
      const uint32_t got =
          DecodeChunkInto(h, data, &cp, std::min(sh.count - n, kBatch), all + n, &ok);
      if (!ok || got == 0 ||
          (ticks != nullptr &&
           !MapTickIndexes(*ticks, block->first_tick, absl::MakeSpan(all + n, got)))) {
        return false;
      }
      for (uint32_t i = n; i < n + got; ++i) {  // the timestamps increase (telescopes)
        if (i0 == sh.count && all[i].ts_ns > lo) i0 = i;
        if (all[i].ts_ns > hi) {
          i1 = i;
          break;
        }
      }
      n += got;
    }
    auto hand = [&](uint32_t begin, uint32_t end) {
      uint32_t m = 0;
      for (uint32_t i = begin; i < end; ++i) {
        if (all[i].ts_ns >= from_ns && all[i].ts_ns <= to_ns) all[begin + m++] = all[i];
      }
      if (m > 0) scanner->OnSamples(absl::MakeConstSpan(all + begin, m));
    };
    i0 = std::min(i0, i1);
    hand(0, i0);
    if (i1 > i0) {
      ChunkSummary span;
      span.header = sh;
      span.header.count = i1 - i0;
      span.header.first_ts = span.header.min_ts = span.header.first_t = all[i0].ts_ns;
      span.header.first_value = all[i0].value;
      if (i1 < sh.count) {
        span.header.last_ts = span.header.max_ts = span.header.last_t = all[i1 - 1].ts_ns;
        span.header.last_value = all[i1 - 1].value;
      }
      const ChunkHeader& sp = span.header;
      span.valid_delta = static_cast<double>(sp.last_value - sp.first_value);
      span.valid_ns = sp.last_ts - sp.first_ts;
      span.max_valid_ns = seg.summary.max_valid_ns;  // a bound: not narrowed to the span
      span.above32 = seg.summary.above32;
      span.all_valid = true;  // max_rate: not known
      if (scanner->OnSummary(span)) {
        if (i1 == sh.count) return true;
      } else {
        hand(i0, std::min(n, i1));
      }
    }
    hand(std::min(n, i1), n);
    return n == sh.count || stream(h, data, block, cp, sh, sh.count - n);
  };
  SegmentCache& cache = ThreadSegmentCache();
  auto by_segments = [&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
                         const Chunk* chunk, uint64_t serial) {
    SegmentIndex* idx = cache.Slot(serial);
    if (!ExtendIndex(&cache, idx, sem, h, data, block, chunk != nullptr, &tmp)) {
      MarkCorrupt(chunk);
      return false;
    }
    // One segment, planned like a chunk; false when the chunk is corrupt.
    auto scan_segment = [&](const Segment& seg) {
      const ChunkHeader& sh = seg.summary.header;
      const RangeScanner::Plan plan = scanner->PlanChunk(sh);
      if (plan == RangeScanner::Plan::kSkip) return true;
      if (plan == RangeScanner::Plan::kSummary && scanner->OnSummary(seg.summary)) return true;
      const std::pair<int64_t, int64_t> span =
          Telescopes(seg.summary) ? scanner->SummarySpan(sh) : std::pair<int64_t, int64_t>{0, 0};
      return span.first < span.second ? split(h, data, block, seg, span.first, span.second)
                                      : stream(h, data, block, seg.start, sh, sh.count);
    };
    const SegmentBounds* const bounds = idx->bounds.data();
    const auto [first, last] = SegmentSpan(*idx, from_ns, to_ns);
    for (size_t k = first; k < last; ++k) {
      if (bounds[k].max_ts < from_ns || bounds[k].min_ts > to_ns) continue;
      if (!scan_segment(idx->segments[k])) {
        MarkCorrupt(chunk);
        return false;
      }
    }
    if (idx->next.index >= h.count) return true;
    // The rest: decoded for its header and summary once per chunk length
    // (and handed over from there when the scanner needs its samples then),
    // later scanned like a segment from its checkpoint.
    if (idx->rest_count != h.count) {
      ChunkCheckpoint cp = idx->next;
      tmp.clear();
      if (!DecodeChunkFrom(h, data, &cp, h.count, &tmp) || tmp.empty() ||
          (block != nullptr && !MapTicks(block, tmp.back().ts_ns, &tmp, 0))) {
        idx->rest_count = 0;
        MarkCorrupt(chunk);
        return false;
      }
      idx->rest.summary = ChunkSummary{};
      idx->rest.summary.header = HeaderOf(tmp);
      SummarizeSamples(sem, tmp, &idx->rest.summary);
      idx->rest.start = idx->next;
      idx->rest_count = h.count;
      const ChunkHeader& rh = idx->rest.summary.header;
      if (rh.max_ts < from_ns || rh.min_ts > to_ns) return true;
      const RangeScanner::Plan plan = scanner->PlanChunk(rh);
      if (plan == RangeScanner::Plan::kSkip) return true;
      if (plan == RangeScanner::Plan::kSummary && scanner->OnSummary(idx->rest.summary)) {
        return true;
      }
      hand_over(rh);
      return true;
    }
    const ChunkHeader& rh = idx->rest.summary.header;
    if (rh.max_ts < from_ns || rh.min_ts > to_ns) return true;
    if (!scan_segment(idx->rest)) {
      MarkCorrupt(chunk);
      return false;
    }
    return true;
  };
  v.ForEachChunk([&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block,
                     const Chunk* chunk) {
    if (h.max_ts < from_ns || h.min_ts > to_ns) return;
    const RangeScanner::Plan plan = scanner->PlanChunk(h);
    if (plan == RangeScanner::Plan::kSkip) return;
    if (plan == RangeScanner::Plan::kSamples || chunk == nullptr) {
      // A long chunk: by segments, which the scanner may plan otherwise.
      if (h.count > 2 * kSegmentSamples) {
        by_segments(h, data, block, chunk, chunk != nullptr ? chunk->serial : v.head_serial);
        return;
      }
      if (decode(h, data, block, chunk)) hand_over(h);
      return;
    }
    ChunkSummary sum;
    sum.header = h;
    if (chunk->summary_state.load(std::memory_order_acquire) == kSummaryReady) {
      sum.valid_delta = chunk->summary_delta;
      sum.valid_ns = chunk->summary_ns;
      sum.max_valid_ns = chunk->summary_max_ns;
      sum.wrapped = (chunk->summary_flags & 1) != 0;
      sum.above32 = (chunk->summary_flags & 2) != 0;
    } else {
      if (!decode(h, data, block, chunk)) return;
      SummarizeSamples(sem, tmp, &sum);
      uint8_t expected = kSummaryNone;
      if (chunk->summary_state.compare_exchange_strong(expected, kSummaryBusy,
                                                       std::memory_order_acquire)) {
        chunk->summary_delta = sum.valid_delta;
        chunk->summary_ns = sum.valid_ns;
        chunk->summary_max_ns = sum.max_valid_ns;
        chunk->summary_flags = static_cast<uint8_t>((sum.wrapped ? 1 : 0) | (sum.above32 ? 2 : 0));
        chunk->summary_state.store(kSummaryReady, std::memory_order_release);
      }
      // Decoded already: an unusable summary gets these samples.
      if (!scanner->OnSummary(sum)) hand_over(h);
      return;
    }
    if (scanner->OnSummary(sum)) return;
    // The cached summary does not suffice (it keeps no all_valid or
    // max_rate): a long chunk by segments, which have theirs.
    if (h.count > 2 * kSegmentSamples) {
      by_segments(h, data, block, chunk, chunk->serial);
    } else if (decode(h, data, block, chunk)) {
      hand_over(h);
    }
  });
}

// ---------------------------------------------------------------------------
// ScanAhead.

// What the read-ahead of one series has found so far.
struct Store::ScanAhead::Cursor {
  // A chunk reaching the range (`chunk` null: the head, read by segments).
  struct Part {
    const Chunk* chunk = nullptr;
    uint64_t serial = 0;            // 0: nothing more to read ahead of this part
    const uint8_t* data = nullptr;  // a sealed chunk's stream
    int64_t min_ts = 0, max_ts = 0;
    uint32_t count = 0;
    size_t first = 0, last = 0;  // the segments that may overlap the range
  };
  static constexpr size_t kParts = 6;
  const Series* series = nullptr;  // null: nothing (more) to read ahead
  std::shared_ptr<Chunk> hold;     // keeps the chain of `parts` alive
  Part parts[kParts];
  size_t n = 0;
};

Store::ScanAhead::ScanAhead(const Store& store, absl::Span<const SeriesId> ids, int64_t from_ns,
                            int64_t to_ns, absl::Span<const std::pair<int64_t, int64_t>> decoded)
    : store_(store),
      ids_(ids),
      from_ns_(from_ns),
      to_ns_(to_ns),
      decoded_(decoded.begin(), decoded.end()),
      cursors_(new Cursor[kDepth]) {}

Store::ScanAhead::~ScanAhead() = default;

void Store::ScanAhead::Before(size_t i) {
  // ids[i + kDepth] starts (step 0), ids[i + 1] takes its last step: each
  // step's prefetches have a whole scan's time to arrive before the next
  // step reads them.
  for (size_t step = 0; step < kDepth; ++step) {
    const size_t j = i + kDepth - step;
    if (j >= ids_.size()) continue;
    Cursor* c = &cursors_[j % kDepth];
    if (step == 0) {
      c->series = nullptr;
      c->hold.reset();
      c->n = 0;
    }
    Step(c, step == 0 ? ids_[j] : 0, step);
  }
}

void Store::ScanAhead::Step(Cursor* c, SeriesId id, size_t step) {
  // Whether [min_ts, max_ts] holds a time of a decoded range.
  auto decodes = [this](int64_t min_ts, int64_t max_ts) {
    for (const auto& [a, b] : decoded_) {
      if (max_ts >= a && min_ts <= b) return true;
    }
    return false;
  };
  // The slot of part `p` if it still indexes the part's chunk.
  const SegmentCache& cache = ThreadSegmentCache();
  auto slot = [&cache](const Cursor::Part& p) -> const SegmentIndex* {
    if (p.serial == 0) return nullptr;
    const SegmentIndex* idx = cache.SlotOf(p.serial);
    return idx != nullptr && idx->serial == p.serial && !idx->bounds.empty() ? idx : nullptr;
  };
  switch (step) {
    case 0: {  // the series' own fields (View: lock, seek list, head)
      const Series* s = store_.Lookup(id);
      if (s == nullptr) return;
      c->series = s;
      PrefetchLines(&s->signal.semantics, &s->signal.semantics + 1, 1);
      PrefetchLines(&s->mu, s + 1, 16);
      return;
    }
    case 1: {  // the chunks reaching the range
      const Series* s = c->series;
      if (s == nullptr) return;
      std::unique_lock lock(s->mu, std::try_to_lock);
      if (!lock.owns_lock()) {
        c->series = nullptr;
        return;
      }
      const auto [it, end] = s->SeekRange(from_ns_, to_ns_);
      if (it != end) c->hold = s->oldest;
      for (auto e = it; e != end && c->n < Cursor::kParts; ++e) {
        Cursor::Part& p = c->parts[c->n++];
        p.chunk = e->chunk;
        PrefetchLines(p.chunk, p.chunk + 1, 4);
      }
      const ChunkHeader& h = s->head;
      if (h.count > 2 * kSegmentSamples && h.max_ts >= from_ns_ && h.min_ts <= to_ns_ &&
          c->n < Cursor::kParts && decodes(h.min_ts, h.max_ts)) {
        Cursor::Part& p = c->parts[c->n++];
        p.chunk = nullptr;
        p.serial = s->head_serial;
        p.min_ts = h.min_ts;
        p.max_ts = h.max_ts;
        p.count = h.count;
        const uint8_t* data = s->head_data.get();
        PrefetchLines(data, data + ChunkWriter::ByteSize(h), 32);  // View copies it
      }
      return;
    }
    case 2:  // the seek-index slots of the chunks the scan will likely decode
      for (size_t k = 0; k < c->n; ++k) {
        Cursor::Part& p = c->parts[k];
        if (p.chunk != nullptr) {
          const ChunkHeader& h = p.chunk->h;
          if (h.count <= 2 * kSegmentSamples || h.max_ts < from_ns_ || h.min_ts > to_ns_ ||
              !decodes(h.min_ts, h.max_ts)) {
            continue;
          }
          p.serial = p.chunk->serial;
          p.data = p.chunk->data.get();
          p.min_ts = h.min_ts;
          p.max_ts = h.max_ts;
          p.count = h.count;
        }
        const SegmentIndex* idx = cache.SlotOf(p.serial);
        if (idx == nullptr) {
          p.serial = 0;
          continue;
        }
        PrefetchLines(idx, idx + 1, 4);
      }
      return;
    case 3:  // their segment bounds, where the range is expected in them
      for (size_t k = 0; k < c->n; ++k) {
        Cursor::Part& p = c->parts[k];
        const SegmentIndex* idx = slot(p);
        if (idx == nullptr) continue;
        const size_t n = idx->bounds.size();
        // Samples spread evenly over [min_ts, max_ts]: the segment at t.
        auto at = [&p, n](int64_t t) -> size_t {
          if (t <= p.min_ts) return 0;
          const double f = (static_cast<double>(t) - static_cast<double>(p.min_ts)) /
                           (static_cast<double>(p.max_ts) - static_cast<double>(p.min_ts) + 1);
          return std::min(n - 1, static_cast<size_t>(f * p.count / kSegmentSamples));
        };
        const size_t a = at(from_ns_), b = at(to_ns_);
        const SegmentBounds* bounds = idx->bounds.data();
        // The binary searches' first probes, then the expected span.
        PrefetchLines(bounds + n / 2, bounds + n / 2 + 1, 1);
        PrefetchLines(bounds + n / 4, bounds + n / 4 + 1, 1);
        PrefetchLines(bounds + 3 * n / 4, bounds + 3 * n / 4 + 1, 1);
        PrefetchLines(bounds + (a > 0 ? a - 1 : 0), bounds + std::min(n, b + 2), 12);
      }
      return;
    case 4:  // the records of the segments the scan will plan
      for (size_t k = 0; k < c->n; ++k) {
        Cursor::Part& p = c->parts[k];
        const SegmentIndex* idx = slot(p);
        if (idx == nullptr) continue;
        std::tie(p.first, p.last) = SegmentSpan(*idx, from_ns_, to_ns_);
        const Segment* segs = idx->segments.data();
        const SegmentBounds* bounds = idx->bounds.data();
        PrefetchLines(segs + p.first, segs + p.last, 6);  // the walk's start
        for (size_t g = p.first; g < p.last; ++g) {
          if (decodes(bounds[g].min_ts, bounds[g].max_ts)) PrefetchLines(segs + g, segs + g + 1, 3);
        }
      }
      return;
    case 5:  // the streams where the scan starts decoding
      for (size_t k = 0; k < c->n; ++k) {
        Cursor::Part& p = c->parts[k];
        const SegmentIndex* idx = slot(p);
        if (idx == nullptr || p.data == nullptr) continue;  // the head: View copies its stream
        const size_t last = std::min(p.last, idx->segments.size());
        const Segment* segs = idx->segments.data();
        const SegmentBounds* bounds = idx->bounds.data();
        for (size_t g = p.first; g < last; ++g) {
          if (!decodes(bounds[g].min_ts, bounds[g].max_ts)) continue;
          const uint8_t* at = p.data + segs[g].start.bit / 8;
          PrefetchLines(at, at + 192, 3);
        }
      }
      return;
    default:
      return;
  }
}

absl::StatusOr<CounterDelta> Store::Delta(SeriesId id, int64_t from_ns, int64_t to_ns) const {
  if (from_ns > to_ns) {
    return absl::InvalidArgumentError(absl::StrCat("delta: from ", from_ns, " after to ", to_ns));
  }
  ReadView v;
  // The whole head is needed: it may hold the baseline or the end.
  if (!View(id, INT64_MIN, INT64_MAX, &v)) {
    return absl::NotFoundError(absl::StrCat("delta: unknown series ", id));
  }
  const CounterSemantics sem = v.series->signal.semantics;
  if (sem.kind == CounterKind::kGauge) {
    return absl::FailedPreconditionError(
        absl::StrCat("delta: series ", id, " (", v.series->key.name, ") is a gauge"));
  }
  CounterDelta d;
  std::optional<Sample> baseline;
  bool started = false;
  std::vector<uint64_t> values;
  auto take = [&](const Sample& s) {
    if (s.ts_ns >= to_ns) d.covers_to = true;
    if (s.ts_ns <= from_ns && !started) {
      baseline = s;
      return;
    }
    if (s.ts_ns < from_ns || s.ts_ns > to_ns) return;
    if (!started) {
      started = true;
      if (baseline) {
        d.first_ts_ns = baseline->ts_ns;
        values.push_back(baseline->value);
      } else {
        d.first_ts_ns = s.ts_ns;
      }
    }
    values.push_back(s.value);
    d.last_ts_ns = s.ts_ns;
  };
  std::vector<Sample> tmp;
  v.ForEachChunk(
      [&](const ChunkHeader& h, const uint8_t* data, const TimeBlock* block, const Chunk* chunk) {
        if (!started && h.max_ts <= from_ns) {
          // Entirely at or before `from`: only its last sample can be the baseline.
          baseline = Sample{h.last_ts, h.last_value};
          if (h.max_ts >= to_ns) d.covers_to = true;
          return;
        }
        if (h.min_ts > to_ns) {
          d.covers_to = true;
          return;
        }
        tmp.clear();
        if (!DecodeSamples(h, data, block, &tmp)) MarkCorrupt(chunk);
        for (const Sample& s : tmp) take(s);
      });
  if (!started && baseline) {
    d.first_ts_ns = d.last_ts_ns = baseline->ts_ns;
    values.push_back(baseline->value);
  }
  d.samples = values.size();
  if (!values.empty()) {
    d.raw_delta = CounterDeltaOver(sem, values.data(), values.size(), &d.resets, &d.saturated);
    d.delta = static_cast<double>(d.raw_delta) * v.series->signal.scale;
    d.covers_from = d.first_ts_ns <= from_ns;
  }
  return d;
}

void Store::MarkCorrupt(const Chunk* chunk) const {
  if (chunk != nullptr && !chunk->corrupt.exchange(true, std::memory_order_relaxed)) {
    corrupt_chunks_.fetch_add(1, std::memory_order_relaxed);
  }
}

StoreStats Store::Stats() const {
  StoreStats stats;
  std::vector<Series*> all;
  {
    std::shared_lock lock(table_mu_);
    for (const auto& s : series_) all.push_back(s.get());
  }
  stats.series = all.size();
  for (Series* s : all) {
    std::lock_guard lock(s->mu);
    stats.samples += s->sealed_samples + s->head.count;
    stats.chunks += s->sealed_chunks;
    int64_t oldest = 0;
    bool has = false;
    if (s->oldest != nullptr) {
      oldest = s->oldest->h.min_ts;
      has = true;
    } else if (s->head.count > 0) {
      oldest = s->head.min_ts;
      has = true;
    }
    if (has && (stats.oldest_ts_ns == 0 || oldest < stats.oldest_ts_ns)) {
      stats.oldest_ts_ns = oldest;
    }
  }
  {
    std::lock_guard lock(evict_mu_);
    stats.bytes = used_bytes_;
  }
  stats.evicted_samples = evicted_.load(std::memory_order_relaxed);
  stats.corrupt_chunks = corrupt_chunks_.load(std::memory_order_relaxed);
  stats.rejected_series = rejected_series_.load(std::memory_order_relaxed);
  stats.seek_index_bytes =
      static_cast<uint64_t>(std::max<int64_t>(0, SegmentCache::ProcessBytes()));
  return stats;
}

// ---------------------------------------------------------------------------
// Restore in two steps (RestoreSeries, RestoreChunks).

SeriesId Store::RestoreSeries(const SeriesKey& key, const Signal& signal,
                              const SeriesState& state) {
  if (Find(key).has_value()) return kInvalidSeries;
  const SeriesId id = Register(key, signal);
  Series* s = Lookup(id);
  if (s == nullptr) return kInvalidSeries;
  std::lock_guard lock(s->mu);
  SeriesState& st = s->state;
  st.has_value = state.has_value;
  st.present = false;
  st.last_ts_ns = state.last_ts_ns;
  st.last_raw = state.last_raw;
  st.total = state.total;
  st.resets = state.resets;
  st.saturated = state.saturated;
  st.samples = state.samples;
  st.microbursts = state.microbursts;
  // Rates and the peak window start again with the next poll.
  st.last_rate = 0;
  st.rate_valid = false;
  st.peak_rate = 0;
  st.peak_valid = false;
  s->tracker.Restore(state.has_value, state.saturated, state.last_raw);
  return id;
}

bool Store::RestoreChunks(SeriesId id, absl::Span<const RestoredChunk> chunks, bool may_evict,
                          uint64_t* chunks_dropped) {
  uint64_t dropped = 0;
  for (const RestoredChunk& c : chunks) dropped += c.header.count > 0 ? 1 : 0;
  if (chunks_dropped != nullptr) *chunks_dropped = dropped;
  Series* s = Lookup(id);
  if (s == nullptr) return true;
  if (!may_evict) {
    if (!LinkRestoredRun(s, chunks)) return false;
    if (chunks_dropped != nullptr) *chunks_dropped = 0;
    return true;
  }
  for (const RestoredChunk& c : chunks) {
    if (c.header.count == 0) continue;
    // A chunk whose block the budget cannot hold is dropped.
    if (c.block != nullptr && !AcquireRestoredBlock(c.block.get())) {
      evicted_.fetch_add(c.header.count, std::memory_order_relaxed);
      continue;
    }
    if (LinkSealed(s, c.header, c.data, ChunkWriter::ByteSize(c.header), c.block)) {
      --dropped;
    } else {
      if (c.block != nullptr) DropBlockRef(c.block.get());
      evicted_.fetch_add(c.header.count, std::memory_order_relaxed);
    }
  }
  if (chunks_dropped != nullptr) *chunks_dropped = dropped;
  return true;
}

bool Store::LinkRestoredRun(Series* s, absl::Span<const RestoredChunk> chunks) {
  // The bytes LinkSealed accounts per chunk (SealedChunkBytes), and the
  // blocks that no chunk holds yet (a run refers to a handful at most).
  std::vector<TimeBlock*> new_blocks;
  {
    // Under evict_mu_, where every change of a block's budget references
    // during a restore happens (evictions drop them under it too).
    std::lock_guard lock(evict_mu_);
    uint64_t bytes = 0;
    for (const RestoredChunk& c : chunks) {
      if (c.header.count == 0) continue;
      bytes += SealedChunkBytes(ChunkWriter::ByteSize(c.header));
      TimeBlock* b = c.block.get();
      if (b != nullptr && b->refs.load(std::memory_order_relaxed) == 0 &&
          std::find(new_blocks.begin(), new_blocks.end(), b) == new_blocks.end()) {
        new_blocks.push_back(b);
        bytes += BlockAccounted(b->capacity());
      }
    }
    if (bytes > options_.memory_bytes || used_bytes_ + bytes > options_.memory_bytes) {
      return false;
    }
    used_bytes_ += bytes;
    for (TimeBlock* b : new_blocks) b->accounted = BlockAccounted(b->capacity());
    for (const RestoredChunk& c : chunks) {
      if (c.header.count > 0 && c.block != nullptr) {
        c.block->refs.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  // The chain is built outside every lock (one copy of each chunk's bytes,
  // from the caller's memory) and linked under the series lock at once.
  std::shared_ptr<Chunk> first;
  Chunk* last = nullptr;
  uint64_t n = 0;
  uint64_t samples = 0;
  for (const RestoredChunk& c : chunks) {
    if (c.header.count == 0) continue;
    std::shared_ptr<Chunk> k =
        NewSealedChunk(c.header, c.data, ChunkWriter::ByteSize(c.header), c.block, 0);
    Chunk* raw = k.get();
    if (last == nullptr) {
      first = std::move(k);
    } else {
      last->next = std::move(k);
    }
    last = raw;
    ++n;
    samples += c.header.count;
  }
  if (first != nullptr) LinkChain(s, std::move(first), last, n, samples);
  return true;
}

}  // namespace fabricscope
