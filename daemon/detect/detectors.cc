#include "daemon/detect/detectors.h"

#include <utility>

#include "core/signals.h"
#include "daemon/detect/detector.h"
#include "daemon/detect/detector_registry.h"

namespace fabricscope {

DetectorEngine::DetectorEngine(DetectorOptions options, const PortInventory* ports,
                               EventLog* events, MetricsRegistry* metrics)
    : DetectorEngine(BuiltinDetectors(), std::move(options), ports, events, metrics) {}

DetectorEngine::DetectorEngine(const DetectorRegistry& registry, DetectorOptions options,
                               const PortInventory* ports, EventLog* events,
                               MetricsRegistry* metrics)
    : options_(std::move(options)),
      context_(std::make_unique<DetectorContext>(options_, ports, events, metrics)) {
  // Metrics first: the event counter's series for the enabled detectors'
  // kinds, then every registered detector's own families, so that they are
  // exported before the first episode.
  for (const auto& e : registry.entries()) {
    if (options_.Enabled(e.name)) context_->DeclareKinds(e.name, e.detector.kinds);
  }
  if (metrics != nullptr) {
    for (const auto& e : registry.entries()) {
      if (e.detector.declare_metrics) e.detector.declare_metrics(*metrics);
    }
  }
  for (const auto& e : registry.entries()) {
    if (options_.Enabled(e.name)) detectors_.push_back(e.detector.create(e.name, context_.get()));
  }
  per_series_ = detectors_.size() <= 64;
  for (size_t i = 0; i < detectors_.size(); ++i) {
    const uint64_t bit = per_series_ ? uint64_t{1} << i : 0;
    for (const MetricSpec* f : detectors_[i]->Families()) {
      by_family_[f].push_back({detectors_[i].get(), bit});
    }
  }
}

DetectorEngine::~DetectorEngine() = default;

const std::vector<DetectorEngine::Reader>* DetectorEngine::ReadersOf(const AppendEvent& ev) const {
  if (ev.signal == nullptr || ev.key == nullptr) return nullptr;
  auto it = by_family_.find(ev.signal->family);
  return it == by_family_.end() ? nullptr : &it->second;
}

void DetectorEngine::OnAppend(const AppendEvent& ev) {
  const std::vector<Reader>* readers = ReadersOf(ev);
  if (readers == nullptr) return;
  std::lock_guard lock(mu_);
  ObserveLocked(ev, *readers);
}

void DetectorEngine::OnAppends(absl::Span<const AppendEvent> events) {
  std::unique_lock lock(mu_, std::defer_lock);
  for (const AppendEvent& ev : events) {
    const std::vector<Reader>* readers = ReadersOf(ev);
    if (readers == nullptr) continue;
    if (!lock.owns_lock()) lock.lock();
    ObserveLocked(ev, *readers);
  }
}

void DetectorEngine::ObserveLocked(const AppendEvent& ev, const std::vector<Reader>& readers) {
  Interest* interest = per_series_ ? interest_.Get(ev.id) : nullptr;
  if (interest == nullptr) {
    // An id past the table (or too many detectors): asked on every sample.
    context_->Learn(*ev.key);
    for (const Reader& r : readers) {
      if (r.detector->Reads(*ev.signal)) r.detector->Observe(ev);
    }
    SweepLocked(ev.end_ns);
    return;
  }
  if (interest->signal != ev.signal) {
    // The series' first sample: its pairing (the same on every later
    // sample) and the detectors that read it.
    context_->Learn(*ev.key);
    interest->signal = ev.signal;
    interest->readers = 0;
    for (const Reader& r : readers) {
      if (r.detector->Reads(*ev.signal)) interest->readers |= r.bit;
    }
  }
  for (const Reader& r : readers) {
    if ((interest->readers & r.bit) != 0) r.detector->Observe(ev);
  }
  SweepLocked(ev.end_ns);
}

void DetectorEngine::Sweep(int64_t now_ns) {
  std::lock_guard lock(mu_);
  SweepLocked(now_ns);
}

void DetectorEngine::SweepLocked(int64_t now_ns) {
  // At most once a second of sample time (or at once after a step backwards).
  if (now_ns < next_sweep_ns_ && now_ns >= last_sweep_ns_) return;
  last_sweep_ns_ = now_ns;
  next_sweep_ns_ = now_ns + kSweepIntervalNs;
  for (auto& d : detectors_) {
    d->ForEachEpisode([&](Episode& ep) {
      if (ep.Stale(now_ns)) ep.Expire(context_.get());
    });
  }
}

size_t DetectorEngine::ActiveCount(absl::string_view detector) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& d : detectors_) {
    if (detector.empty() || d->name() == detector) n += d->Active();
  }
  return n;
}

}  // namespace fabricscope
