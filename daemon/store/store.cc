#include "daemon/store/store.h"

#include <algorithm>

namespace fabricscope {

// First implementation: an uncompressed ring of raw samples per series, sized
// so that all rings together stay within the budget. The compressed chunk
// store replaces the inside of this class without changing its interface.
struct Store::Series {
  Series(SeriesKey k, Signal s)
      : key(std::move(k)), signal(std::move(s)), tracker(signal.semantics) {}
  const SeriesKey key;
  const Signal signal;
  mutable absl::Mutex mu;
  CounterTracker tracker ABSL_GUARDED_BY(mu);
  std::deque<Sample> samples ABSL_GUARDED_BY(mu);
  SeriesState state ABSL_GUARDED_BY(mu);
};

namespace {
constexpr size_t kBytesPerSample = sizeof(Sample);
constexpr size_t kSeriesOverhead = 512;
}  // namespace

Store::Store(StoreOptions options) : options_(options), per_series_capacity_(1 << 16) {}
Store::~Store() = default;

SeriesId Store::Register(const SeriesKey& key, const Signal& signal) {
  absl::MutexLock lock(&table_mu_);
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return it->second;
  SeriesId id = static_cast<SeriesId>(series_.size());
  series_.push_back(std::make_unique<Series>(key, signal));
  by_key_.emplace(key, id);
  // Share the budget evenly between series.
  uint64_t per = options_.memory_bytes / series_.size();
  per = per > kSeriesOverhead ? per - kSeriesOverhead : 0;
  per_series_capacity_ = std::max<size_t>(2, per / kBytesPerSample);
  return id;
}

std::optional<SeriesId> Store::Find(const SeriesKey& key) const {
  absl::ReaderMutexLock lock(&table_mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

Store::Series* Store::Lookup(SeriesId id) const {
  absl::ReaderMutexLock lock(&table_mu_);
  return id < series_.size() ? series_[id].get() : nullptr;
}

void Store::Append(SeriesId id, int64_t ts_ns, uint64_t raw) {
  size_t capacity;
  Series* s;
  {
    absl::ReaderMutexLock lock(&table_mu_);
    if (id >= series_.size()) return;
    s = series_[id].get();
    capacity = per_series_capacity_;
  }
  absl::MutexLock lock(&s->mu);
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
  st.has_value = true;
  st.last_ts_ns = ts_ns;
  st.last_raw = raw;
  ++st.samples;
  s->samples.push_back({ts_ns, raw});
  while (s->samples.size() > capacity) {
    s->samples.pop_front();
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
}

void Store::SetPresent(SeriesId id, bool present) {
  Series* s = Lookup(id);
  if (s == nullptr) return;
  absl::MutexLock lock(&s->mu);
  s->state.present = present;
}

std::vector<SeriesSnapshot> Store::Snapshot() const {
  std::vector<Series*> all;
  {
    absl::ReaderMutexLock lock(&table_mu_);
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
      absl::MutexLock lock(&all[i]->mu);
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
  absl::MutexLock lock(&s->mu);
  snap.state = s->state;
  return snap;
}

std::vector<Sample> Store::ReadRange(SeriesId id, int64_t from_ns, int64_t to_ns) const {
  std::vector<Sample> out;
  Series* s = Lookup(id);
  if (s == nullptr) return out;
  absl::MutexLock lock(&s->mu);
  for (const Sample& sample : s->samples) {
    if (sample.ts_ns >= from_ns && sample.ts_ns <= to_ns) out.push_back(sample);
  }
  return out;
}

StoreStats Store::Stats() const {
  StoreStats stats;
  std::vector<Series*> all;
  {
    absl::ReaderMutexLock lock(&table_mu_);
    for (const auto& s : series_) all.push_back(s.get());
  }
  stats.series = all.size();
  stats.bytes = all.size() * kSeriesOverhead;
  for (Series* s : all) {
    absl::MutexLock lock(&s->mu);
    stats.samples += s->samples.size();
    if (!s->samples.empty() &&
        (stats.oldest_ts_ns == 0 || s->samples.front().ts_ns < stats.oldest_ts_ns)) {
      stats.oldest_ts_ns = s->samples.front().ts_ns;
    }
  }
  stats.bytes += stats.samples * kBytesPerSample;
  stats.evicted_samples = evicted_.load(std::memory_order_relaxed);
  return stats;
}

void Store::UpsertPort(const PortInfo& port) {
  absl::MutexLock lock(&ports_mu_);
  for (PortInfo& p : ports_) {
    if (p.device == port.device && p.port == port.port) {
      p = port;
      return;
    }
  }
  ports_.push_back(port);
}

std::vector<PortInfo> Store::Ports() const {
  absl::MutexLock lock(&ports_mu_);
  return ports_;
}

}  // namespace fabricscope
