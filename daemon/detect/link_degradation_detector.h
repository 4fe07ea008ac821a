// The link_degradation detector (per port).
//
//  - kind "fec_corrected_rising" (per series of corrected FEC blocks or
//    bits): the rate over 1 s is >= --fec-corrected-factor x the rate over the
//    trailing --fec-baseline and above 100 blocks/s / 10,000 bits/s, for
//    300 ms (RisingRate in episode.h; the baseline does not learn during an
//    episode). Peak: the highest rate.
//  - kinds "fec_uncorrectable", "symbol_errors", "link_downed",
//    "link_error_recovery" (per port and kind, whichever counter reports it:
//    ethtool's and the IB PMA's are one event): any increase; the episode
//    lasts while increases come closer than --link-hold-time. Peak: the count since
//    the daemon started watching.
//
// Per-lane FEC series are ignored (the total is enough). Reports
// fabricscope_link_degraded_active{device,port,netdev,kind} (1 while active),
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
#include "daemon/detect/detector.h"

namespace fabricscope {

class LinkDegradationDetector final : public Detector {
 public:
  static DetectorClass Class();

  LinkDegradationDetector(std::string name, DetectorContext* ctx);
  std::vector<const MetricSpec*> Families() const override;
  bool Reads(const Signal& signal) const override;
  void Observe(const AppendEvent& ev) override;
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override;

 private:
  // Its options (--fec-corrected-factor, --fec-baseline, --link-hold-time),
  // read at construction.
  const double corrected_factor_;
  const int64_t fec_baseline_ns_;
  const int64_t hold_ns_;

  struct State {
    State(int64_t on, int64_t off, int64_t baseline) : ep(on, off), rate(1'000'000'000, baseline) {}
    Episode ep;
    RisingRate rate;
    bool corrected = false;
    double floor = 0;
    double total = 0;
  };
  // "series:<id>" for a corrected-rate state, "<device>/<port>|<netdev>|<kind>"
  // for an error kind.
  absl::flat_hash_map<std::string, State> states_;
  // states_ insertions so far (an insertion may move every State).
  uint64_t inserts_ = 0;
  // Per series: its State, valid while states_ took no insertion and (error
  // kinds, keyed by the resolved port) the context's generation is unchanged.
  struct Cached {
    State* state = nullptr;
    uint64_t inserts = 0;
    uint64_t generation = 0;
  };
  SeriesTable<Cached> cache_;

  // The kind a series reports; empty for a series it does not read.
  static absl::string_view KindOf(const Signal& signal);
  State& FindState(const AppendEvent& ev, bool corrected, const PortRef* resolved);
};

}  // namespace fabricscope
