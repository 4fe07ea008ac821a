#include "collectors/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fabricscope {

absl::Status CollectorRegistry::Register(std::string name, std::string description,
                                         CollectorFactory factory) {
  if (Find(name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("collector \"", name, "\" registered twice"));
  }
  entries_.push_back({std::move(name), std::move(description), std::move(factory)});
  return absl::OkStatus();
}

const CollectorRegistry::Entry* CollectorRegistry::Find(absl::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::unique_ptr<Collector>>> CollectorRegistry::Create(
    const std::vector<std::string>& enabled, const CollectorContext& ctx) const {
  std::vector<std::string> known;
  for (const Entry& e : entries_) known.push_back(e.name);
  for (const std::string& name : enabled) {
    if (Find(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid value for collectors: unknown collector \"", name,
                       "\" (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  std::vector<std::unique_ptr<Collector>> out;
  for (const Entry& e : entries_) {
    if (!enabled.empty() && std::find(enabled.begin(), enabled.end(), e.name) == enabled.end()) {
      continue;
    }
    auto c = e.factory(ctx);
    if (!c.ok()) {
      return absl::Status(c.status().code(),
                          absl::StrCat("collector ", e.name, ": ", c.status().message()));
    }
    out.push_back(*std::move(c));
  }
  return out;
}

std::string CollectorRegistry::List() const {
  std::string out;
  for (const Entry& e : entries_)
    absl::StrAppend(&out, absl::StrFormat("%-12s %s\n", e.name, e.description));
  return out;
}

}  // namespace fabricscope
