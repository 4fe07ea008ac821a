#include "daemon/detect/event_log.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace fabricscope {
namespace {

const MetricSpec& kEventsEvicted = DefineMetric(
    {.name = "fabricscope_detector_events_evicted_total",
     .type = MetricType::kCounter,
     .help = "Detector events dropped from the event ring (oldest first) because it held "
             "--max-events events.",
     .labels = {},
     .component = "detect"});

// The same port: the same RDMA device and port, or the same netdev.
bool SamePort(const DetectorEvent& a, const DetectorEvent& b) {
  return (!a.device.empty() && a.device == b.device && a.port == b.port) ||
         (!a.netdev.empty() && a.netdev == b.netdev);
}

// Appends the signals of `from` that `to` lacks.
void AddSignals(std::vector<std::string>* to, const std::vector<std::string>& from) {
  for (const std::string& s : from) {
    if (std::find(to->begin(), to->end(), s) == to->end()) to->push_back(s);
  }
}

}  // namespace

EventLog::EventLog(size_t capacity, MetricsRegistry* metrics)
    : capacity_(std::max<size_t>(1, capacity)) {
  if (metrics != nullptr) evicted_metric_ = &metrics->Counter(kEventsEvicted).Add({});
}

uint64_t EventLog::Open(DetectorEvent event) {
  std::unique_lock lock(mu_);
  event.id = next_id_++;
  if (events_.size() >= capacity_) {
    events_.pop_front();
    ++evicted_;
    if (evicted_metric_ != nullptr) evicted_metric_->Increment();
  }
  events_.push_back(std::move(event));
  DetectorEvent& e = events_.back();
  e.seen_unix_nano = std::max({e.seen_unix_nano, e.detected_unix_nano, e.start_unix_nano});
  if (e.merge_rank >= 0) MergeLocked(&e);
  const uint64_t id = e.id;
  // The observer hears of episodes: not of an event that joined one.
  if (observer_ != nullptr && e.merged_into == 0) {
    e.observed = true;
    DetectorEvent copy = e;
    lock.unlock();
    observer_->OnEventOpened(copy);
  }
  return id;
}

void EventLog::MergeLocked(DetectorEvent* e) {
  // Forget what can no longer take part: evicted, merged, or ended too long
  // before this start (debounced events open after their start, hence the
  // lead as a margin).
  const int64_t horizon = e->start_unix_nano - kMergeTailNs - kMergeLeadNs;
  std::erase_if(mergeable_, [&](uint64_t id) {
    const DetectorEvent* f = FindLocked(id);
    return f == nullptr || f->merged_into != 0 || (!f->active() && f->end_unix_nano < horizon);
  });
  // Join the episode already on the port.
  for (uint64_t id : mergeable_) {
    DetectorEvent* f = FindLocked(id);
    if (f == e || !SamePort(*f, *e) || f->merge_rank < e->merge_rank ||
        e->start_unix_nano < f->start_unix_nano - kMergeLeadNs) {
      continue;
    }
    // Within its reach (while active: the last interval its condition held),
    // or in its tail for a consequence of a higher-ranked episode.
    const int64_t reach = f->active() ? f->seen_unix_nano : f->end_unix_nano;
    const int64_t slack =
        f->merge_rank > e->merge_rank && e->merge_tail ? kMergeTailNs : kMergeGapNs;
    if (reach + slack >= e->start_unix_nano) {
      e->merged_into = f->id;
      AddSignals(&f->signals, e->signals);
      return;
    }
  }
  // Or absorb the lower-ranked events that led up to this one.
  std::vector<std::string> signals;
  for (uint64_t id : mergeable_) {
    DetectorEvent* g = FindLocked(id);
    if (g == e || !SamePort(*g, *e) || g->merge_rank >= e->merge_rank ||
        g->start_unix_nano < e->start_unix_nano - kMergeLeadNs) {
      continue;
    }
    g->merged_into = e->id;
    AddSignals(&signals, g->signals);
    e->start_unix_nano = std::min(e->start_unix_nano, g->start_unix_nano);
    e->merged_end = std::max({e->merged_end, g->merged_end, g->active() ? 0 : g->end_unix_nano});
    // What had joined g joins e (rare: a scan of the ring).
    for (DetectorEvent& x : events_) {
      if (x.merged_into == g->id) x.merged_into = e->id;
    }
  }
  if (!signals.empty()) {
    AddSignals(&signals, e->signals);
    e->signals = std::move(signals);
  }
  mergeable_.push_back(e->id);
}

std::vector<DetectorEvent> EventLog::All() const {
  std::lock_guard lock(mu_);
  return {events_.begin(), events_.end()};
}

void EventLog::Restore(std::vector<DetectorEvent> events, int64_t saved_unix_nano) {
  std::lock_guard lock(mu_);
  if (events.size() > capacity_) {
    events.erase(events.begin(), events.end() - static_cast<ptrdiff_t>(capacity_));
  }
  events_.clear();
  mergeable_.clear();  // restored events do not merge (their ranks are not saved)
  uint64_t id = events.empty() || events.front().id == 0 ? 1 : events.front().id;
  absl::flat_hash_map<uint64_t, uint64_t> renumbered;
  for (DetectorEvent& e : events) renumbered[e.id] = id++;
  id = events.empty() || events.front().id == 0 ? 1 : events.front().id;
  for (DetectorEvent& e : events) {
    e.id = id++;
    e.merge_rank = -1;
    if (e.merged_into != 0) {
      auto it = renumbered.find(e.merged_into);
      e.merged_into = it == renumbered.end() ? 0 : it->second;
    }
    if (e.active()) {
      e.end_unix_nano = std::max(saved_unix_nano, e.start_unix_nano);
      e.summary += " (still active when the daemon stopped)";
    }
    events_.push_back(std::move(e));
  }
  next_id_ = id;
}

DetectorEvent* EventLog::FindLocked(uint64_t id) {
  if (events_.empty() || id < events_.front().id || id > events_.back().id) return nullptr;
  // Ids are consecutive within the ring.
  return &events_[id - events_.front().id];
}

void EventLog::Update(uint64_t id, double peak, std::string summary, int64_t seen_unix_nano) {
  std::lock_guard lock(mu_);
  if (DetectorEvent* e = FindLocked(id); e != nullptr) {
    e->seen_unix_nano = std::max(e->seen_unix_nano, seen_unix_nano);
    e->peak = peak;
    e->summary = std::move(summary);
  }
}

void EventLog::Close(uint64_t id, int64_t end_unix_nano, double peak, std::string summary) {
  std::unique_lock lock(mu_);
  DetectorEvent closed;
  if (DetectorEvent* e = FindLocked(id); e != nullptr) {
    // An end at the start would read as "active": keep it strictly positive.
    e->end_unix_nano = std::max(end_unix_nano, e->start_unix_nano + 1);
    e->peak = peak;
    e->summary = std::move(summary);
    // The episode lasts as long as its last part.
    if (e->merged_into == 0) {
      e->end_unix_nano = std::max(e->end_unix_nano, e->merged_end);
    } else if (DetectorEvent* into = FindLocked(e->merged_into); into != nullptr) {
      if (into->active()) {
        into->merged_end = std::max(into->merged_end, e->end_unix_nano);
      } else {
        into->end_unix_nano = std::max(into->end_unix_nano, e->end_unix_nano);
      }
    }
    if (observer_ != nullptr && e->observed) closed = *e;
  } else if (observer_ != nullptr) {
    closed.id = id;
    closed.end_unix_nano = end_unix_nano;
    closed.peak = peak;
    closed.summary = std::move(summary);
  }
  lock.unlock();
  if (closed.id != 0) observer_->OnEventClosed(closed);
}

std::vector<DetectorEvent> EventLog::List(int64_t from_unix_nano, int64_t to_unix_nano,
                                          absl::string_view detector) const {
  std::vector<DetectorEvent> out;
  std::lock_guard lock(mu_);
  for (const DetectorEvent& e : events_) {
    if (e.merged_into != 0) continue;
    if (!detector.empty() && e.detector != detector) continue;
    if (e.start_unix_nano > to_unix_nano) continue;
    if (!e.active() && e.end_unix_nano < from_unix_nano) continue;
    out.push_back(e);
  }
  // Debounced detectors open an event after its start: order by start.
  std::stable_sort(out.begin(), out.end(), [](const DetectorEvent& a, const DetectorEvent& b) {
    return a.start_unix_nano < b.start_unix_nano;
  });
  return out;
}

uint64_t EventLog::evicted() const {
  std::lock_guard lock(mu_);
  return evicted_;
}

}  // namespace fabricscope
