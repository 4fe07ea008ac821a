// Reads and scans: a series' view under its lock, ReadRange (decoded
// samples), ScanRange (samples, or summaries of chunks and 64-sample
// segments, through this thread's seek index: SegmentCache in
// store_internal.h), the read-ahead of many series (ScanAhead), Delta, and
// marking a chunk that does not decode as corrupt.

#include "store/store_internal.h"

namespace fabricscope {

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

}  // namespace fabricscope
