#include "daemon/spans/span_store.h"

#include <algorithm>
#include <mutex>
#include <utility>

namespace fabricscope {
namespace {

const MetricSpec& kEvictions = DefineMetric(
    {.name = "fabricscope_span_store_evictions_total",
     .type = MetricType::kCounter,
     .help = "Acknowledged spans evicted from the span store, by reason (budget: the "
             "--span-memory ring was full and the oldest went; age: older than --max-span-age).",
     .labels = {"reason"},
     .component = "span_store"});
const MetricSpec& kStoreBytes = DefineMetric(
    {.name = "fabricscope_span_store_bytes",
     .type = MetricType::kGauge,
     .help = "Estimated bytes of the spans held in the span store (bounded by --span-memory).",
     .labels = {},
     .component = "span_store"});
const MetricSpec& kStoreSpans = DefineMetric({.name = "fabricscope_span_store_spans",
                                              .type = MetricType::kGauge,
                                              .help = "Spans held in the span store.",
                                              .labels = {},
                                              .component = "span_store"});

// Per-entry overhead of the ring and the three indexes (a btree node share,
// two hash slots and vector cells, the shared_ptr control block).
constexpr uint64_t kIndexOverhead = 160;

template <typename Map, typename Key>
void RemoveSeq(Map& map, const Key& key, uint64_t seq) {
  auto it = map.find(key);
  if (it == map.end()) return;
  auto& list = it->second;
  if (list.head < list.seqs.size() && list.seqs[list.head] == seq) {
    ++list.head;  // the common case: the oldest of the key goes
  } else {
    auto pos = std::find(list.seqs.begin() + list.head, list.seqs.end(), seq);
    if (pos != list.seqs.end()) list.seqs.erase(pos);
  }
  if (list.head == list.seqs.size()) {
    map.erase(it);
  } else if (list.head > 16 && list.head * 2 > list.seqs.size()) {
    list.seqs.erase(list.seqs.begin(), list.seqs.begin() + list.head);
    list.head = 0;
  }
}

bool StartLess(const SpanRef& a, const SpanRef& b) {
  return a->start_unix_nano < b->start_unix_nano;
}

}  // namespace

SpanStore::SpanStore(SpanStoreOptions options, Clock* clock, MetricsRegistry* metrics)
    : options_(options), clock_(clock), metrics_(metrics) {
  if (metrics_ != nullptr) {
    evicted_budget_counter_ = &metrics_->Counter(kEvictions).Add({{"reason", "budget"}});
    evicted_age_counter_ = &metrics_->Counter(kEvictions).Add({{"reason", "age"}});
    bytes_gauge_ = &metrics_->Gauge(kStoreBytes).Add({});
    spans_gauge_ = &metrics_->Gauge(kStoreSpans).Add({});
  }
}

uint64_t SpanStore::EstimateBytes(const Span& span) {
  uint64_t b = sizeof(Span) + kIndexOverhead;
  b += span.name.capacity() + span.rdma_device.capacity() + span.netdev.capacity() +
       span.protocol.capacity();
  b += span.attributes.capacity() * sizeof(span.attributes[0]);
  for (const auto& [k, v] : span.attributes) b += k.capacity() + v.capacity();
  return b;
}

uint64_t SpanStore::Add(Span span) {
  std::vector<Span> one;
  one.push_back(std::move(span));
  return Add(std::move(one));
}

uint64_t SpanStore::Add(std::vector<Span> spans) {
  // Allocate outside the lock.
  std::vector<Entry> entries;
  entries.reserve(spans.size());
  for (Span& s : spans) {
    s.attributes.shrink_to_fit();
    uint64_t bytes = EstimateBytes(s);
    entries.push_back(Entry{0, std::make_shared<const Span>(std::move(s)), bytes});
  }
  const int64_t now_ns = clock_->RealtimeNs();

  std::unique_lock lock(mu_);
  const uint64_t first = next_seq_;
  for (Entry& e : entries) {
    e.seq = next_seq_++;
    const Span& s = *e.span;
    max_duration_ns_ = std::max(max_duration_ns_, s.end_unix_nano - s.start_unix_nano);
    by_start_.emplace(s.start_unix_nano, e.seq);
    by_trace_[s.trace_id].seqs.push_back(e.seq);
    by_span_[s.span_id].seqs.push_back(e.seq);
    bytes_ += e.bytes;
    ring_.push_back(std::move(e));
    // Keep the newest span even if it alone exceeds the budget.
    while (bytes_ > options_.memory_bytes && ring_.size() > 1)
      EvictFrontLocked(EvictReason::kBudget);
  }
  EvictExpiredLocked(now_ns);
  PublishLocked();
  return first;
}

void SpanStore::EvictFrontLocked(EvictReason reason) {
  Entry& e = ring_.front();
  const Span& s = *e.span;
  by_start_.erase({s.start_unix_nano, e.seq});
  RemoveSeq(by_trace_, s.trace_id, e.seq);
  RemoveSeq(by_span_, s.span_id, e.seq);
  bytes_ -= e.bytes;
  if (reason == EvictReason::kBudget) {
    ++evicted_budget_;
    if (evicted_budget_counter_ != nullptr) evicted_budget_counter_->Increment();
  } else {
    ++evicted_age_;
    if (evicted_age_counter_ != nullptr) evicted_age_counter_->Increment();
  }
  ring_.pop_front();
}

size_t SpanStore::EvictExpiredLocked(int64_t now_ns) {
  const int64_t cutoff = now_ns - absl::ToInt64Nanoseconds(options_.max_age);
  size_t n = 0;
  while (!ring_.empty() && ring_.front().span->end_unix_nano < cutoff) {
    EvictFrontLocked(EvictReason::kAge);
    ++n;
  }
  return n;
}

size_t SpanStore::EvictExpired() {
  const int64_t now_ns = clock_->RealtimeNs();
  std::unique_lock lock(mu_);
  size_t n = EvictExpiredLocked(now_ns);
  PublishLocked();
  return n;
}

void SpanStore::PublishLocked() {
  if (bytes_gauge_ != nullptr) bytes_gauge_->Set(static_cast<double>(bytes_));
  if (spans_gauge_ != nullptr) spans_gauge_->Set(static_cast<double>(ring_.size()));
}

std::vector<SpanRef> SpanStore::FindByTraceId(const TraceId& trace_id, size_t limit) const {
  std::vector<SpanRef> out;
  {
    std::shared_lock lock(mu_);
    auto it = by_trace_.find(trace_id);
    if (it == by_trace_.end()) return out;
    const uint64_t base = ring_.front().seq;
    const SeqList& list = it->second;
    out.reserve(list.seqs.size() - list.head);
    for (size_t i = list.head; i < list.seqs.size(); ++i) {
      out.push_back(ring_[list.seqs[i] - base].span);
    }
  }
  std::stable_sort(out.begin(), out.end(), StartLess);
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::vector<SpanRef> SpanStore::FindBySpanId(const SpanId& span_id) const {
  std::vector<SpanRef> out;
  {
    std::shared_lock lock(mu_);
    auto it = by_span_.find(span_id);
    if (it == by_span_.end()) return out;
    const uint64_t base = ring_.front().seq;
    const SeqList& list = it->second;
    for (size_t i = list.head; i < list.seqs.size(); ++i) {
      out.push_back(ring_[list.seqs[i] - base].span);
    }
  }
  std::stable_sort(out.begin(), out.end(), StartLess);
  return out;
}

std::vector<SpanRef> SpanStore::FindOverlapping(int64_t from_unix_nano, int64_t to_unix_nano,
                                                absl::string_view name, size_t limit) const {
  std::vector<SpanRef> out;
  if (limit == 0 || to_unix_nano < from_unix_nano) return out;
  {
    std::shared_lock lock(mu_);
    if (ring_.empty()) return out;
    const uint64_t base = ring_.front().seq;
    // A span overlapping the window starts in [from - max_duration, to].
    const int64_t lowest_start = from_unix_nano - max_duration_ns_;
    auto it = by_start_.upper_bound({to_unix_nano, UINT64_MAX});
    while (it != by_start_.begin()) {
      --it;
      if (it->first < lowest_start) break;
      const SpanRef& s = ring_[it->second - base].span;
      if (s->end_unix_nano < from_unix_nano) continue;
      if (!name.empty() && s->name != name) continue;
      out.push_back(s);
      if (out.size() >= limit) break;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

SpanStore::ReadResult SpanStore::ReadFrom(uint64_t from_seq, size_t max) const {
  ReadResult r;
  std::shared_lock lock(mu_);
  const uint64_t first = ring_.empty() ? next_seq_ : ring_.front().seq;
  if (from_seq < first) {
    r.missed = first - from_seq;
    from_seq = first;
  }
  const uint64_t end = std::min<uint64_t>(next_seq_, from_seq + max);
  r.spans.reserve(end > from_seq ? end - from_seq : 0);
  for (uint64_t seq = from_seq; seq < end; ++seq) r.spans.push_back(ring_[seq - first].span);
  r.next_seq = std::max(from_seq, end);
  return r;
}

SpanStoreStats SpanStore::Stats() const {
  std::shared_lock lock(mu_);
  SpanStoreStats s;
  s.spans = ring_.size();
  s.bytes = bytes_;
  s.added_total = next_seq_;
  s.evicted_budget = evicted_budget_;
  s.evicted_age = evicted_age_;
  s.first_seq = ring_.empty() ? next_seq_ : ring_.front().seq;
  s.next_seq = next_seq_;
  return s;
}

}  // namespace fabricscope
