#include "daemon/detect/detector_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/detect/detector_registry.h"

namespace fabricscope {

bool DetectorOptions::Enabled(absl::string_view detector) const {
  return std::find(enabled.begin(), enabled.end(), detector) != enabled.end();
}

absl::Status DetectorOptions::Set(absl::string_view option, absl::string_view text) {
  for (const DetectorRegistry::Entry& e : BuiltinDetectors().entries()) {
    absl::Status s = values.Set(e.detector.options, option, text);
    if (!absl::IsNotFound(s)) return s;
  }
  return absl::NotFoundError(absl::StrCat("no detector has an option \"", option, "\""));
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
  for (const DetectorRegistry::Entry& e : registry.entries()) {
    if (!e.detector.validate) continue;
    if (absl::Status s = e.detector.validate(values); !s.ok()) return s;
  }
  if (max_events == 0) return absl::InvalidArgumentError("max-events: must be at least 1");
  return absl::OkStatus();
}

}  // namespace fabricscope
