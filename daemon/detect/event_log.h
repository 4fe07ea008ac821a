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
// Episodes: what one cause does to one port shows up in several signals and
// detectors at once (a PFC storm also bursts pause frames and makes the NIC
// count pause-storm events; a link flap makes ACK timeouts; a drop burst moves
// several discard counters). An event opened with merge_rank >= 0 on a port
// (same device/port, or same netdev) joins the episode already there instead
// of standing alone:
//  - it is merged into the earliest unmerged event of that port with a rank
//    >= its own that started at most kMergeLeadNs after it and reached up to
//    kMergeGapNs before its start (its end, or while active the last
//    interval its condition held), or, for a higher rank and an event marked
//    merge_tail (a consequence that outlasts its cause), up to kMergeTailNs
//    before it (the tail of the episode: ACK timeouts after a link flap);
//  - else it stands, and absorbs the unmerged events of that port with a
//    lower rank that started at most kMergeLeadNs before it (the first
//    bursts of a storm, seen before the storm's detection time), taking the
//    earliest start.
// A merged event keeps its id (updates and closes still reach it) and its
// merged_into; its signals join the episode's `signals`, its end extends the
// episode's once both ended; List() leaves it out. Ranks are the detectors'
// (DetectorContext): a storm outranks its bursts.
//
// An EventObserver (at most one, set before any detector runs) is told when an
// event opens and when it closes: the --incident-dir writer
// (daemon/recording/incident_writer.h) hangs off it. It hears of episodes
// only: an event that joins one on opening is not reported (an event opened
// alone and absorbed later was reported, and its close is too). Restore()
// tells it nothing (those episodes happened before this process).
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
  // What the episode was seen in, first seen first, each once: the signal
  // with its counter/reason, direction and priority where it has them
  // ("pfc_pause_frames rx prio 3", "discards rx_discards_phy"), or a kind.
  std::vector<std::string> signals;
  // Non-zero: this event is part of that event's episode (hidden by List).
  uint64_t merged_into = 0;
  // The episode-merge rank (see above); < 0: never merged (configuration
  // states). Not exported or saved.
  int merge_rank = -1;
  // May join a higher-ranked episode in its tail (retransmissions). Not
  // exported or saved.
  bool merge_tail = false;
  // The latest end of the events merged into this one that ended while it
  // was active (its end extends to it). Not exported or saved.
  int64_t merged_end = 0;
  // The end of the last interval its condition held (detected_unix_nano,
  // then Update's): how far an active episode reaches for joins. Not
  // exported or saved.
  int64_t seen_unix_nano = 0;
  // The observer was told it opened (EventLog internal).
  bool observed = false;

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
  static constexpr int64_t kMergeLeadNs = 1'000'000'000;
  static constexpr int64_t kMergeTailNs = 1'000'000'000;
  static constexpr int64_t kMergeGapNs = 200'000'000;

  // `metrics` may be null (offline analysis).
  EventLog(size_t capacity, MetricsRegistry* metrics);

  // Adds `event` (its id is assigned; merged into an episode or absorbing
  // others per its merge_rank, see above) and returns the id.
  uint64_t Open(DetectorEvent event);
  // Updates an open event; no-op if it was evicted. `seen_unix_nano`: the
  // end of the interval whose condition held (0: not known).
  void Update(uint64_t id, double peak, std::string summary, int64_t seen_unix_nano = 0);
  void Close(uint64_t id, int64_t end_unix_nano, double peak, std::string summary);

  // Events that overlap [from, to] (an active event extends to +inf), by
  // start time; `detector` "" matches all. Merged events are left out (their
  // episode lists their signals).
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
  void MergeLocked(DetectorEvent* event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_;
  prometheus::Counter* evicted_metric_ = nullptr;
  EventObserver* observer_ = nullptr;
  mutable std::mutex mu_;
  std::deque<DetectorEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
  // Ids of the events that may still take part in a merge (unmerged, with a
  // merge rank, active or ended within kMergeTailNs of the newest start
  // seen), oldest first; pruned on each Open. Bounded by the ring.
  std::deque<uint64_t> mergeable_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fabricscope
