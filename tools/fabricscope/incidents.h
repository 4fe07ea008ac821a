// `fabricscope incidents`: lists the incident recordings fabricscoped wrote
// to its --incident-dir (daemon/recording/incident_writer.h), newest last:
// when, which detector and kind (and how many more episodes the recording
// merged), the port, how long, the file and its size.
//
//   fabricscope incidents --dir=DIR | DIR [--limit=N]
//
// It reads the directory itself (each file's first line, the incident
// header of docs/recording.md), not the daemon: it works after a restart,
// with the daemon stopped, or on a copy of the directory. --limit N shows
// the N newest (default 20; 0 = all; --output json lists all unless
// --limit is given). A file whose header cannot be read is listed with the
// reason. `fabricscope analyze FILE` analyses one.
#pragma once

#include <string>
#include <vector>

#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunIncidents(const CliContext& ctx, const std::vector<std::string>& args);

}  // namespace fabricscope::cli
