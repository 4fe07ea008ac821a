// DetectorOptions: the detectors' settings (Config::detect): which detectors
// run (--detectors), the event ring (--max-events), and the values of the
// detectors' own options (--pfc-storm-*, --microburst-*, --ecn-*, ...), which
// each detector declares next to its code (DetectorClass::options, read with
// its OptionKey constants; what each threshold means is documented with its
// detector, daemon/detect/<name>_detector.h).
//
// The names of the detectors live in one place, the registration list
// (daemon/detect/register_all.cc): the default of `enabled`, Validate() and the
// --detectors help text take them from there (BuiltinDetectorNames()).
//
// Thread-safety: a plain value.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/options.h"

namespace fabricscope {

// The names of the built-in detectors, in registration order
// (daemon/detect/register_all.cc; defined in detector_registry.cc).
std::vector<std::string> BuiltinDetectorNames();

struct DetectorOptions {
  // --detectors: the enabled detectors (all registered ones by default).
  std::vector<std::string> enabled = BuiltinDetectorNames();
  size_t max_events = 10000;  // --max-events: the event ring
  // The detectors' own options; unset ones are at their defaults.
  OptionValues values;

  bool Enabled(absl::string_view detector) const;
  // Sets one of a built-in detector's options by name, as the config file
  // would (parsed and bounded by its spec); for tests and programs.
  absl::Status Set(absl::string_view option, absl::string_view text);
  // Checks names (an unknown detector is an error that lists the registered
  // ones; so is a registration list with a duplicate name), each detector's
  // own cross-option checks (DetectorClass::validate) and max_events; the
  // error names the option.
  absl::Status Validate() const;
};

}  // namespace fabricscope
