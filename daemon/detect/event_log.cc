#include "daemon/detect/event_log.h"

#include <algorithm>
#include <utility>

namespace fabricscope {
namespace {

const MetricSpec& kEventsEvicted = DefineMetric(
    {.name = "fabricscope_detector_events_evicted_total",
     .type = MetricType::kCounter,
     .help = "Detector events dropped from the event ring (oldest first) because it held "
             "--max-events events.",
     .labels = {},
     .component = "detect"});

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
  const uint64_t id = events_.back().id;
  if (observer_ != nullptr) {
    DetectorEvent copy = events_.back();
    lock.unlock();
    observer_->OnEventOpened(copy);
  }
  return id;
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
  uint64_t id = events.empty() || events.front().id == 0 ? 1 : events.front().id;
  for (DetectorEvent& e : events) {
    e.id = id++;
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

void EventLog::Update(uint64_t id, double peak, std::string summary) {
  std::lock_guard lock(mu_);
  if (DetectorEvent* e = FindLocked(id); e != nullptr) {
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
    if (observer_ != nullptr) closed = *e;
  } else {
    closed.id = id;
    closed.end_unix_nano = end_unix_nano;
    closed.peak = peak;
    closed.summary = std::move(summary);
  }
  lock.unlock();
  if (observer_ != nullptr) observer_->OnEventClosed(closed);
}

std::vector<DetectorEvent> EventLog::List(int64_t from_unix_nano, int64_t to_unix_nano,
                                          absl::string_view detector) const {
  std::vector<DetectorEvent> out;
  std::lock_guard lock(mu_);
  for (const DetectorEvent& e : events_) {
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
