#include "daemon/detect/detector_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/metrics.h"
#include "daemon/detect/detector_registry.h"

namespace fabricscope {

bool DetectorOptions::Enabled(absl::string_view detector) const {
  return std::find(enabled.begin(), enabled.end(), detector) != enabled.end();
}

absl::Status DetectorOptions::Validate() const {
  if (absl::Status s = BuiltinDetectorsStatus(); !s.ok()) return s;
  const DetectorRegistry& registry = BuiltinDetectors();
  for (const std::string& d : enabled) {
    if (registry.Find(d) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "detectors: unknown detector '", d, "'; one of ", absl::StrJoin(registry.Names(), ", ")));
    }
  }
  for (const std::string& s : microburst_signals) {
    if (FindMetric(absl::StrCat("fabricscope_", s, "_total")) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("microburst-signals: unknown signal '", s, "' (a counter family without ",
                       "the fabricscope_ prefix and _total suffix, e.g. port_bytes)"));
    }
  }
  if (!(pfc_storm_fraction > 0 && pfc_storm_fraction <= 1)) {
    return absl::InvalidArgumentError("pfc-storm-fraction: must be in (0, 1]");
  }
  if (!(pause_role_fraction > 0 && pause_role_fraction <= 1) ||
      !(pause_role_clear_fraction >= 0 && pause_role_clear_fraction < pause_role_fraction)) {
    return absl::InvalidArgumentError(
        "pause-role-fraction must be in (0, 1] and pause-role-clear-fraction in [0, "
        "pause-role-fraction)");
  }
  if (!(ecn_mark_ratio >= 0) || !(ecn_drop_floor > 0) || !(ecn_cnp_floor > 0) ||
      !(ecn_low_utilization > 0 && ecn_low_utilization <= 1)) {
    return absl::InvalidArgumentError(
        "ecn thresholds: floors must be > 0, ecn-mark-ratio >= 0, ecn-low-utilization in (0, 1]");
  }
  if (!(retransmit_floor > 0) || !(retransmit_factor >= 1) || !(fec_corrected_factor >= 1)) {
    return absl::InvalidArgumentError(
        "retransmit-floor must be > 0; retransmit-factor and fec-corrected-factor >= 1");
  }
  if (max_events == 0) return absl::InvalidArgumentError("max-events: must be at least 1");
  return absl::OkStatus();
}

}  // namespace fabricscope
