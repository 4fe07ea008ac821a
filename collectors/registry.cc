#include "collectors/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace fabricscope {

absl::Status CollectorRegistry::Register(std::string name, std::string description,
                                         CollectorFactory factory, CollectorDeps deps,
                                         std::vector<OptionSpec> options) {
  if (Find(name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("collector \"", name, "\" registered twice"));
  }
  if (std::find(deps.after.begin(), deps.after.end(), name) != deps.after.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("collector \"", name, "\" cannot come after itself"));
  }
  for (const OptionSpec& spec : options) {
    for (const Entry& e : entries_) {
      if (FindOptionSpec(e.options, spec.name) != nullptr) {
        return absl::AlreadyExistsError(absl::StrCat(
            "collector \"", name, "\": option --", spec.name, " is collector \"", e.name, "\"'s"));
      }
    }
  }
  entries_.push_back({std::move(name), std::move(description), std::move(factory), std::move(deps),
                      std::move(options)});
  return absl::OkStatus();
}

namespace {

struct Builtin {
  CollectorRegistry registry;
  absl::Status status;
};

const Builtin& GetBuiltin() {
  static const Builtin* builtin = [] {
    auto* b = new Builtin();
    b->status = RegisterAllCollectors(b->registry);
    return b;
  }();
  return *builtin;
}

}  // namespace

const CollectorRegistry& BuiltinCollectors() { return GetBuiltin().registry; }

absl::Status BuiltinCollectorsStatus() { return GetBuiltin().status; }

absl::Status SetCollectorOption(CollectorOptions* options, absl::string_view name,
                                absl::string_view text) {
  for (const CollectorRegistry::Entry& e : BuiltinCollectors().entries()) {
    absl::Status s = options->values.Set(e.options, name, text);
    if (!absl::IsNotFound(s)) return s;
  }
  return absl::NotFoundError(absl::StrCat("no collector has an option \"", name, "\""));
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
  // The enabled entries in registration order, then a stable topological
  // order: repeatedly take the first one whose enabled predecessors are all
  // placed. Quadratic in the handful of collectors.
  std::vector<const Entry*> pending;
  for (const Entry& e : entries_) {
    if (enabled.empty() || std::find(enabled.begin(), enabled.end(), e.name) != enabled.end()) {
      pending.push_back(&e);
    }
  }
  auto is_pending = [&pending](const std::string& name) {
    return std::any_of(pending.begin(), pending.end(),
                       [&name](const Entry* p) { return p->name == name; });
  };
  std::vector<const Entry*> order;
  while (!pending.empty()) {
    auto ready = std::find_if(pending.begin(), pending.end(), [&](const Entry* e) {
      return std::none_of(e->deps.after.begin(), e->deps.after.end(), is_pending);
    });
    if (ready == pending.end()) {
      std::vector<std::string> names;
      for (const Entry* p : pending) names.push_back(p->name);
      return absl::InvalidArgumentError(
          absl::StrCat("collectors: dependency cycle among ", absl::StrJoin(names, ", ")));
    }
    order.push_back(*ready);
    pending.erase(ready);
  }
  std::vector<std::unique_ptr<Collector>> out;
  for (const Entry* entry : order) {
    const Entry& e = *entry;
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
