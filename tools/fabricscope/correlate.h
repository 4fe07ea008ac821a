// `fabricscope correlate`: was it the fabric, and where?
//
//   fabricscope correlate --trace-id HEX | --span-id HEX | --since DUR [--name N]
//                         [--all-series] [--limit N] [--server HOST:PORT]
//                         [--output human|json]
//
// Asks the daemon's Query.Correlate for the selected spans and prints, per
// span, its verdict (fabric / clean / unknown), whether it stalled, and the
// congestion signals ranked by score (which signal, where, how much).
//
// --output json prints one JSON array; each element:
//   {"trace_id": HEX, "span_id": HEX, "name": ..., "start_unix_nano": N,
//    "end_unix_nano": N, "stall": bool, "verdict": "fabric"|"clean"|"unknown",
//    "reason": ..., "signals": [{"signal", "signal_class", "device", "port",
//    "netdev", "priority", "direction", "counter", "delta", "rate",
//    "baseline_rate", "peak_rate", "pause_fraction", "score", "coverage"}]}
// with signals ranked by score (anomalous only, unless --all-series).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "fabricscope/v1/query.pb.h"
#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunCorrelate(const CliContext& ctx, const std::vector<std::string>& args);

// Renderers (exposed for tests).
std::string CorrelateJson(const v1::CorrelateResponse& response);
std::string CorrelateHuman(const v1::CorrelateResponse& response);

}  // namespace fabricscope::cli
