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
//    "reason": ..., "scope": ..., "signals": [{"signal", "signal_class",
//    "device", "port", "netdev", "priority", "direction", "counter", "delta",
//    "rate", "baseline_rate", "peak_rate", "pause_fraction", "score",
//    "blind", "superseded_by", "coverage", "partner"}],
//    "blind": [{"signal", "counter", "device", "port", "netdev", "priority",
//    "direction", "why", "source", "raw_name"}]}
// with signals ranked by score (anomalous only, unless --all-series).
// "blind" lists the congestion series that could not be judged over the span
// (why: "saturated", "reset", "gap", "vanished", "not polled", "outside
// retention"), whatever the verdict; a signal's "blind" is its why ("" when
// judged), "superseded_by" the series of the same signal judged instead
// ("source/raw_name", e.g. a 64-bit source over a saturated PMA counter). The
// human output names each signal with its counter/reason label
// ("rdma_errors out_of_sequence") and prints one "blind:" line per blind
// series (at most 8).
// "scope" says which ports the span was correlated with and why ("every
// port", "NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1", ...; the human
// output prints it as a "scope:" line). "partner" is present only where the
// daemon's topology knows the other end of the signal's port:
//   {"system_name", "port_id", "chassis_id", "port_description", "source"};
// the human output appends it to the port: "eth2 -> leaf07 Ethernet1/12".
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
