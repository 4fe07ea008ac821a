// The append path: one sample or a tick's readings (prefetched a few series
// ahead), the derived per-series state (counter semantics, aggregates, the
// observer's events), growing the head chunk and sealing it into the series'
// chain (also used by the snapshot restore).

#include "store/store_internal.h"

namespace fabricscope {

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

}  // namespace fabricscope
