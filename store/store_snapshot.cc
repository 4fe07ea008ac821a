// The state snapshot's side of the store: Dump (every series with its
// sealed chunks, as they are) and the restore (series first, then their
// chunks, relinking the time blocks they share).

#include "store/store_internal.h"

namespace fabricscope {

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
