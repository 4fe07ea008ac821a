// The collector registry: name -> description + factory.
//
// collectors/register_all.cc holds one line per built-in collector. A
// duplicate name is a startup error; `fabricscoped --list-collectors` prints
// the names and descriptions; `--collectors=a,b` selects which are created.
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

class CollectorRegistry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    CollectorFactory factory;
  };

  absl::Status Register(std::string name, std::string description, CollectorFactory factory);

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* Find(absl::string_view name) const;

  // Creates the collectors named in `enabled` (all of them when empty), in
  // registration order. An unknown name is an error that lists the known ones.
  absl::StatusOr<std::vector<std::unique_ptr<Collector>>> Create(
      const std::vector<std::string>& enabled, const CollectorContext& ctx) const;

  // "name  description" lines for --list-collectors.
  std::string List() const;

 private:
  std::vector<Entry> entries_;
};

// Registers every built-in collector (collectors/register_all.cc).
absl::Status RegisterAllCollectors(CollectorRegistry& registry);

}  // namespace fabricscope
