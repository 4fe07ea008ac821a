// Detectors (DESIGN.md section 6): small state machines fed by every sample the
// store takes (Store::SetObserver), so they see each poll interval exactly
// once, live, on replay and in offline analysis alike.
//
//  - pfc_storm (per netdev, priority, direction): kind "storm" when the pause
//    fraction of each poll interval (fabricscope_pfc_pause_seconds delta /
//    interval) is >= pfc_storm_fraction for pfc_storm_detection; it ends after
//    pfc_storm_restoration of intervals below it (the SONiC PFC watchdog rule;
//    the debouncer makes storm/restore flapping within those times
//    impossible). Kind "nic_pause_storm" while the NIC's own pause-storm
//    counters (fabricscope_pause_storm_events_total) rise (priority "",
//    direction "tx"). Peak: the highest pause fraction.
//  - microburst (per series of microburst_signals): an episode of poll
//    intervals the store judged microbursts (rate >= --burst-factor x the
//    trailing 1 s mean and above the signal's floor, aggregates.h); bursts
//    closer than microburst_gap belong to one episode. Peak: the highest rate.
//  - ecn_mistuning (per RDMA port, over a trailing ecn_window):
//    marking_too_late: discards at >= ecn_drop_floor packets/s while ECN marks +
//    CNPs stay below ecn_mark_ratio x the discard rate; too_aggressive: CNPs at
//    >= ecn_cnp_floor per second while utilization < ecn_low_utilization and
//    nothing is discarded; cnp_ignored: rp_cnp_ignored rising;
//    ecn_disabled_on_pfc_priority: PFC enabled on a priority whose ECN (np or
//    rp) is disabled (dcb_config). Each needs ecn_detection to start and
//    ecn_restoration to end.
//  - retransmit_spike (per port and counter out_of_sequence, packet_seq_err,
//    local_ack_timeout_err): the rate over retransmit_window >=
//    retransmit_floor and >= retransmit_factor x the rate over the trailing
//    retransmit_baseline (the baseline does not learn during a spike).
//  - link_degradation (per port): fec_corrected_rising (corrected FEC blocks or
//    bits: rate over 1 s >= fec_corrected_factor x the 60 s baseline and above
//    a floor), fec_uncorrectable, symbol_errors, link_downed,
//    link_error_recovery (any increase; the episode lasts while increases come
//    closer than link_hold).
//
// Each detector reports episodes as events (EventLog), a state gauge (1 while
// active) and fabricscope_detector_events_total{detector,kind}.
//
// An active episode whose input stops (its device vanished, its counter files
// became unreadable, its collector stopped) would otherwise stay active, and
// its gauge at 1, forever: no interval would ever judge it over. So once a
// second (of sample time, and on every Sweep) episodes not judged for
// max(5 s, 5 x the interval they were judged at) are ended at the end of the
// last interval they saw, their summary saying why, and their gauge drops to
// 0; when the input comes back a new episode needs the detection time again.
//
// Thread-safety: OnAppend may be called concurrently from tier threads; one
// mutex guards all detector state (O(1) work per relevant sample; samples of
// families no detector reads return before taking it).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/detect/event_log.h"
#include "core/metrics.h"
#include "store/store.h"

namespace fabricscope {

inline constexpr const char* kDetectorNames[] = {"pfc_storm", "ecn_mistuning", "microburst",
                                                 "retransmit_spike", "link_degradation"};

struct DetectorOptions {
  // --detectors: the enabled detectors (names above).
  std::vector<std::string> enabled = {std::begin(kDetectorNames), std::end(kDetectorNames)};

  double pfc_storm_fraction = 0.8;
  absl::Duration pfc_storm_detection = absl::Milliseconds(200);
  absl::Duration pfc_storm_restoration = absl::Milliseconds(200);

  std::vector<std::string> microburst_signals = {"port_bytes",       "netdev_bytes",
                                                 "pfc_pause_frames", "ecn_marked_packets",
                                                 "cnp_sent",         "discards"};
  absl::Duration microburst_gap = absl::Milliseconds(200);

  absl::Duration ecn_window = absl::Seconds(1);
  absl::Duration ecn_detection = absl::Milliseconds(300);
  absl::Duration ecn_restoration = absl::Seconds(1);
  double ecn_drop_floor = 100;       // discarded packets per second
  double ecn_mark_ratio = 0.1;       // marks + CNPs per discard below which marking is "flat"
  double ecn_cnp_floor = 1000;       // CNPs per second
  double ecn_low_utilization = 0.3;  // of the port's link rate
  double default_link_gbps = 100;    // when the port's rate is unknown

  absl::Duration retransmit_window = absl::Seconds(1);
  absl::Duration retransmit_baseline = absl::Seconds(30);
  absl::Duration retransmit_restoration = absl::Seconds(1);
  double retransmit_floor = 10;  // events per second
  double retransmit_factor = 4;

  double fec_corrected_factor = 10;
  double fec_block_floor = 100;  // corrected blocks per second
  double fec_bit_floor = 10000;  // corrected bits per second
  absl::Duration fec_baseline = absl::Seconds(60);
  absl::Duration link_hold = absl::Seconds(2);

  size_t max_events = 10000;  // --max-events: the event ring

  bool Enabled(absl::string_view detector) const;
  // Checks names and ranges; the error names the option.
  absl::Status Validate() const;
};

class Detector;

class DetectorEngine final : public AppendObserver {
 public:
  // `store` (for the port inventory) and `metrics` may be null; `events` not.
  DetectorEngine(DetectorOptions options, const Store* store, EventLog* events,
                 MetricsRegistry* metrics);
  ~DetectorEngine() override;

  void OnAppend(const AppendEvent& event) override;

  // Ends active episodes whose input stopped (see above) as of `now_ns`
  // (unix ns). The daemon calls it on every medium-tier tick, so that this
  // happens also when no detector input is appended any more; OnAppend calls
  // it too (replay and offline analysis have no ticks). Rate-limited to once
  // a second of `now_ns`; each sweep looks at every episode once.
  void Sweep(int64_t now_ns);

  // Active episodes, for tests and `top`: "detector/kind" -> count.
  size_t ActiveCount(absl::string_view detector) const;

  // What detectors share: where events go, metrics, the port inventory.
  class Context;

 private:
  const DetectorOptions options_;
  std::unique_ptr<Context> context_;
  std::vector<std::unique_ptr<Detector>> detectors_;
  // Family -> detectors that read it; immutable after construction.
  absl::flat_hash_map<const MetricSpec*, std::vector<Detector*>> by_family_;
  mutable std::mutex mu_;
  static constexpr int64_t kSweepIntervalNs = 1'000'000'000;
  int64_t next_sweep_ns_ ABSL_GUARDED_BY(mu_) = INT64_MIN;
  int64_t last_sweep_ns_ ABSL_GUARDED_BY(mu_) = INT64_MIN;

  void SweepLocked(int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace fabricscope
