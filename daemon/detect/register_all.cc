// The list of built-in detectors: one line each, and the one place their
// names live (DetectorOptions' defaults and Validate(), the --detectors help
// text and the engine take them from here). Adding a detector is one file
// pair, one line here and one line in daemon/CMakeLists.txt.
#include "daemon/detect/detector_registry.h"
#include "daemon/detect/ecn_mistuning_detector.h"
#include "daemon/detect/link_degradation_detector.h"
#include "daemon/detect/microburst_detector.h"
#include "daemon/detect/pause_role_detector.h"
#include "daemon/detect/pfc_storm_detector.h"
#include "daemon/detect/retransmit_spike_detector.h"

namespace fabricscope {

absl::Status RegisterAllDetectors(DetectorRegistry& registry) {
  // Each line: s.Update(registry.Register(name, class)); Update keeps the
  // first error (a duplicate name). The order is the order the engine creates
  // and feeds them in, and the order of the names in --help.
  absl::Status s;
  // clang-format off
  s.Update(registry.Register("pfc_storm", PfcStormDetector::Class()));
  s.Update(registry.Register("ecn_mistuning", EcnMistuningDetector::Class()));
  s.Update(registry.Register("microburst", MicroburstDetector::Class()));
  s.Update(registry.Register("retransmit_spike", RetransmitSpikeDetector::Class()));
  s.Update(registry.Register("link_degradation", LinkDegradationDetector::Class()));
  s.Update(registry.Register("pause_role", PauseRoleDetector::Class()));
  // clang-format on
  return s;
}

}  // namespace fabricscope
