// `fabricscope analyze FILE`: runs the daemon's detectors and correlator
// offline over a JSON Lines recording (docs/recording.md), no daemon needed,
// with the daemon's default thresholds.
//
// Output (--output json): {"events": [... as `events`], "spans": [... as
// `correlate`]}; human: the events table and one line per span verdict.
// Malformed lines are reported on stderr with their line number and skipped;
// the rest of the file is still analysed. Exit status 0 when the file was
// read (even with skipped lines), 1 when it cannot be read, 2 on bad usage.
#pragma once

#include <string>
#include <vector>

#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunAnalyze(const CliContext& ctx, const std::vector<std::string>& args);

}  // namespace fabricscope::cli
