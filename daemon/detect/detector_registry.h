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

  // Adds a detector under `name`. AlreadyExistsError when the name, or the
  // name of one of its options, is taken (the registry is unchanged);
  // InvalidArgumentError when the class has no factory.
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

// A detector compiled outside the daemon's own library (a test target, a
// build with a detector of one's own) registers with one namespace-scope
//   const DetectorRegistration kRegistration("name", MyDetector::Class());
// in its own .cc: it joins the built-in registry after register_all.cc's
// list, in static initialisation order. Constructing one after the built-in
// registry was first used aborts (naming the detector): it would be missed.
class DetectorRegistration {
 public:
  DetectorRegistration(std::string name, DetectorClass detector);
};

// The built-in detectors (and DetectorRegistrations), registered on first
// use.
const DetectorRegistry& BuiltinDetectors();
// OK, or the error RegisterAllDetectors returned for them.
absl::Status BuiltinDetectorsStatus();

}  // namespace fabricscope
