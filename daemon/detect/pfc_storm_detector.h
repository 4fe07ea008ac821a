// The pfc_storm detector (per netdev, priority, direction).
//
//  - kind "storm": the pause fraction of each poll interval
//    (fabricscope_pfc_pause_seconds delta / interval) is >= --pfc-storm-fraction
//    for --pfc-storm-detection-time; it ends after --pfc-storm-restoration-time of intervals
//    below it (the SONiC PFC watchdog rule; the debouncer makes storm/restore
//    flapping within those times impossible). Peak: the highest pause fraction.
//    On ice and i40e, which count XOFF frames but no pause time, the input is
//    the signal table's pause-time estimate (source pause_estimate, Signal::
//    estimated: XOFF frames x 65535 quanta x 512 bit times at the link rate,
//    an upper bound); the event's signal and summary say "estimated". The
//    detector reads the family, never the driver.
//  - kind "nic_pause_storm": while the NIC's own pause-storm counters
//    (fabricscope_pause_storm_events_total) rise (priority "", direction
//    "tx"); ends after --pfc-storm-restoration-time without a rise. Peak: the highest
//    event rate.
//
// Reports fabricscope_pfc_storm_active{netdev,priority,direction} (1 while
// active) and fabricscope_pfc_storms_total (episodes started), besides the
// events and fabricscope_detector_events_total every detector reports.
//
// Thread-safety: as every Detector (detector.h): called under the engine's
// lock.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/detect/detector.h"

namespace fabricscope {

class PfcStormDetector final : public Detector {
 public:
  static DetectorClass Class();

  PfcStormDetector(std::string name, DetectorContext* ctx);
  std::vector<const MetricSpec*> Families() const override;
  void Observe(const AppendEvent& ev) override;
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override;

 private:
  // Its options (--pfc-storm-fraction, --pfc-storm-detection-time,
  // --pfc-storm-restoration-time), read at construction.
  const double fraction_;
  const int64_t detection_ns_;
  const int64_t restoration_ns_;
  absl::flat_hash_map<SeriesId, Episode> states_;
};

}  // namespace fabricscope
