// Parser for the text that `ethtool -S <if>` prints: the --ethtool-dir seam
// (collectors/ethtool_stats_source.h) reads files in this format.
//
// Accepted, per line (whitespace around names and values is ignored):
//   NIC statistics:                 header, only as the first non-empty line
//        rx_packets: 845320277      LKML captures (5-space indent)
//   rx_packets: 845320277           ethq captures (no header, no indent)
//   \t\t[0]: rx_ucast_packets: 27   bnxt_en per-ring names (the "[N]: " is part of the name)
//        port.rx_priority_3_xoff_rx: 0 / rx_priority_3_xoff.nic: 0   i40e / ice decorations
// Blank lines and lines starting with '#' are ignored.
// The name is everything before the last ':' (trimmed, so the historic
// "tx_pause_storm_warning_events " spelling loses its trailing space); the
// value is an unsigned decimal 64-bit integer.
//
// Anything else (a line without ':', an empty, signed, non-numeric or
// overflowing value) makes the whole text invalid: the caller keeps its last
// good reading rather than export a partial one.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fabricscope {

struct EthtoolTextStats {
  std::vector<std::string> names;  // in file order
  std::vector<uint64_t> values;    // aligned with names
};

// Parses `text` into *out (cleared first). UnparsableError (DataLoss,
// core/errors.h) names the offending line number on garbage. Duplicate names keep the first
// occurrence.
absl::Status ParseEthtoolStatsText(absl::string_view text, EthtoolTextStats* out);

// Values only, when the caller already knows the names are `expected_names`
// (the per-tick path of the dir source once the name set is resolved).
// Returns false in *names_match (and leaves *values unspecified) when the names
// differ; then call ParseEthtoolStatsText.
absl::Status ParseEthtoolStatsValues(absl::string_view text,
                                     const std::vector<std::string>& expected_names,
                                     std::vector<uint64_t>* values, bool* names_match);

}  // namespace fabricscope
