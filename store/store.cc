// The series table and the memory budget: registration and lookup, the
// eviction heap (oldest chunk first) that keeps the store within
// --store-memory, presence, snapshots of the series' state, and the
// statistics (fabricscope_store_*). Appends (store_append.cc), tick time
// columns (store_time.cc), reads and scans (store_read.cc) and the state
// snapshot (store_snapshot.cc) are in their own files; what they share is in
// store_internal.h.
#include "store/store.h"

#include "store/store_internal.h"

namespace fabricscope {

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

}  // namespace fabricscope
