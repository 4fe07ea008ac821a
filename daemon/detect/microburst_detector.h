// The microburst detector (per series of microburst_signals).
//
//  - kind "burst": an episode of poll intervals the store judged microbursts
//    (rate >= --burst-factor x the trailing 1 s mean and above the signal's
//    floor, store/aggregates.h); bursts closer than microburst_gap belong to
//    one episode. Peak: the highest rate.
//
// State is kept only for series that burst at least once. Reports
// fabricscope_microburst_active{signal,device,port,netdev,priority,direction}
// (1 during an episode), besides the events and
// fabricscope_detector_events_total every detector reports.
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

class MicroburstDetector final : public Detector {
 public:
  static DetectorClass Class();

  // Reads the counter families of options().microburst_signals.
  MicroburstDetector(std::string name, DetectorContext* ctx);
  std::vector<const MetricSpec*> Families() const override { return families_; }
  void Observe(const AppendEvent& ev) override;
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override;

 private:
  std::vector<const MetricSpec*> families_;
  absl::flat_hash_map<SeriesId, Episode> states_;
  absl::flat_hash_map<SeriesId, std::string> signal_;
};

}  // namespace fabricscope
