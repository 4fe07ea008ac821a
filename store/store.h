// The sample store: every sample of every series, plus the latest derived state
// of each series that the exporters render.
//
// Contract (DESIGN.md section 4, STYLE.md "the contract"):
//  - Collectors declare a series once (Register) and then append raw samples
//    (Append) with the tick's realtime timestamp: the scheduler records each
//    tier tick once in that tier's time column (Tick) and appends with the
//    TickRef; samples appended outside a tick carry their own timestamp.
//  - Each series has exactly one writer: the scheduler thread of the tier that
//    polls it. Different series are appended concurrently from different tier
//    threads.
//  - Readers (scrapes, queries) take snapshots; they never block a writer for
//    longer than copying one series' latest state, or its head chunk (at most
//    kMaxChunkBytes) and two chunk pointers.
//  - Memory is bounded by StoreOptions::memory_bytes; when full, the globally
//    oldest chunks go first and their samples are counted as evicted.
//
// Layout: per series a chain of sealed, immutable, compressed chunks
// (store/chunk.h: delta-of-delta times, zig-zag value deltas; a counter that
// does not move on a regular poll costs a run code per run of samples) plus
// one mutable head chunk. A chunk of a series polled by a tier tick stores
// tick indexes and refers to a block of the tier's time column
// (store/time_column.h), which holds each tick's timestamp once for all the
// tier's series; a sample appended with its own timestamp goes to a chunk of
// its own. A chunk is sealed when it holds kMaxChunkSamples samples, its head
// buffer (grown by doubling up to kMaxChunkBytes) is full, or the next sample
// belongs to another time block (or none).
// Sealed chunks are shared (shared_ptr, each owning the next newer one), so a
// reader keeps what it read alive without holding any lock, and eviction just
// drops the store's reference to the oldest one. Raw values are kept exactly.
//
// Budget: every byte the store holds is accounted against memory_bytes before
// it is allocated: sealed chunks (payload + fixed overhead + their entry in
// the series' seek list, which lets a read start at the first chunk that can
// reach its range), head buffers
// (capacity), time blocks (released when no chunk refers to them any more)
// and the per-series overhead (key, signal, aggregate windows, table
// entries). When an allocation would exceed the budget, the chunk with the
// oldest first timestamp across all series is evicted, repeatedly. If nothing
// sealed is left, a growing head chunk drops its own samples (counted as
// evicted), and Register returns kInvalidSeries (Append/Get on it are no-ops)
// rather than exceed the budget. Chunks that a reader still holds after their
// eviction are the reader's memory until it lets go.
//
// Derived state computed at append time (counter semantics from
// counter_semantics.h, scaled to the family unit): the monotonic exported
// total, the last per-interval rate, resets and saturation, and the
// sub-second aggregates of aggregates.h (peak rate within the peak window,
// microburst count). Nothing resets on read.
//
// Thread-safety: all methods are thread-safe, subject to the one-writer-per-
// series rule for Append. Append finds its series without a lock (an atomic
// id table) and holds only that series' lock for O(1) work. Lock order:
// table_mu_ -> evict_mu_ -> a series' mu; a writer never holds its own series
// lock while evicting.
//
// Ownership: the store owns every series for its lifetime; SeriesSnapshot's
// key/signal pointers stay valid until the store is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/series.h"
#include "core/signals.h"
#include "store/aggregates.h"
#include "store/chunk.h"
#include "store/counter_semantics.h"
#include "store/time_column.h"

namespace fabricscope {

struct StoreOptions {
  uint64_t memory_bytes = 256ull << 20;
  absl::Duration peak_window = absl::Seconds(15);
  double burst_factor = 8.0;
};

// The latest derived view of one series, as exporters see it.
struct SeriesState {
  bool has_value = false;
  bool present = true;  // false while the device/file is gone (hot-unplug)
  int64_t last_ts_ns = 0;
  uint64_t last_raw = 0;
  // The exported value in the family's unit: for counters the first reading
  // plus every valid delta since (monotonic: resets and wraps never make it go
  // backwards); for gauges the current value. Both scaled by Signal::scale.
  double total = 0;
  uint64_t resets = 0;
  bool saturated = false;
  // Rate over the last poll interval, family unit per second; valid only when
  // rate_valid (not on the first sample, a reset, or while saturated).
  double last_rate = 0;
  bool rate_valid = false;
  uint64_t samples = 0;  // appended since registration
  // Counters only (aggregates.h), as of last_ts_ns: the highest valid
  // per-interval rate within the trailing StoreOptions::peak_window (family
  // unit per second; valid when peak_valid), and the poll intervals judged
  // microbursts since registration.
  double peak_rate = 0;
  bool peak_valid = false;
  uint64_t microbursts = 0;
};

// The counter delta between two times (Store::Delta).
struct CounterDelta {
  // Raw units and family units (raw * Signal::scale), with the semantics of
  // counter_semantics.h: wraps are unwrapped, an interval containing a reset
  // contributes nothing, a saturated counter stops counting.
  uint64_t raw_delta = 0;
  double delta = 0;
  uint64_t resets = 0;
  bool saturated = false;
  // Coverage: the samples the delta was computed from. The baseline is the
  // last sample at or before from_ns if the store still holds one, else the
  // first sample after it; the end is the last sample at or before to_ns.
  size_t samples = 0;  // 0: nothing held in [from, to] (not covered at all)
  int64_t first_ts_ns = 0;
  int64_t last_ts_ns = 0;
  bool covers_from = false;  // first_ts_ns <= from_ns
  bool covers_to = false;    // the series has a sample at or after to_ns
};

// What the intervals inside one sealed chunk add up to (Store::ScanRange):
// the chunk's header (real timestamps) and, over the intervals between its
// consecutive samples that have a positive length and a valid rate under the
// series' counter semantics (a tracker started at the chunk's first sample,
// kWrap32 not yet switched to 64 bits), the raw movement and the covered
// time. Computed once per sealed chunk, on the first scan that asks for it,
// and kept with the chunk (which is immutable).
struct ChunkSummary {
  ChunkHeader header;        // first_ts/last_ts/min_ts/max_ts are real timestamps
  double valid_delta = 0;    // raw units, sum over the valid intervals
  int64_t valid_ns = 0;      // their total length
  int64_t max_valid_ns = 0;  // the longest of them
  bool wrapped = false;      // some valid delta crossed a 32-bit wrap
  bool above32 = false;      // some raw value exceeds UINT32_MAX
  // Every interval has a positive length and a valid rate (no reset,
  // saturation, clock step or repeated timestamp); false where not known.
  bool all_valid = false;
  // The largest delta * (1.0 / length) of the valid intervals, computed so
  // (raw units per ns; 0 with none); -1 where not known.
  double max_rate = -1;
};

// Consumer of Store::ScanRange: decides per chunk whether its summary is
// enough or its samples are needed. Called on the scanning thread, with no
// store lock held.
//
// A long chunk (more than 2 x 64 samples) that the scanner plans kSamples,
// and the head chunk whatever its plan, is then offered again as its
// segments: runs of 64 consecutive samples (the last one shorter), each
// planned like a chunk of its own with its own header and summary (the same
// definition over the segment's samples), so that only the segments the
// scanner needs as samples are decoded (the store's seek index).
class RangeScanner {
 public:
  enum class Plan : uint8_t {
    kSamples,  // decode the chunk: OnSamples (a long one: segment by segment)
    kSummary,  // OnSummary (a sealed chunk or a segment; a whole head chunk is offered as segments)
    kSkip,     // nothing of this chunk is needed
  };
  virtual ~RangeScanner() = default;
  // A chunk (or a segment of one) that overlaps [from_ns, to_ns] by its
  // min/max timestamps, oldest first. Only the header's real-time fields
  // (first_ts, last_ts, min_ts, max_ts, first_value, last_value, count) are
  // meaningful.
  virtual Plan PlanChunk(const ChunkHeader& header) = 0;
  // The summary of a chunk planned kSummary; false when it does not suffice
  // after all (the store then hands over the chunk's samples: OnSamples, or
  // for a long chunk whose summary was cached, its segments as for kSamples).
  virtual bool OnSummary(const ChunkSummary& summary) = 0;
  // The samples of one decoded chunk with from_ns <= ts_ns <= to_ns, in
  // append order (real timestamps).
  virtual void OnSamples(absl::Span<const Sample> samples) = 0;
  // Whether the samples after those handed over so far matter only through
  // the last one in the range. The store may then stop decoding a segment
  // midway and offer the rest of it through PlanChunk again (with the
  // segment's header: its last sample is the rest's); it decodes the rest
  // unless that plans kSkip. Default: never.
  virtual bool Satisfied() const { return false; }
  // For a segment just planned kSamples: times (lo, hi] such that the
  // scanner takes the segment's samples after lo and at or before hi as one
  // summary (OnSummary; its header's first sample is the first after lo, its
  // last the last at or before hi) and only the others as samples. The store
  // may then offer them so (when the segment's timestamps increase and its
  // intervals are all valid), decoding them as samples only when OnSummary
  // returns false. lo >= hi (the default): the whole segment as samples.
  virtual std::pair<int64_t, int64_t> SummarySpan(const ChunkHeader& /*segment*/) const {
    return {0, 0};
  }
};

// One appended sample, as the store judged it (Store::SetObserver).
struct AppendEvent {
  SeriesId id = kInvalidSeries;
  const SeriesKey* key = nullptr;  // owned by the store, valid for its lifetime
  const Signal* signal = nullptr;  // ditto
  // The poll interval this sample closes: [start_ns, end_ns]; start_ns is the
  // previous sample's timestamp (== end_ns for the first sample).
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool gauge = false;
  // Counters: the movement over the interval in the family unit and its rate
  // (family unit per second); valid only when rate_valid (not the first
  // sample, a reset or a saturated reading).
  double delta = 0;
  double rate = 0;
  bool rate_valid = false;
  // Gauges: the current value (family unit); counters: the exported total.
  double value = 0;
  // The store's microburst judgement of this interval (aggregates.h).
  bool microburst = false;
};

// Sees every sample right after the store took it (detectors). Called on the
// appending thread, with no store lock held; different series may call it
// concurrently from different tier threads, one series never concurrently
// with itself. Must be cheap: it runs on the poll path.
class AppendObserver {
 public:
  virtual ~AppendObserver() = default;
  virtual void OnAppend(const AppendEvent& event) = 0;
  // The events of consecutive appends of one Store::Append(tick, readings)
  // call, in order, after those appends (up to 32 at a time): exactly
  // OnAppend for each, which is what this default does; an observer that
  // takes a lock per event can take it once.
  virtual void OnAppends(absl::Span<const AppendEvent> events) {
    for (const AppendEvent& e : events) OnAppend(e);
  }
};

struct SeriesSnapshot {
  SeriesId id = kInvalidSeries;
  const SeriesKey* key = nullptr;  // owned by the store, valid for its lifetime
  const Signal* signal = nullptr;  // ditto
  SeriesState state;
};

struct StoreStats {
  uint64_t bytes = 0;            // memory held by samples and series
  uint64_t samples = 0;          // samples held now
  int64_t oldest_ts_ns = 0;      // oldest sample still held (0 if none)
  uint64_t evicted_samples = 0;  // dropped to stay within the budget
  uint64_t series = 0;
  uint64_t chunks = 0;           // sealed chunks held
  uint64_t rejected_series = 0;  // Register calls refused for lack of memory
  // Sealed chunks that did not decode to their header when read (a restored
  // snapshot's chunks are decoded lazily): never served, counted once each.
  uint64_t corrupt_chunks = 0;
  // Memory of the seek indexes that scans (ScanRange) build to decode only
  // part of a chunk, kept per reading thread and bounded (16 MiB per
  // thread, 48 MiB for the process), outside the store's budget: every
  // reading thread of the process together.
  uint64_t seek_index_bytes = 0;
};

// One series as the state snapshot writes it (Store::Dump): its key, its
// derived state and every chunk it holds, oldest first, the head chunk last.
// `data` points into the store's chunks and is valid only during the call.
struct SeriesDump {
  struct ChunkRef {
    ChunkHeader header;
    const uint8_t* data = nullptr;     // ChunkWriter::ByteSize(header) bytes
    const TimeBlock* block = nullptr;  // the time block of its ticks; null: own times
  };
  const SeriesKey* key = nullptr;
  const Signal* signal = nullptr;
  SeriesState state;
  std::vector<ChunkRef> chunks;
};

// One chunk of a state snapshot being restored (Store::RestoreChunks): the
// store copies its header and its ChunkWriter::ByteSize(header) bytes at
// `data` (the caller's, e.g. the mapped snapshot file; they need only outlive
// the call).
struct RestoredChunk {
  ChunkHeader header;
  const uint8_t* data = nullptr;
  std::shared_ptr<TimeBlock> block;  // a sealed block (TimeBlock::FromImage); null: own times
};

// A time column of the store (Store::AddTickColumn), opaque to its users.
class TickColumn;

// One tier tick as recorded in its time column (Store::Tick).
struct TickRef {
  std::shared_ptr<TimeBlock> block;  // null: the column could not record it
  int64_t tick = 0;                  // index in the column
  int64_t ts_ns = 0;
};

// Chunk geometry (see the header comment).
inline constexpr size_t kInitialHeadBytes = 64;
inline constexpr size_t kMaxChunkBytes = 1024;
inline constexpr uint32_t kMaxChunkSamples = 8192;

class Store {
 public:
  explicit Store(StoreOptions options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Declares a series; returns the existing id if `key` is already registered
  // (a re-discovered device, or a series restored from a snapshot, gets its
  // old series back, marked present).
  SeriesId Register(const SeriesKey& key, const Signal& signal);
  std::optional<SeriesId> Find(const SeriesKey& key) const;

  // A time column for one tick source (a scheduler tier) whose ticks are
  // nominally `interval` apart. Owned by the store; valid for its lifetime.
  TickColumn* AddTickColumn(absl::Duration interval);
  // Records one tick at `ts_ns`. Only the column's one writer (the tier's
  // thread) calls this, before appending that tick's samples. When the
  // budget cannot hold a new time block, the TickRef has no block and its
  // samples are stored with their own timestamps.
  TickRef Tick(TickColumn* column, int64_t ts_ns);

  // Appends one raw reading. Only the series' writer calls this.
  void Append(SeriesId id, int64_t ts_ns, uint64_t raw);
  // Appends one raw reading polled by `tick` (timestamp tick.ts_ns).
  void Append(SeriesId id, const TickRef& tick, uint64_t raw);
  // Appends the readings of one tick, in order: exactly Append(r.id, tick,
  // r.raw) for each, but the state of the series a few readings ahead is
  // prefetched meanwhile (a tick's series are cold in the cache), so the
  // cache misses of consecutive series overlap, and the observer gets the
  // events of up to 32 appends in one OnAppends call after them (the same
  // events in the same order). Only the series' writer.
  void Append(const TickRef& tick, absl::Span<const SeriesReading> readings);

  // Installs the observer of every Append (nullptr: none). Call before the
  // first Append; the observer must outlive the store's writers.
  void SetObserver(AppendObserver* observer) { observer_ = observer; }

  // Marks a series present or absent (its device vanished / came back).
  // Absent series are not exported; their samples stay queryable.
  void SetPresent(SeriesId id, bool present);

  // Readers.
  std::vector<SeriesSnapshot> Snapshot() const;
  std::optional<SeriesSnapshot> Get(SeriesId id) const;
  // Samples of `id` with from_ns <= ts_ns <= to_ns, in append order (oldest
  // first), at full resolution (decoded from the chunks). Empty for an unknown
  // id. Decoding runs without any lock held.
  std::vector<Sample> ReadRange(SeriesId id, int64_t from_ns, int64_t to_ns) const;
  // Scans the chunks of `id` that overlap [from_ns, to_ns], oldest first,
  // the head last, letting `scanner` take each (or each of its segments, see
  // RangeScanner) as a summary, as samples within [from_ns, to_ns] (exactly
  // those ReadRange would return, in order) or not at all. A chunk that does
  // not decode is dropped and counted as ReadRange does. Summaries are
  // computed without any lock held and published with the chunk (concurrent
  // scans may compute the same one; one of them keeps it). The segments'
  // seek index (decoder checkpoints, headers and summaries) is kept per
  // reading thread, in memory only and outside the budget: built on a
  // thread's first segment-wise read of a chunk (one full decode), extended
  // as the head grows, at most 16 MiB per thread and 48 MiB for all
  // threads together (a thread over either drops its index whole).
  // No-op for an unknown id.
  void ScanRange(SeriesId id, int64_t from_ns, int64_t to_ns, RangeScanner* scanner) const;
  // Read-ahead for ScanRange over many series with one range, in order: a
  // software pipeline that, while series i is scanned, brings into cache
  // what the scans of the next few series read first and one after another
  // (each a cache miss that depends on the one before): the series, the
  // sealed chunks reaching the range, and for the chunks holding a time of
  // `decoded` (ranges whose samples the scanner will likely want, e.g. the
  // edges of a window) this thread's seek-index slot, segment bounds,
  // segment records and the stream at their first decoded segment. A hint
  // only: no scan's result depends on it; it takes each series' lock
  // briefly (try_lock: a busy series is not read ahead) and holds a
  // reference to a series' chunks only until its own scan. Use on the
  // scanning thread (the seek index is per thread).
  class ScanAhead {
   public:
    ScanAhead(const Store& store, absl::Span<const SeriesId> ids, int64_t from_ns, int64_t to_ns,
              absl::Span<const std::pair<int64_t, int64_t>> decoded);
    ~ScanAhead();
    ScanAhead(const ScanAhead&) = delete;
    ScanAhead& operator=(const ScanAhead&) = delete;
    // Call right before scanning ids[i], for i = 0, 1, ... in order.
    void Before(size_t i);

   private:
    struct Cursor;
    static constexpr size_t kDepth = 6;  // pipeline steps, one per scan
    void Step(Cursor* c, SeriesId id, size_t step);
    const Store& store_;
    const absl::Span<const SeriesId> ids_;
    const int64_t from_ns_, to_ns_;
    std::vector<std::pair<int64_t, int64_t>> decoded_;
    std::unique_ptr<Cursor[]> cursors_;  // ring: ids[j] in cursors_[j % kDepth]
  };
  // The counter delta of `id` between from_ns and to_ns (see CounterDelta).
  // NotFound for an unknown id, FailedPrecondition for a gauge series,
  // InvalidArgument when from_ns > to_ns. Assumes non-decreasing timestamps;
  // after a realtime clock step, append order is used.
  absl::StatusOr<CounterDelta> Delta(SeriesId id, int64_t from_ns, int64_t to_ns) const;
  StoreStats Stats() const;

  // State snapshot (daemon/state/snapshot.h).
  // Dump calls `fn` for every series in id order, with no store lock held
  // during the call (the chunks it sees stay alive until it returns); `fn`
  // returns false to stop. Safe while writers run, but a consistent picture
  // needs the writers stopped.
  void Dump(const std::function<bool(const SeriesDump&)>& fn) const;
  // Restore re-creates a series from a snapshot before any collector has
  // registered its key: the chunks (oldest first; each non-empty, its header
  // checked by the caller; a stream that does not decode to its header is
  // found when first read, then dropped and counted in
  // StoreStats::corrupt_chunks) become sealed chunks, the derived state continues (totals,
  // resets, the last raw reading: the next Append's delta spans the restart),
  // and the series is marked absent until a collector registers it again.
  // Chunks the budget cannot hold are dropped oldest first (counted as
  // evicted; `chunks_dropped` counts those not linked at all). Returns
  // kInvalidSeries (nothing restored) when the key is already registered or
  // the series itself does not fit.
  // A chunk on a time column refers to its block (EncodedChunk::block, a
  // sealed block from TimeBlock::FromImage): the block is accounted against
  // the budget with the first chunk that links it and released with the
  // last one; when the budget cannot hold the block, its chunk is dropped.
  SeriesId Restore(const SeriesKey& key, const Signal& signal, const SeriesState& state,
                   std::vector<EncodedChunk> chunks, uint64_t* chunks_dropped = nullptr);
  // Restore in two steps, so that many series can be restored on several
  // threads (daemon/state/snapshot.cc). RestoreSeries registers `key` with
  // its derived state, as Restore does without chunks (kInvalidSeries when
  // the key is registered already or the series does not fit); call it in
  // the order the ids should follow. RestoreChunks then links the chunks of
  // series `id`, oldest first (call it once per series):
  //  - `may_evict` false: the bytes of all of them (and of the time blocks
  //    no chunk holds yet) are reserved at once and nothing is evicted; when
  //    they do not fit it links nothing and returns false. Calls for
  //    different series may run concurrently with each other.
  //  - `may_evict` true: as Restore (the oldest chunks go to make room,
  //    counted as evicted; `chunks_dropped` counts those not linked); must
  //    not run concurrently with any other RestoreChunks. Returns true.
  // `chunks_dropped` (optional) is set to the chunks not linked.
  SeriesId RestoreSeries(const SeriesKey& key, const Signal& signal, const SeriesState& state);
  bool RestoreChunks(SeriesId id, absl::Span<const RestoredChunk> chunks, bool may_evict,
                     uint64_t* chunks_dropped = nullptr);

  const StoreOptions& options() const { return options_; }

 private:
  struct Chunk;
  struct Series;
  struct ReadView;
  struct HeapEntry {
    int64_t ts_ns;  // first timestamp of the series' oldest sealed chunk
    Series* series;
  };
  Series* Lookup(SeriesId id) const;
  // Append(tick, readings)'s two prefetch stages: the series' own fields,
  // then (those in cache) what they point to that an append touches.
  static void PrefetchSeries(const Series* s);
  static void PrefetchAppendState(const Series* s, int64_t ts_ns);
  // Accounts `bytes` against the budget, evicting the oldest chunks as needed;
  // false (nothing accounted) when even an empty store could not hold them.
  bool Reserve(uint64_t bytes);
  void Release(uint64_t bytes);
  // Evicts the globally oldest sealed chunk; false if there is none.
  bool EvictOldestLocked();          // evict_mu_ held
  void PushHeapLocked(HeapEntry e);  // evict_mu_ held
  // Writer only: makes room in the head chunk for one more sample (grow or
  // seal); `seal` forces the seal (the next sample is on another block).
  void PrepareHead(Series* s, bool seal);
  // Writer only: the common part of the Appends; sets every field of `ev`
  // (the observer's event, which the caller delivers).
  void AppendSample(SeriesId id, Series* s, const std::shared_ptr<TimeBlock>& block, int64_t t,
                    int64_t ts_ns, uint64_t raw, AppendEvent* ev);
  // Writer only, under s->mu: records one sample and fills `ev` (all but
  // id, key and signal).
  void AppendLocked(Series* s, int64_t t, int64_t ts_ns, uint64_t raw, AppendEvent* ev);
  void DropHead(Series* s);
  // Writer (or Restore): links a copy of `used` bytes of `data` as the
  // series' newest sealed chunk, handing it one budget reference on `block`
  // that the caller holds; false (nothing linked, the reference still the
  // caller's) if the budget cannot hold it. `serial`: the sealed head's
  // identity (0: a new one).
  bool LinkSealed(Series* s, const ChunkHeader& h, const uint8_t* data, size_t used,
                  std::shared_ptr<TimeBlock> block, uint64_t serial = 0);
  // Drops one budget reference on `block`; the last one releases its bytes.
  void DropBlockRef(TimeBlock* block);
  // Restore: takes one budget reference on a restored block, accounting it
  // first if no chunk holds it; false when the budget cannot hold it.
  bool AcquireRestoredBlock(TimeBlock* block);
  // RestoreChunks without eviction: reserves and links `chunks` in one run.
  bool LinkRestoredRun(Series* s, absl::Span<const RestoredChunk> chunks);
  // The bytes a sealed chunk of `used` stream bytes is accounted.
  static uint64_t SealedChunkBytes(size_t used);
  // A sealed chunk not linked yet: a copy of `used` bytes of `data`,
  // accounted SealedChunkBytes(used), holding `block`; `serial` as LinkSealed.
  static std::shared_ptr<Chunk> NewSealedChunk(const ChunkHeader& h, const uint8_t* data,
                                               size_t used, std::shared_ptr<TimeBlock> block,
                                               uint64_t serial);
  // Links the run first..last (n chunks chained by `next`, `samples` in all;
  // their bytes already reserved) after the series' newest sealed chunk, with
  // their seek entries; a series that held none enters the eviction heap.
  void LinkChain(Series* s, std::shared_ptr<Chunk> first, Chunk* last, uint64_t n,
                 uint64_t samples);
  void DropBlockRefLocked(TimeBlock* block);  // evict_mu_ held
  bool View(SeriesId id, int64_t from_ns, int64_t to_ns, ReadView* view) const;
  void MarkCorrupt(const Chunk* chunk) const;

  const StoreOptions options_;
  const PeakGeometry peak_geometry_;
  mutable std::shared_mutex table_mu_;
  std::vector<std::unique_ptr<Series>> series_ ABSL_GUARDED_BY(table_mu_);
  absl::flat_hash_map<SeriesKey, SeriesId> by_key_ ABSL_GUARDED_BY(table_mu_);
  // Lock-free id -> series for the append path: blocks of kLookupBlock
  // pointers, allocated and published (release) under table_mu_, never freed
  // before the store.
  static constexpr size_t kLookupBlockBits = 10;
  static constexpr size_t kLookupBlock = size_t{1} << kLookupBlockBits;
  static constexpr size_t kLookupBlocks = size_t{1} << 10;  // 1M series
  struct LookupTable {
    std::unique_ptr<std::atomic<Series*>[]> owned[kLookupBlocks];
    std::atomic<std::atomic<Series*>*> blocks[kLookupBlocks] = {};
  };
  const std::unique_ptr<LookupTable> lookup_ = std::make_unique<LookupTable>();
  std::atomic<uint32_t> lookup_size_{0};
  std::mutex columns_mu_;
  std::vector<std::unique_ptr<TickColumn>> columns_ ABSL_GUARDED_BY(columns_mu_);
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> rejected_series_{0};
  mutable std::atomic<uint64_t> corrupt_chunks_{0};
  AppendObserver* observer_ = nullptr;  // set before the writers start

  // The budget: bytes accounted and a min-heap (by first timestamp) with one
  // entry per series that holds sealed chunks.
  mutable std::mutex evict_mu_;
  uint64_t used_bytes_ ABSL_GUARDED_BY(evict_mu_) = 0;
  std::vector<HeapEntry> heap_ ABSL_GUARDED_BY(evict_mu_);
};

}  // namespace fabricscope
