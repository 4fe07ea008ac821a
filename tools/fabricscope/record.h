// `fabricscope record`: writes what the running daemon holds for a time range
// (every series' raw samples and the spans) as a JSON Lines recording
// (docs/recording.md): first the daemon's header line (window, ports and link
// rates, topology, options, learned stall bounds, version), then samples in
// time order, each span (with the daemon's stall judgement) at the position
// of its end.
//
//   fabricscope record [--since=DUR] [--out=FILE]   (default: 5m, stdout)
#pragma once

#include <string>
#include <vector>

#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunRecord(const CliContext& ctx, const std::vector<std::string>& args);

}  // namespace fabricscope::cli
