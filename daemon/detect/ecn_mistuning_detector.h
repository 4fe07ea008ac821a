// The ecn_mistuning detector (per RDMA port, over a trailing --ecn-window,
// judged every 100 ms of sample time).
//
//  - kind "marking_too_late": discards at >= --ecn-drop-floor packets/s while
//    ECN marks + CNPs stay below --ecn-mark-ratio x the discard rate, on a port
//    whose ECN is enabled (or not known).
//  - kind "drops_ecn_disabled": the same discards with flat marks, on a port
//    whose ECN is disabled (dcb_config's fabricscope_ecn_enabled = 0 for
//    role np or rp on each of its RoCE priorities: the PFC-enabled ones where
//    PFC is known, else every priority with a known ECN enable). Flat marks
//    are then expected (congestion control is left to something else, e.g.
//    the collective library), so this is "drops with ECN disabled", not
//    marking too late.
//  - kind "too_aggressive": CNPs at >= --ecn-cnp-floor per second while
//    utilization (the busiest direction of port or netdev bytes over the
//    port's link rate, 100 Gb/s when unknown) < --ecn-low-utilization
//    and nothing is discarded.
//  - kind "cnp_ignored": rp_cnp_ignored rising.
//  - kind "ecn_disabled_on_pfc_priority" (per netdev and priority): PFC
//    enabled on a priority whose ECN (np or rp) is disabled (dcb_config).
//
// marking_too_late, drops_ecn_disabled and too_aggressive need
// --ecn-detection-time to start, cnp_ignored starts on the first interval; the four
// end after --ecn-restoration-time. ecn_disabled_on_pfc_priority starts and ends with the
// configuration (judged on each of its samples). Samples of netdevs that are
// not RDMA ports are ignored. Reports
// fabricscope_ecn_mistuning_active{device,port,kind} (1 while active),
// besides the events and fabricscope_detector_events_total every detector
// reports.
//
// Thread-safety: as every Detector (detector.h): called under the engine's
// lock.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "daemon/detect/detector.h"

namespace fabricscope {

class EcnMistuningDetector final : public Detector {
 public:
  static DetectorClass Class();

  EcnMistuningDetector(std::string name, DetectorContext* ctx);
  std::vector<const MetricSpec*> Families() const override;
  void Observe(const AppendEvent& ev) override;
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override;

 private:
  // Its options (--ecn-*), read at construction.
  struct Settings {
    double window_s;
    int64_t window_ns, detection_ns, restoration_ns;
    double drop_floor, mark_ratio, cnp_floor, low_utilization;
  };
  static Settings SettingsOf(const OptionValues& values);
  const Settings settings_;

  struct Sums {
    explicit Sums(int64_t w)
        : drops(w), marks(w), cnps(w), ignored(w), port_rx(w), port_tx(w), net_rx(w), net_tx(w) {}
    WindowSum drops, marks, cnps, ignored, port_rx, port_tx, net_rx, net_tx;
  };
  struct PortState : Sums {
    PortState(int64_t w, int64_t on, int64_t off)
        : Sums(w), too_late(on, off), ecn_off(on, off), aggressive(on, off), cnp_ignored(0, off) {}
    Episode too_late, ecn_off, aggressive, cnp_ignored;
    int64_t first_ns = INT64_MIN;
    int64_t last_eval_ns = INT64_MIN;
    int64_t next_eval_ns = INT64_MIN;
    double link_bps = 0;
  };
  // The last known PFC and ECN (np, rp) enable of one netdev priority; -1
  // while not known.
  struct PrioConfig {
    int pfc = -1, ecn_np = -1, ecn_rp = -1;
  };

  PortState& Port(const PortRef& ref);
  void Init(Episode* ep, const PortRef& ref, absl::string_view kind, int merge_rank);
  // Whether ECN is disabled on the RoCE priorities of `netdev` (see
  // drops_ecn_disabled); `what` says where ("priority 3 (np off, rp on)").
  bool EcnDisabled(const std::string& netdev, std::string* what) const;
  void Evaluate(PortState* p, const PortRef& ref, int64_t from, int64_t now);
  void ObserveConfig(const AppendEvent& ev);

  absl::flat_hash_map<std::string, PortState> ports_;  // "device/port"
  // ports_ insertions so far (an insertion may move every PortState).
  uint64_t port_inserts_ = 0;
  // Per series: the window sum(s) its samples add to (fixed by its signal)
  // and its port's state, valid while ports_ took no insertion and the
  // context's generation (what the series resolves to) is unchanged.
  enum class Input : uint8_t {
    kUnknown,
    kDrops,
    kMarks,
    kMarksAndCnps,  // CNPs sent: both
    kCnps,
    kIgnored,
    kPortRx,
    kPortTx,
    kNetRx,
    kNetTx
  };
  struct Cached {
    Input input = Input::kUnknown;
    PortState* port = nullptr;
    uint64_t inserts = 0;
    uint64_t generation = 0;
  };
  SeriesTable<Cached> cache_;
  static Input InputOf(const Signal& signal);
  absl::flat_hash_map<std::string, PrioConfig> prio_;  // "netdev|priority"
  absl::flat_hash_map<std::string, Episode> config_;   // "netdev|priority"
};

}  // namespace fabricscope
