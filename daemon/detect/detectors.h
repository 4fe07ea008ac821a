// The detector engine (DESIGN.md section 6): runs the detectors, small state
// machines fed by every sample the store takes (Store::SetObserver), so they
// see each poll interval exactly once, live, on replay and in offline
// analysis alike.
//
// The detectors are plugins (daemon/detect/detector.h is the interface): one
// file pair each, documenting its kinds and rules, and one line each in the
// registration list, daemon/detect/register_all.cc, the one place their names
// live (--detectors selects among them):
//
//  - pfc_storm         daemon/detect/pfc_storm_detector.h
//  - ecn_mistuning     daemon/detect/ecn_mistuning_detector.h
//  - microburst        daemon/detect/microburst_detector.h
//  - retransmit_spike  daemon/detect/retransmit_spike_detector.h
//  - link_degradation  daemon/detect/link_degradation_detector.h
//  - pause_role        daemon/detect/pause_role_detector.h
//
// Options and defaults: daemon/detect/detector_options.h. Building blocks
// (debouncer, window sums, rising rates): daemon/detect/episode.h.
//
// Each detector reports episodes as events (EventLog), a state gauge (1 while
// active) and fabricscope_detector_events_total{detector,kind} (declared here,
// in the shared DetectorContext, with a series for each kind of each enabled
// detector).
//
// An active episode whose input stops (its device vanished, its counter files
// became unreadable, its collector stopped) would otherwise stay active, and
// its gauge at 1, forever: no interval would ever judge it over. So once a
// second (of sample time, and on every Sweep) episodes not judged for
// max(5 s, 5 x the interval they were judged at) are ended at the end of the
// last interval they saw, their summary saying why, and their gauge drops to
// 0; when the input comes back a new episode needs the detection time again.
//
// Per sample the engine does no string work: on a series' first sample it
// learns the series' port pairing and asks each detector of its family
// whether it reads the series (Detector::Reads); later samples find that
// list by series id (SeriesTable).
//
// Thread-safety: OnAppend may be called concurrently from tier threads; one
// mutex guards all detector state (O(1) work per relevant sample; samples of
// families no detector reads return before taking it; OnAppends, a tick's
// events from Store::Append(tick, readings), takes it once for up to 32).
// Every call into a detector or the DetectorContext happens with it held.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/metrics.h"
#include "daemon/detect/detector.h"
#include "daemon/detect/detector_options.h"
#include "daemon/detect/event_log.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

class DetectorRegistry;

class DetectorEngine final : public AppendObserver {
 public:
  // Runs the built-in detectors (BuiltinDetectors()) named in
  // options.enabled. `ports` (the port inventory: link rates) and `metrics`
  // may be null; `events` not. All three outlive the engine.
  DetectorEngine(DetectorOptions options, const PortInventory* ports, EventLog* events,
                 MetricsRegistry* metrics);
  // The same with the detectors of `registry` (read during construction
  // only). Names in options.enabled that `registry` lacks are ignored
  // (DetectorOptions::Validate() rejects them for the built-in one).
  DetectorEngine(const DetectorRegistry& registry, DetectorOptions options,
                 const PortInventory* ports, EventLog* events, MetricsRegistry* metrics);
  ~DetectorEngine() override;

  void OnAppend(const AppendEvent& event) override;
  // The same for each event, under one lock (taken at the first event of a
  // family some detector reads).
  void OnAppends(absl::Span<const AppendEvent> events) override;

  // Ends active episodes whose input stopped (see above) as of `now_ns`
  // (unix ns). The daemon calls it on every medium-tier tick, so that this
  // happens also when no detector input is appended any more; OnAppend calls
  // it too (replay and offline analysis have no ticks). Rate-limited to once
  // a second of `now_ns`; each sweep looks at every episode once.
  void Sweep(int64_t now_ns);

  // Active episodes of `detector` (of all detectors when empty), for tests
  // and `top`.
  size_t ActiveCount(absl::string_view detector) const;

 private:
  const DetectorOptions options_;
  std::unique_ptr<DetectorContext> context_;
  std::vector<std::unique_ptr<Detector>> detectors_;
  // Family -> detectors that read it; immutable after construction.
  // Family -> the detectors that read it, each with its bit in
  // Interest::readers; immutable after construction.
  struct Reader {
    Detector* detector;
    uint64_t bit;
  };
  absl::flat_hash_map<const MetricSpec*, std::vector<Reader>> by_family_;
  // Per-series interest needs a bit per detector: with more than 64 the
  // engine asks Reads() on every sample instead.
  bool per_series_ = true;
  mutable std::mutex mu_;
  // Per series id: the detectors of its family that read it (bits of
  // Reader::bit), resolved on its first sample (`signal` set: resolved; a
  // different signal under the same id is resolved again). 16 bytes a series.
  struct Interest {
    const Signal* signal = nullptr;
    uint64_t readers = 0;
  };
  SeriesTable<Interest> interest_ ABSL_GUARDED_BY(mu_);
  static constexpr int64_t kSweepIntervalNs = 1'000'000'000;
  int64_t next_sweep_ns_ ABSL_GUARDED_BY(mu_) = INT64_MIN;
  int64_t last_sweep_ns_ ABSL_GUARDED_BY(mu_) = INT64_MIN;

  void SweepLocked(int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The detectors of ev's family (nullptr: none reads it); immutable.
  const std::vector<Reader>* ReadersOf(const AppendEvent& ev) const;
  // OnAppend's work for an event that ReadersOf found `readers` for.
  void ObserveLocked(const AppendEvent& ev, const std::vector<Reader>& readers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace fabricscope
