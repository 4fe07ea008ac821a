// The detector registry: name -> DetectorClass (description, kinds, metric
// declarations, factory).
//
// daemon/detect/register_all.cc holds one line per built-in detector; it is
// the one place detector names live. A duplicate name is an error (Register
// returns it; the built-in registry's error fails DetectorOptions::Validate(),
// so the daemon does not start). The engine creates the enabled detectors in
// registration order.
//
// Thread-safety: a registry is built once, then read-only. BuiltinDetectors()
// builds the built-in one on first use (thread-safe) and never changes it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/detect/detector.h"

namespace fabricscope {

class DetectorRegistry {
 public:
  struct Entry {
    std::string name;
    DetectorClass detector;
  };

  // Adds a detector under `name`. AlreadyExistsError when the name is taken
  // (the registry is unchanged); InvalidArgumentError when the class has no
  // factory.
  absl::Status Register(std::string name, DetectorClass detector);

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* Find(absl::string_view name) const;
  // The names, in registration order.
  std::vector<std::string> Names() const;
  // "name  description" lines.
  std::string List() const;

 private:
  std::vector<Entry> entries_;
};

// Registers every built-in detector (daemon/detect/register_all.cc). Keeps
// the first error (a duplicate name) and registers the rest.
absl::Status RegisterAllDetectors(DetectorRegistry& registry);

// The built-in detectors, registered on first use.
const DetectorRegistry& BuiltinDetectors();
// OK, or the error RegisterAllDetectors returned for them.
absl::Status BuiltinDetectorsStatus();

}  // namespace fabricscope
