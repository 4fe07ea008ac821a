// The collector registry: name -> description + factory + ordering.
//
// collectors/register_all.cc holds one line per built-in collector. A
// duplicate name is a startup error; `fabricscoped --list-collectors` prints
// the names and descriptions; `--collectors=a,b` selects which are created.
//
// Ordering: the scheduler discovers collectors in the order Create returns
// them. A collector that reads at discovery what another one writes at its
// discovery (the port inventory: rdma_sysfs writes it, netdev/ethtool/
// dcb_config read it) names the writer in CollectorDeps::after, and Create
// puts it after that writer whatever the registration order; otherwise the
// registration order stands (a stable topological order). Naming a collector
// that is not enabled (or not registered) is no error: the dependency is then
// simply void (the inventory stays empty, or replay fills it). A cycle among
// the enabled collectors is an error of Create.
//
// Thread-safety: built once at startup, then read-only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectors/collector.h"

namespace fabricscope {

using CollectorFactory =
    std::function<absl::StatusOr<std::unique_ptr<Collector>>(const CollectorContext&)>;

// What a collector needs created and discovered before itself.
struct CollectorDeps {
  // Collectors (by name) that must come first, e.g. {"rdma_sysfs"} for a
  // reader of the port inventory.
  std::vector<std::string> after;
};

class CollectorRegistry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    CollectorFactory factory;
    CollectorDeps deps;
    // Its own options (core/options.h), declared next to its code: the
    // daemon's --help, config file and docs/options.md list them; it reads
    // them from CollectorOptions::values at creation.
    std::vector<OptionSpec> options;
  };

  // AlreadyExists for a duplicate name or option name, InvalidArgument for an
  // entry that names itself in deps.after.
  absl::Status Register(std::string name, std::string description, CollectorFactory factory,
                        CollectorDeps deps = {}, std::vector<OptionSpec> options = {});

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* Find(absl::string_view name) const;

  // Creates the collectors named in `enabled` (all of them when empty), in
  // registration order except that each comes after the enabled collectors
  // its deps.after names (see the header comment). An unknown name in
  // `enabled` is an error that lists the known ones; so is a cycle.
  absl::StatusOr<std::vector<std::unique_ptr<Collector>>> Create(
      const std::vector<std::string>& enabled, const CollectorContext& ctx) const;

  // "name  description" lines for --list-collectors.
  std::string List() const;

 private:
  std::vector<Entry> entries_;
};

// Registers every built-in collector (collectors/register_all.cc).
absl::Status RegisterAllCollectors(CollectorRegistry& registry);

// The built-in collectors, registered on first use (thread-safe), and the
// error RegisterAllCollectors returned for them (OK normally).
const CollectorRegistry& BuiltinCollectors();
absl::Status BuiltinCollectorsStatus();

// Sets one of a built-in collector's options by name in `options`, as the
// config file would (parsed and bounded by its spec); tests and programs.
absl::Status SetCollectorOption(CollectorOptions* options, absl::string_view name,
                                absl::string_view text);

}  // namespace fabricscope
