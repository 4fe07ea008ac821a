// fabricsim fleet scenarios: what goes wrong in a leaf-spine fleet, and when.
//
// Every scenario but `quiet` repeats one kind of episode: the first starts at
// FleetEpisodeTiming::first_start_ns (default 20 s after the run start), each
// lasts length_ns (default 40 s), and they repeat every period_ns (default
// 90 s). Episode i targets one host: --origin when given, else a host drawn
// from (seed, i), so a long run covers several hosts and leaves.
//
//  slow_receiver  the target's NIC receive pipeline stalls: it drains at 2% of
//                 line rate, so it pauses its leaf (tx pause ~98%); its own
//                 workload is blocked on those receives and sends nothing (its
//                 rx stays clear). The leaf's egress towards it fills, the
//                 ingress ports feeding it (same-leaf senders, spine downlinks)
//                 go over XOFF, the spines' egress towards that leaf fills and
//                 pauses other leaves' uplinks, whose hosts are the victims.
//  incast         every other host sends to the target at line rate: the
//                 leaf's egress towards it congests (ECN marks, CNPs, DCQCN
//                 cuts) and its ingress ports pause their senders, but the
//                 target's NIC drains at line rate: no host sends pause.
//  bad_link       the pre-FEC bit error rate of the target's cable (leaf ->
//                 host) climbs from 1e-8 to 5e-5: FEC corrected bits, then
//                 uncorrectable blocks, symbol and CRC errors on that host only;
//                 no congestion.
//  pause_storm_deadlock_free
//                 the target stalls as in slow_receiver, but its peers are all
//                 on its leaf (a rack-local job): during the episode hosts on
//                 other leaves do not send to it and every same-leaf host does.
//                 The paused egress is fed by host-facing ingress ports only,
//                 so XOFF reaches the same-leaf senders and stops there: no
//                 spine, no other leaf is paused.
//  quiet          the moderate baseline only; no episodes.
//
// Thread-safety: immutable after Make(); const methods may be called
// concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/fabricsim/fleet.h"

namespace fabricsim {

struct FleetEpisodeTiming {
  int64_t first_start_ns = 20'000'000'000;
  int64_t length_ns = 40'000'000'000;
  int64_t period_ns = 90'000'000'000;
};

class FleetScenario {
 public:
  // `origin` < 0: drawn per episode from the seed.
  static absl::StatusOr<FleetScenario> Make(absl::string_view name, const FleetTopology& topology,
                                            uint64_t seed, const FleetEpisodeTiming& timing,
                                            int origin);
  static std::vector<std::string> Names();
  // One line per scenario: "  name: what it does".
  static std::string Describe();

  const std::string& name() const { return name_; }
  const FleetEpisodeTiming& timing() const { return timing_; }
  bool has_episodes() const { return name_ != "quiet"; }
  // Whether the episode's target is a fault origin (false for incast: the
  // target only receives too much).
  bool target_is_origin() const { return name_ != "incast"; }

  // Episode index running at model time t, or -1.
  int EpisodeAt(int64_t t_ns) const;
  // Episodes that started at or before t (running or finished).
  int EpisodesStartedBy(int64_t t_ns) const;
  int64_t EpisodeStart(int i) const { return timing_.first_start_ns + i * timing_.period_ns; }
  int64_t EpisodeEnd(int i) const { return EpisodeStart(i) + timing_.length_ns; }
  int TargetOf(int i) const;
  // The hosts that send to the target in an incast episode.
  std::vector<int> IncastSenders(int i) const;

  // The step parameters at model time t (`params` is resized and reset).
  void Params(int64_t t_ns, FleetStepParams* params) const;

 private:
  std::string name_;
  FleetTopology topology_;
  uint64_t seed_ = 1;
  FleetEpisodeTiming timing_;
  int origin_ = -1;
};

}  // namespace fabricsim
