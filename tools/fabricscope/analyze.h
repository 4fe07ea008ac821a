// `fabricscope analyze FILE`: runs the daemon's detectors and correlator
// offline over a JSON Lines recording (docs/recording.md), no daemon needed.
// A recording made by `fabricscope record` starts with the daemon's header
// line: its options (correlation, stall learning, detectors) are applied,
// its ports (link rates) and topology (partners, PCI/GPU places) are known,
// and each span keeps the daemon's stall judgement; without one, the
// defaults apply. In such a window of a daemon's history, a span whose
// baseline window (--baseline-window before its judged window) starts before
// the recorded window is reported unknown, "baseline incomplete ...; not
// judged": the daemon had that history, the file does not. A recording
// without a header (fabricsim's) is the whole history and judged as it is.
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

// The reason of a span not judged offline starts with this.
extern const char kBaselineIncomplete[];

}  // namespace fabricscope::cli
