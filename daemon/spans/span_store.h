// The span store: a bounded ring of the spans the daemon has acknowledged,
// with its own memory budget (DESIGN.md sections 4 and 5).
//
// Contract:
//  - Ingest (daemon/ingest) validates spans and then Add()s them. Once Add()
//    returns, the span is acknowledged: it stays in the store until it is
//    evicted, and it is evicted only (a) when the memory budget is full (the
//    OLDEST spans, in arrival order, go first) or (b) when it is older than
//    max_age (its end_unix_nano is more than max_age before the clock's
//    realtime). Every eviction is counted (fabricscope_span_store_evictions_total
//    {reason="budget"|"age"}). Add() never fails and never blocks on a reader
//    for longer than the reader's O(log n + k) index walk.
//  - Every added span gets a sequence number: 0, 1, 2, ... in arrival order,
//    never reused. Readers that want every span exactly once (the correlator's
//    aggregates) tail the store with ReadFrom(); a reader that falls behind
//    the ring learns how many spans it missed.
//  - Lookups return SpanRef (shared pointers to immutable spans): a span a
//    reader holds stays valid after eviction; the store's budget counts only
//    the spans it still holds.
//
// Age eviction runs in arrival order (on every Add() and on EvictExpired()):
// a span that is already old when it arrives behind younger ones is evicted
// when it reaches the front. Lookups do not filter by age.
//
// Memory accounting: EstimateBytes(span) (the struct, its strings and
// attributes, and the index entries). The sum over held spans never exceeds
// memory_bytes after Add() returns, except that the newest span is always kept
// (ingest bounds a single span far below the minimum budget).
//
// Thread-safety: all methods are thread-safe. Writers (Add, EvictExpired) take
// an exclusive lock (std::shared_mutex); lookups take a shared lock, copy SpanRefs out and release
// it: callers never hold a store lock while they work on the results.
//
// Ownership: the store owns its spans; Clock and MetricsRegistry are borrowed
// and must outlive it (metrics may be null: no self-metrics, e.g. in tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/spans/span.h"

namespace fabricscope {

using SpanRef = std::shared_ptr<const Span>;

struct SpanStoreOptions {
  // Budget of the ring (--span-memory). Must be > 0.
  uint64_t memory_bytes = 64ull << 20;
  // Spans whose end is older than this are evicted (--max-span-age).
  absl::Duration max_age = absl::Hours(1);
};

struct SpanStoreStats {
  uint64_t spans = 0;           // held now
  uint64_t bytes = 0;           // held now (EstimateBytes sum)
  uint64_t added_total = 0;     // ever added (== next_seq)
  uint64_t evicted_budget = 0;  // ever evicted because the budget was full
  uint64_t evicted_age = 0;     // ever evicted because older than max_age
  uint64_t first_seq = 0;       // sequence number of the oldest held span
  uint64_t next_seq = 0;        // sequence number the next added span gets
};

class SpanStore {
 public:
  // Upper bound on the spans one lookup returns when the caller passes no limit.
  static constexpr size_t kDefaultLimit = 10000;

  SpanStore(SpanStoreOptions options, Clock* clock, MetricsRegistry* metrics);
  SpanStore(const SpanStore&) = delete;
  SpanStore& operator=(const SpanStore&) = delete;

  // Adds spans (already validated by ingest) in order; evicts the oldest spans
  // until the budget holds them and drops expired ones. Returns the sequence
  // number of the first added span (the rest follow consecutively).
  uint64_t Add(std::vector<Span> spans);
  uint64_t Add(Span span);

  // Every held span of the trace, ordered by start_unix_nano (then seq). At
  // most `limit`: the earliest ones.
  std::vector<SpanRef> FindByTraceId(const TraceId& trace_id, size_t limit = kDefaultLimit) const;

  // Held spans with this span id, ordered by start. Usually zero or one; span
  // ids are only unique within a trace, so two traces may collide.
  std::vector<SpanRef> FindBySpanId(const SpanId& span_id) const;

  // Held spans that overlap [from_unix_nano, to_unix_nano] (start <= to and
  // end >= from) and, when `name` is not empty, whose name equals `name`
  // exactly. Ordered by start_unix_nano ascending; when more than `limit`
  // match, the `limit` with the LATEST starts are returned (an SRE asking for
  // "the last 5 minutes" wants the newest ones).
  std::vector<SpanRef> FindOverlapping(int64_t from_unix_nano, int64_t to_unix_nano,
                                       absl::string_view name = {},
                                       size_t limit = kDefaultLimit) const;

  // Tails the store in arrival order: returns up to `max` held spans with
  // seq >= from_seq. Use result.next_seq as the next call's from_seq.
  // result.missed counts spans in [from_seq, first held seq) that were evicted
  // before this reader saw them (0 when the reader keeps up).
  struct ReadResult {
    std::vector<SpanRef> spans;
    uint64_t next_seq = 0;
    uint64_t missed = 0;
  };
  ReadResult ReadFrom(uint64_t from_seq, size_t max) const;

  // Drops spans older than max_age from the front of the ring (also done by
  // Add). Returns the number evicted.
  size_t EvictExpired();

  SpanStoreStats Stats() const;

  // Bytes a span is charged against the budget.
  static uint64_t EstimateBytes(const Span& span);

 private:
  struct Entry {
    uint64_t seq;
    SpanRef span;
    uint64_t bytes;
  };
  enum class EvictReason { kBudget, kAge };

  void EvictFrontLocked(EvictReason reason);  // mu_ held exclusively
  size_t EvictExpiredLocked(int64_t now_ns);  // mu_ held exclusively
  void PublishLocked();                       // mu_ held exclusively

  const SpanStoreOptions options_;
  Clock* const clock_;
  MetricsRegistry* const metrics_;
  prometheus::Counter* evicted_budget_counter_ = nullptr;
  prometheus::Counter* evicted_age_counter_ = nullptr;
  prometheus::Gauge* bytes_gauge_ = nullptr;
  prometheus::Gauge* spans_gauge_ = nullptr;

  // Guards everything below.
  mutable std::shared_mutex mu_;
  std::deque<Entry> ring_;  // arrival order; front = oldest
  uint64_t next_seq_ = 0;
  uint64_t bytes_ = 0;
  uint64_t evicted_budget_ = 0;
  uint64_t evicted_age_ = 0;
  // Longest duration of any span added so far: bounds the FindOverlapping walk.
  int64_t max_duration_ns_ = 0;
  // Seqs of one index key in arrival order. Eviction always removes the
  // oldest, i.e. the first live one: O(1) amortised even for a trace with
  // 100k spans (compacted when half of it is dead).
  struct SeqList {
    std::vector<uint64_t> seqs;
    size_t head = 0;  // seqs[0, head) are evicted
  };
  // Indexes: key -> seq (the ring position is seq - ring_.front().seq).
  absl::btree_set<std::pair<int64_t, uint64_t>> by_start_;  // (start, seq)
  absl::flat_hash_map<TraceId, SeqList> by_trace_;
  absl::flat_hash_map<SpanId, SeqList> by_span_;
};

}  // namespace fabricscope
