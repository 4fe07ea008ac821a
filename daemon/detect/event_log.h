// The detector event ring: every episode a detector reports (a PFC storm on
// eth2 priority 3 rx, ECN marking too late on mlx5_0/1, ...), kept in a
// bounded ring for Query.Events and `fabricscope events`.
//
// An event is opened when a detector's condition starts (end_unix_nano 0: still
// active), updated while it lasts (peak, summary) and closed when it ends.
// When the ring is full the oldest event goes (counted in
// fabricscope_detector_events_evicted_total); updates to an evicted event are
// ignored.
//
// An EventObserver (at most one, set before any detector runs) is told when an
// event opens and when it closes: the --incident-dir writer
// (daemon/recording/incident_writer.h) hangs off it. Restore() tells it
// nothing (those episodes happened before this process).
//
// Thread-safety: all methods are thread-safe (one mutex, O(1) per update,
// O(n) per List). The observer is called after that mutex is released, on
// the thread that opened or closed the event (a detector's, with the
// detector engine's lock held).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "core/metrics.h"

namespace fabricscope {

struct DetectorEvent {
  uint64_t id = 0;       // assigned by EventLog::Open, increasing
  std::string detector;  // its registered name (daemon/detect/register_all.cc), e.g. pfc_storm
  std::string kind;      // storm, marking_too_late, burst, out_of_sequence, link_downed, ...
  std::string device;    // "" where it does not apply or is unknown
  uint32_t port = 0;
  std::string netdev;
  std::string priority;   // "0".."7", "global" or ""
  std::string direction;  // "rx", "tx" or ""
  int64_t start_unix_nano = 0;
  int64_t end_unix_nano = 0;  // 0 while active
  // When the detector declared it: the end of the poll interval that met its
  // detection time (detection delay = detected - start of the real event).
  int64_t detected_unix_nano = 0;
  double peak = 0;      // the detector's measure at its worst (see each detector)
  std::string summary;  // one line for humans

  bool active() const { return end_unix_nano == 0; }
};

// Told about every event EventLog::Open and EventLog::Close see. Must not
// block and must not call back into the detectors (it runs under the
// detector engine's lock): O(1)-ish work, no I/O.
class EventObserver {
 public:
  virtual ~EventObserver() = default;
  // `event` as opened, with its id.
  virtual void OnEventOpened(const DetectorEvent& event) = 0;
  // The event as closed: id, end_unix_nano, peak and summary are always set;
  // the other fields only when the ring still held it (it may evict an event
  // before it closes).
  virtual void OnEventClosed(const DetectorEvent& event) = 0;
};

class EventLog {
 public:
  // `metrics` may be null (offline analysis).
  EventLog(size_t capacity, MetricsRegistry* metrics);

  // Adds `event` (its id is assigned) and returns the id.
  uint64_t Open(DetectorEvent event);
  // Updates an open event; no-op if it was evicted.
  void Update(uint64_t id, double peak, std::string summary);
  void Close(uint64_t id, int64_t end_unix_nano, double peak, std::string summary);

  // Events that overlap [from, to] (an active event extends to +inf), by
  // start time; `detector` "" matches all.
  std::vector<DetectorEvent> List(int64_t from_unix_nano, int64_t to_unix_nano,
                                  absl::string_view detector) const;
  // Every held event in id order (the state snapshot).
  std::vector<DetectorEvent> All() const;
  // Refills the log from a snapshot before any detector runs: `events` in id
  // order; ids are kept when consecutive, else renumbered from the first. An
  // event still active when it was saved is closed at `saved_unix_nano` (the
  // detector starts over and reopens it if the condition persists).
  void Restore(std::vector<DetectorEvent> events, int64_t saved_unix_nano);
  uint64_t evicted() const;
  size_t capacity() const { return capacity_; }

  // Sets the observer (null: none). Not synchronised with Open/Close: call it
  // before any detector runs. `observer` outlives the log's use.
  void SetObserver(EventObserver* observer) { observer_ = observer; }

 private:
  DetectorEvent* FindLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  prometheus::Counter* evicted_metric_ = nullptr;
  EventObserver* observer_ = nullptr;
  mutable std::mutex mu_;
  std::deque<DetectorEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fabricscope
