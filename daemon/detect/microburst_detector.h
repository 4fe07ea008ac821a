// The microburst detector (per series of --microburst-signals, reported per
// port).
//
//  - kind "burst": an episode of poll intervals the store judged microbursts
//    (rate >= --burst-factor x the trailing 1 s mean and above the signal's
//    floor, store/aggregates.h); bursts closer than --microburst-gap belong to
//    one episode. Peak: the highest rate. Each series has its own episode
//    (and gauge); the events of one port's simultaneous bursts are one
//    episode (EventLog merging, event_log.h) listing its signals, e.g.
//    "pfc_pause_frames tx prio 3, discards rx_discards_phy".
//  - ECN marks and CNPs (ecn_marked_packets, cnp_sent, cnp_handled) are
//    DCQCN's feedback: a burst of them alone is the congestion control
//    reacting, not an event (the gauge and the store's peak/burst series
//    still show it). It becomes one only when DCQCN did not contain it:
//    PFC pause frames or discards on the same port rose (delta > 0 and a rate
//    above twice their own trailing 1 s mean) in an interval that ends after
//    100 ms before the episode started; the event opens when that is seen and
//    names the counter that rose.
//
// Pause-frame and discard series are read for that evidence even when not in
// --microburst-signals. State is kept only for series that burst at least once
// (and for the evidence series). Reports
// fabricscope_microburst_active{signal,device,port,netdev,priority,direction}
// (1 during an episode), besides the events and
// fabricscope_detector_events_total every detector reports.
//
// Thread-safety: as every Detector (detector.h): called under the engine's
// lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "daemon/detect/detector.h"

namespace fabricscope {

class MicroburstDetector final : public Detector {
 public:
  static DetectorClass Class();

  // Reads the counter families of --microburst-signals, plus PFC
  // pause frames and discards (evidence).
  MicroburstDetector(std::string name, DetectorContext* ctx);
  std::vector<const MetricSpec*> Families() const override { return families_; }
  void Observe(const AppendEvent& ev) override;
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override;

 private:
  // The last interval a pause-frame or discard counter of the port rose.
  struct PortState {
    int64_t rise_start_ns = INT64_MIN;
    int64_t rise_end_ns = INT64_MIN;
    std::string rise_signal;
  };
  struct SeriesState {
    SeriesState(int64_t gap_ns) : ep(0, gap_ns), recent(1'000'000'000) {}
    Episode ep;
    std::string signal;         // SignalText
    std::string note;           // feedback: what showed DCQCN did not contain it
    bool bursts = false;        // of --microburst-signals: has an episode
    bool feedback = false;      // ECN marks / CNPs
    bool evidence = false;      // pause frames / discards
    PortState* port = nullptr;  // owned by ports_
    WindowSum recent;           // evidence: the trailing rate
  };

  const int64_t gap_ns_;  // --microburst-gap
  std::vector<const MetricSpec*> families_;
  absl::flat_hash_set<const MetricSpec*> burst_families_;
  absl::flat_hash_map<SeriesId, SeriesState> states_;
  absl::node_hash_map<std::string, PortState> ports_;  // "device/port" or netdev
  // Per series: its entry in states_ (null: none yet), valid while states_
  // took no insertion since (an insertion may move every SeriesState).
  struct Cached {
    uint64_t version = 0;  // states_ insertions + 1 when cached; 0: not cached
    SeriesState* state = nullptr;
  };
  uint64_t inserts_ = 0;
  SeriesTable<Cached> cache_;
};

}  // namespace fabricscope
