// NetdevFilter: which extra network interfaces the netdev-side collectors
// (netdev, ethtool, dcb_config) watch besides the netdevs of RDMA ports -- the
// --netdev-include flag, in the style of node_exporter's device filters.
//
// The pattern is an ECMAScript regular expression that must match the WHOLE
// interface name ("eth1" matches "eth[0-9]+", "eth10x" does not). An empty
// pattern is the empty filter: it matches no interface (only the RDMA netdevs
// are watched).
//
// It is compiled once, by the composition root (daemon/config.cc,
// CollectorOptionsFromConfig) from the validated flag, and carried in
// CollectorOptions; every collector matches against that one compiled
// expression, so a pattern means the same thing to all of them and a bad one
// is a startup error (InvalidArgument naming `netdev-include`), never a
// per-collector fallback.
//
// Value type: cheap to copy (the compiled expression is shared, immutable).
// Thread-safety: Matches() is const and may be called from several threads
// at once (the tier threads of different collectors).
#pragma once

#include <memory>
#include <regex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fabricscope {

class NetdevFilter {
 public:
  // The empty filter: matches nothing.
  NetdevFilter() = default;

  // Compiles `pattern` ("" gives the empty filter). InvalidArgument
  // "not a valid regex: ..." when it does not compile (the caller names the
  // option: daemon/config.cc prefixes "netdev-include").
  static absl::StatusOr<NetdevFilter> Compile(absl::string_view pattern);

  // True when no interface can match (empty pattern).
  bool empty() const { return regex_ == nullptr; }
  // Whether `netdev` matches the whole pattern. False for the empty filter.
  bool Matches(absl::string_view netdev) const;
  // The source pattern ("" for the empty filter).
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::shared_ptr<const std::regex> regex_;
};

}  // namespace fabricscope
