// fabricsim scenarios: named timelines of episodes (a PFC storm on one port,
// a burst of incast, a link going down, ...) that change the model's
// parameters over time, and the ground truth they produce.
//
// A scenario repeats with its period; each episode is an interval within the
// period on one port. Outside episodes every port runs the quiet baseline: a
// moderately loaded fabric with no congestion.
//
// Thread-safety: immutable after Make(); Params() may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/fabricsim/model.h"

namespace fabricsim {

enum class EpisodeKind {
  kMicroburst,        // remote senders burst into the local port at line rate
  kPfcStormRx,        // a remote receiver stops draining: the switch pauses us
  kPfcStormTx,        // the local NIC stops draining: it pauses the switch
  kEcnTooLate,        // ECN thresholds above the buffer, lossy: drops, no marks
  kEcnTooAggressive,  // Kmin ~ 0, Pmax 1: CNPs at low utilization, no drops
  kFecDegradation,    // the link's bit error rate climbs
  kLinkFlap,          // the link goes down and comes back
  kRetransmitStorm,   // silent packet loss: retransmissions
};

struct Episode {
  EpisodeKind kind;
  int port;          // port index (taken modulo the number of ports)
  int64_t start_ns;  // within the period
  int64_t end_ns;
};

// One injected event, as written to the ground-truth file.
struct GroundTruthEvent {
  std::string kind;           // pfc_storm, microburst, marking_too_late, ...
  std::string detector;       // the detector expected to fire: pfc_storm, microburst,
                              // ecn_mistuning, link_degradation, retransmit_spike
  std::string detector_kind;  // the detector's kind: storm, burst, marking_too_late, ...
  int port_index = 0;
  int priority = -1;      // -1: not priority-specific
  std::string direction;  // rx, tx or "" (PFC storms only)
  int64_t start_ns = 0;   // model time (since the run start)
  int64_t end_ns = 0;
};

class Scenario final : public ParamSource {
 public:
  // Builds a named scenario for `ports` ports; the error lists the names.
  static absl::StatusOr<Scenario> Make(absl::string_view name, int ports);
  static std::vector<std::string> Names();
  // One line per scenario: name and what it does.
  static std::string Describe();

  void Params(int port, int64_t now_ns, PortParams* params) const override;

  // Every episode instance that starts before `until_ns` (model time), in
  // start order; end_ns is clipped to `until_ns` only by the caller.
  std::vector<GroundTruthEvent> GroundTruth(int64_t until_ns, int pfc_priority) const;

  const std::string& name() const { return name_; }
  int64_t period_ns() const { return period_ns_; }
  const std::vector<Episode>& episodes() const { return episodes_; }

 private:
  std::string name_;
  int ports_ = 1;
  int64_t period_ns_ = 0;
  std::vector<Episode> episodes_;
};

// The quiet baseline every scenario starts from.
PortParams QuietParams();

}  // namespace fabricsim
