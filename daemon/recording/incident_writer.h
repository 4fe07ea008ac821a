// IncidentWriter (--incident-dir): the evidence of every detector episode,
// kept on disk after the store has moved on. The SRE who arrives an hour
// later (or after a restart) still has the 10 ms samples of the storm.
//
// For each episode the detectors report (it is the EventLog's observer,
// daemon/detect/event_log.h), it writes one recording in the JSON Lines
// format of docs/recording.md: a first line {"incident":{...}} naming the
// episodes, the port and the window (IncidentHeader, recording.h), then
// every sample of the port's series and every span in the port's scope (the
// correlator's SpanScope: hints, GPU placement, or no hint at all) from
// `before` before the episode started to `after` after it ended, in time
// order. `fabricscope analyze FILE` and `fabricscoped --replay FILE` read it
// as they read any recording; `fabricscope incidents` lists the directory.
//
// The port's series: those whose device and port, or whose netdev, are the
// episode's (the port inventory completes the one the event lacks); an
// episode that names no port records every series.
//
// When: a recording is written once its window has closed, i.e. realtime
// reached the last end + `after`. Episodes on one port whose windows overlap
// share one recording: an episode that opens on a port while a recording of
// that port is still waiting joins it (its window grows, and it waits for
// that episode to end too). An episode still active `max_duration` after the
// recording's first episode began is "capped": the recording is written then,
// up to that instant, once (the episode's later end writes nothing). So one
// recording covers at most before + max_duration + after.
//
// Bounds: at most `max_pending` recordings wait at once; an episode that
// would need another is not recorded (fabricscope_incidents_dropped_total,
// which also counts the episodes a bounded Flush at stop had no time for).
// A recording lists at most `max_episodes` episodes (the rest are counted in
// the header) and `max_spans` spans. The directory holds at most
// `dir_max_bytes` of recordings: after each write the oldest are deleted
// (fabricscope_incidents_deleted_total) until the rest fit; a recording that
// alone would exceed the bound is not kept (write error, reason too_large).
//
// Files: DIR/incident-<first start, UTC, ms>-<detector>-<kind>-<port>.jsonl,
// so names sort by time (the listing and the deletion order). Written to a
// hidden temporary file in DIR (mode 0600) and renamed; not fsynced (a crash
// may lose the last recording, never leave a torn one under its name).
// Leftover temporary files are removed at Start. DIR is created (0700) when
// missing.
//
// Errors (DIR not creatable or writable, disk full, a failed rename) are
// counted in fabricscope_incident_write_errors_total{reason="io"}, logged at
// most once per 10 s, and lose that recording only: the daemon goes on.
//
// Threads: OnEventOpened/OnEventClosed run on the detectors' threads (under
// the detector engine's lock): they only update the table of waiting
// recordings under the writer's own mutex, never touch the disk. Start() runs
// one thread that wakes every `poll_period` and writes what is due; reading
// the store and span store and writing happen there. RunOnce() is that step
// on the calling thread (tests drive it with a FakeClock and never Start).
//
// Ownership: every pointer is borrowed and must outlive the writer.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "daemon/detect/event_log.h"
#include "daemon/recording/recording.h"
#include "daemon/spans/span_store.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

struct IncidentOptions {
  std::string dir;  // must not be empty
  absl::Duration before = absl::Seconds(30);
  absl::Duration after = absl::Seconds(30);
  absl::Duration max_duration = absl::Minutes(5);
  uint64_t dir_max_bytes = 1ull << 30;
  size_t max_pending = 64;
  size_t max_episodes = 256;
  size_t max_spans = 100000;
  absl::Duration poll_period = absl::Milliseconds(250);
};

struct IncidentStats {
  uint64_t written = 0;       // recordings written
  uint64_t bytes = 0;         // their bytes
  uint64_t deleted = 0;       // deleted to stay under dir_max_bytes
  uint64_t dropped = 0;       // episodes not recorded (too many waiting)
  uint64_t write_errors = 0;  // recordings lost to an error
};

// One recording in the directory (ListIncidentFiles).
struct IncidentFile {
  std::string name;  // file name within the directory
  uint64_t size = 0;
};

// The recordings in `dir` (incident-*.jsonl, regular files), oldest first (by
// name). An unreadable directory is an error.
absl::StatusOr<std::vector<IncidentFile>> ListIncidentFiles(const std::string& dir);

class IncidentWriter final : public EventObserver {
 public:
  // `spans` and `metrics` may be null.
  IncidentWriter(IncidentOptions options, const Store* store, const SpanStore* spans,
                 const PortInventory* ports, Clock* clock, MetricsRegistry* metrics);
  ~IncidentWriter() override;
  IncidentWriter(const IncidentWriter&) = delete;
  IncidentWriter& operator=(const IncidentWriter&) = delete;

  // EventObserver: O(pending recordings) under the writer's mutex, no I/O.
  void OnEventOpened(const DetectorEvent& event) override;
  void OnEventClosed(const DetectorEvent& event) override;

  // Prepares the directory (created 0700 when missing, leftover temporary
  // files removed, the size bound applied; trouble is counted and logged,
  // not fatal) and starts the thread.
  void Start();
  // Joins the thread (within one step). What still waits stays pending.
  void Stop();
  // One step: writes every recording whose window has closed (or whose
  // episode reached max_duration). Returns the number written.
  size_t RunOnce();
  // Writes every waiting recording now, its window cut at now (closed
  // "stopped" where it was not over), oldest first, starting no write after
  // `budget` (steady clock): the daemon calls it after the scheduler stopped,
  // so a restart loses no episode while SIGTERM stays bounded. The episodes
  // of recordings not written in time count as dropped. Returns the number
  // written.
  size_t Flush(absl::Duration budget = absl::InfiniteDuration());

  IncidentStats stats() const;
  size_t pending() const;

 private:
  // The recordings waiting for their window to close: one per port.
  struct Group {
    uint64_t uid = 0;
    std::string device;
    uint32_t port = 0;
    std::string netdev;
    int64_t first_start = INT64_MAX;
    int64_t last_end = INT64_MIN;  // of its ended episodes
    size_t open = 0;               // episodes still active
    std::vector<DetectorEvent> episodes;
    uint64_t omitted = 0;
  };
  // A recording to write: its header (window, port, episodes).
  struct Job {
    IncidentHeader header;
  };

  // The job of `g`, its window ending at `to_unix_nano`, closed as `closed`.
  Job MakeJob(Group g, int64_t to_unix_nano, std::string closed) const;
  // Removes the due groups (all of them when `flush`) and returns their jobs.
  std::vector<Job> TakeDue(bool flush);
  // Writes one recording; false on error (counted and logged).
  bool Write(const Job& job);
  // Creates the directory when missing (0700).
  bool EnsureDir();
  // Deletes the oldest recordings until the directory fits the bound.
  void Prune();
  void Error(const std::string& reason, const std::string& what);

  const IncidentOptions options_;
  const Store* const store_;
  const SpanStore* const spans_;
  const PortInventory* const ports_;
  Clock* const clock_;
  prometheus::Counter* written_metric_ = nullptr;
  prometheus::Counter* bytes_metric_ = nullptr;
  prometheus::Counter* deleted_metric_ = nullptr;
  prometheus::Counter* dropped_metric_ = nullptr;
  prometheus::Counter* io_errors_metric_ = nullptr;
  prometheus::Counter* too_large_metric_ = nullptr;
  prometheus::Gauge* dir_bytes_metric_ = nullptr;
  LogRateLimiter log_limiter_{absl::Seconds(10)};

  // Guards groups_, open_ and stats_ (never held during I/O).
  mutable std::mutex mu_;
  std::vector<Group> groups_;
  uint64_t next_uid_ = 1;
  // Active episodes of waiting groups: event id -> its group's uid.
  absl::flat_hash_map<uint64_t, uint64_t> open_;
  IncidentStats stats_;

  // Serialises writes (the thread, Flush and tests).
  std::mutex write_mu_;

  StopSignal stop_;
  std::thread thread_;
};

}  // namespace fabricscope
