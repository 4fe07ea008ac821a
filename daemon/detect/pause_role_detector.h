// The pause_role detector: which side of a PFC pause a port is on, per
// (netdev, priority), so that fleet rules (deploy/prometheus/
// fabricscope-fleet.rules.yml) can tell the host that starts a PFC storm from
// the hosts that only suffer it without guessing from raw rates.
//
//  - kind "pause_originator": this NIC pauses its switch. A poll interval of
//    the tx pause time (fabricscope_pfc_pause_seconds_total{direction="tx"}
//    delta / interval) counts when its fraction is >= --pause-role-fraction
//    while the port's own rx pause on the same priority is clear (the last rx
//    interval's fraction < --pause-role-clear-fraction; a port without an rx
//    pause-time series counts as clear). A victim that passes pause upstream
//    is paused itself, so it is not an originator. It starts once the
//    condition held for --pause-role-detection-time and ends after
//    --pause-role-restoration-time without it. Also (priority "") while the NIC's
//    own pause-storm counters (fabricscope_pause_storm_events_total, mlx5
//    tx_pause_storm_*_events: its storm prevention is acting) rise, with the
//    same restoration time. Peak: the highest tx pause fraction (event rate
//    for the NIC counters).
//  - kind "pause_receiver": the switch pauses this port: the rx pause
//    fraction is >= --pause-role-fraction for --pause-role-detection-time; ends after
//    --pause-role-restoration-time below it. Peak: the highest rx pause fraction.
//
// Reports fabricscope_pfc_pause_role{netdev,priority,role} (role
// "originator" or "receiver"): 1 while the role holds, else 0; the series
// exist (0) from the first sample of the port/priority, like
// fabricscope_pfc_storm_active. Besides the events and
// fabricscope_detector_events_total every detector reports.
//
// Thread-safety: as every Detector (detector.h): called under the engine's
// lock. O(1) per sample.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "daemon/detect/detector.h"

namespace fabricscope {

class PauseRoleDetector final : public Detector {
 public:
  static DetectorClass Class();

  PauseRoleDetector(std::string name, DetectorContext* ctx);
  std::vector<const MetricSpec*> Families() const override;
  void Observe(const AppendEvent& ev) override;
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override;

 private:
  // Its options (--pause-role-*), read at construction.
  const double fraction_;
  const double clear_fraction_;
  const int64_t detection_ns_;
  const int64_t restoration_ns_;

  // One (netdev, priority): the two role episodes and the last rx fraction.
  struct PriorityState {
    PriorityState(int64_t on_ns, int64_t off_ns)
        : originator(on_ns, off_ns), receiver(on_ns, off_ns) {}
    Episode originator;
    Episode receiver;
    double last_rx_fraction = 0;  // of the last rx interval seen (0: none yet)
  };

  PriorityState& State(const AppendEvent& ev, const std::string& priority);
  void InitEpisode(Episode& ep, const AppendEvent& ev, const std::string& priority,
                   const std::string& role, const std::string& kind, const std::string& direction);

  // Keyed by "netdev|priority".
  absl::node_hash_map<std::string, PriorityState> priorities_;
  // The NIC's pause-storm counters, keyed by series (priority "").
  absl::node_hash_map<SeriesId, Episode> nic_;
  // Per pause-time series: its (netdev, priority) state (node_hash_map: the
  // pointer stays valid) and whether it is the rx direction; both fixed by
  // its key and signal.
  struct Cached {
    PriorityState* state = nullptr;
    bool rx = false;
  };
  SeriesTable<Cached> cache_;
  Cached cache_scratch_;  // a series with no table entry
};

}  // namespace fabricscope
