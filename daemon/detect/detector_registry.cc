#include "daemon/detect/detector_registry.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fabricscope {
namespace {

struct Builtin {
  DetectorRegistry registry;
  absl::Status status;
};

// DetectorRegistrations made before the built-in registry was built.
struct Pending {
  std::vector<DetectorRegistry::Entry> entries;
  bool consumed = false;
};
Pending& GetPending() {
  static Pending* pending = new Pending();
  return *pending;
}

const Builtin& GetBuiltin() {
  static const Builtin* builtin = [] {
    auto* b = new Builtin();
    b->status = RegisterAllDetectors(b->registry);
    Pending& pending = GetPending();
    for (DetectorRegistry::Entry& e : pending.entries) {
      b->status.Update(b->registry.Register(std::move(e.name), std::move(e.detector)));
    }
    pending.entries.clear();
    pending.consumed = true;
    return b;
  }();
  return *builtin;
}

}  // namespace

absl::Status DetectorRegistry::Register(std::string name, DetectorClass detector) {
  if (Find(name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("detector \"", name, "\" registered twice"));
  }
  if (!detector.create) {
    return absl::InvalidArgumentError(absl::StrCat("detector \"", name, "\" has no factory"));
  }
  for (const OptionSpec& spec : detector.options) {
    for (const Entry& e : entries_) {
      if (FindOptionSpec(e.detector.options, spec.name) != nullptr) {
        return absl::AlreadyExistsError(absl::StrCat("detector \"", name, "\": option --",
                                                     spec.name, " is detector \"", e.name, "\"'s"));
      }
    }
  }
  entries_.push_back({std::move(name), std::move(detector)});
  return absl::OkStatus();
}

const DetectorRegistry::Entry* DetectorRegistry::Find(absl::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> DetectorRegistry::Names() const {
  std::vector<std::string> names;
  names.reserve(entries_.size());
  for (const Entry& e : entries_) names.push_back(e.name);
  return names;
}

std::string DetectorRegistry::List() const {
  std::string out;
  for (const Entry& e : entries_) {
    absl::StrAppend(&out, absl::StrFormat("%-17s %s\n", e.name, e.detector.description));
  }
  return out;
}

DetectorRegistration::DetectorRegistration(std::string name, DetectorClass detector) {
  Pending& pending = GetPending();
  if (pending.consumed) {
    std::fprintf(stderr,
                 "fabricscope: DetectorRegistration of \"%s\" after the detector registry was "
                 "built\n",
                 name.c_str());
    std::abort();
  }
  pending.entries.push_back({std::move(name), std::move(detector)});
}

const DetectorRegistry& BuiltinDetectors() { return GetBuiltin().registry; }

absl::Status BuiltinDetectorsStatus() { return GetBuiltin().status; }

std::vector<std::string> BuiltinDetectorNames() { return BuiltinDetectors().Names(); }

}  // namespace fabricscope
