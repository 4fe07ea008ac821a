// Reading recordings back (DESIGN.md section 8): the feeder that turns
// recording lines into store samples and validated spans (and a header line
// into the ports and topology it describes), used by
// `fabricscope analyze` (offline, in the CLI process) and by
// `fabricscoped --replay` (ReplayWorker, live in the daemon).
//
// Bad input loses nothing else: a malformed line, a sample of an unknown
// counter or one older than its series' last sample, a span that fails
// validation — each is counted, the first few are kept as "line N: reason"
// messages, and the rest of the file is still read.
//
// Thread-safety: RecordingFeeder is not thread-safe (one reader). The
// ReplayWorker runs one thread and is started/stopped by its owner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/clock.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/ingest/span_validation.h"
#include "daemon/recording/recording.h"
#include "daemon/spans/span.h"
#include "daemon/spans/span_kind.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

class SpanStore;

struct RecordingStats {
  uint64_t lines = 0;  // non-blank lines read
  uint64_t samples = 0;
  uint64_t spans = 0;
  uint64_t malformed = 0;            // not JSON, or missing/invalid fields
  uint64_t unknown_counters = 0;     // series no signal rule maps (ignored, as when polling)
  uint64_t ignored_samples = 0;      // their samples
  uint64_t out_of_order = 0;         // samples older than their series' last one
  uint64_t rejected_spans = 0;       // failed span validation
  uint64_t recorded_judgements = 0;  // spans whose stall judgement the recording carried
  int64_t first_ts_ns = 0;           // of the samples fed
  int64_t last_ts_ns = 0;
  static constexpr size_t kMaxMessages = 20;
  std::vector<std::string> messages;  // the first kMaxMessages problems
};

class RecordingFeeder {
 public:
  // `offset_ns` is added to every timestamp (replay moves a recording to now).
  // `store` and `ports` outlive the feeder.
  RecordingFeeder(Store* store, PortInventory* ports, int64_t offset_ns = 0);

  // Feeds one line. Samples go into the store (series registered on first
  // sight; a sample naming both device and netdev also records the port in
  // `ports`); a valid span is appended to `spans`.
  void Feed(size_t line_no, absl::string_view line, std::vector<Span>* spans);

  const RecordingStats& stats() const { return stats_; }
  // The recording's header line (the first one), when it had one: its ports
  // (link rates) and topology (partners, PCI/GPU places) went into `ports`
  // when it was read, before any sample.
  const std::optional<RecordingHeader>& header() const { return header_; }

  // Judges the spans fed (and adds the spans derived from them), as ingest
  // does: StallLearner::PrepareSpans. Borrowed; null: derive only.
  void SetStallLearner(StallLearner* learner) { learner_ = learner; }

 private:
  void Problem(size_t line_no, absl::string_view what, uint64_t* counter);
  void AddSample(size_t line_no, const RecordingLine& l);
  void UseHeader(RecordingHeader header);

  Store* const store_;
  PortInventory* const ports_;
  const int64_t offset_ns_;
  StallLearner* learner_ = nullptr;
  IngestLimits limits_;
  std::unique_ptr<SpanKindClassifier> classifier_;
  struct Known {
    SeriesId id = kInvalidSeries;  // kInvalidSeries: unknown counter (skipped)
    int64_t last_ts_ns = INT64_MIN;
  };
  absl::flat_hash_map<SeriesKey, Known> series_;
  absl::flat_hash_map<std::string, bool> seen_ports_;  // "device/port/netdev"
  std::optional<RecordingHeader> header_;
  RecordingStats stats_;
};

// Reads `path` line by line and calls `line_fn(line_no, text)` for each
// non-blank line until it returns false. Errors only when the file cannot be
// opened or read.
absl::Status ForEachLine(const std::string& path,
                         const std::function<bool(size_t, absl::string_view)>& line_fn);

// The first and last sample timestamps of a recording (a quick pass that
// only looks at "ts_ns"); false when it has none.
bool RecordingTimeRange(const std::string& path, int64_t* first_ns, int64_t* last_ns);

// fabricscoped --replay: feeds a recording into the daemon's store and span
// store on its own thread. Timestamps are moved so the recording ends at the
// replay's start (speed "max", or any speed other than 1) or so that it starts
// now and runs in step with the wall clock (speed 1). Pacing: a line is fed
// when (its time - the first time) / speed has passed.
class ReplayWorker {
 public:
  // `store`, `ports`, `spans` and `clock` outlive the worker.
  ReplayWorker(std::string path, double speed, Store* store, PortInventory* ports, SpanStore* spans,
               Clock* clock);
  ~ReplayWorker();
  void Start();
  void Stop();
  bool finished() const;
  RecordingStats stats() const;
  // The replayed spans are judged by `learner` (borrowed; set before Start).
  void SetStallLearner(StallLearner* learner) { learner_ = learner; }

 private:
  void Run();

  const std::string path_;
  const double speed_;  // 0: as fast as possible
  Store* const store_;
  PortInventory* const ports_;
  SpanStore* const spans_;
  Clock* const clock_;
  StallLearner* learner_ = nullptr;
  StopSignal stop_;
  std::thread thread_;
  mutable std::mutex mu_;
  RecordingStats stats_;   // guarded by mu_, copied out at the end
  bool finished_ = false;  // guarded by mu_
};

}  // namespace fabricscope
