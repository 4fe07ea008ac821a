#include "daemon/detect/detector_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fabricscope {
namespace {

struct Builtin {
  DetectorRegistry registry;
  absl::Status status;
};

const Builtin& GetBuiltin() {
  static const Builtin* builtin = [] {
    auto* b = new Builtin();
    b->status = RegisterAllDetectors(b->registry);
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

const DetectorRegistry& BuiltinDetectors() { return GetBuiltin().registry; }

absl::Status BuiltinDetectorsStatus() { return GetBuiltin().status; }

std::vector<std::string> BuiltinDetectorNames() { return BuiltinDetectors().Names(); }

}  // namespace fabricscope
