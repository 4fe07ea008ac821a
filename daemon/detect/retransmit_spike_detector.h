// The retransmit_spike detector (per RDMA port and counter).
//
//  - kinds "out_of_sequence", "packet_seq_err", "local_ack_timeout_err" (the
//    counter of fabricscope_rdma_errors_total): the rate over
//    --retransmit-window is >= --retransmit-floor and >= --retransmit-factor x the
//    rate over the trailing --retransmit-baseline (the baseline does not learn
//    during a spike; RisingRate in episode.h). Starts on the first such
//    interval, ends after 1 s below it. Peak: the highest
//    rate.
//
// Reports fabricscope_retransmit_spike_active{device,port,kind} (1 while
// active), besides the events and fabricscope_detector_events_total every
// detector reports.
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

class RetransmitSpikeDetector final : public Detector {
 public:
  static DetectorClass Class();

  RetransmitSpikeDetector(std::string name, DetectorContext* ctx);
  std::vector<const MetricSpec*> Families() const override;
  bool Reads(const Signal& signal) const override;
  void Observe(const AppendEvent& ev) override;
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override;

 private:
  // Its options (--retransmit-*), read at construction.
  const int64_t window_ns_;
  const int64_t baseline_ns_;
  const double floor_;
  const double factor_;

  struct State {
    State(int64_t window, int64_t baseline, int64_t off) : ep(0, off), rate(window, baseline) {}
    Episode ep;
    RisingRate rate;
  };
  absl::flat_hash_map<SeriesId, State> states_;
};

}  // namespace fabricscope
