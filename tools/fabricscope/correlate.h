// `fabricscope correlate`: was it the fabric, and where?
//
//   fabricscope correlate --trace-id HEX | --span-id HEX | --since DUR [--name N]
//                         [--verdict fabric|clean|unknown]... [--stalls] [--all]
//                         [--all-series] [--limit N] [--server HOST:PORT]
//                         [--output human|json]
//
// Asks the daemon's Query.Correlate for the spans and prints first one
// summary line over every span found (spans by verdict, stalls by verdict,
// the signals blamed most often for the stalls judged fabric), then the
// stalls, judged fabric first, then unknown, then clean, the longest first
// within each, per span its verdict, what decided the stall, and the
// congestion signals ranked by score (which signal, where, how much); then
// the fabric spans that did not stall, one line per port and signal that
// explained them (spans, time range, peak, score); then any other selected
// spans in start order.
//
// Selection (the daemon applies it: CorrelateRequest.selection): with
// --since the stalls (JSON: and each fabric span); with --trace-id/--span-id
// every span. --verdict V (repeatable, or a comma list) and --stalls select
// instead the spans of those verdicts and/or the stalls; --all every span.
// --limit N lists at most N selected spans, the stalls first (fabric-bound
// and longest), then the latest others (default 50 in the human output, no
// limit in JSON; 0: no limit); lines say how many were left out.
//
// --output json prints one object {"summary": S, "spans": [...]} with the
// spans in start order: S is
//   {"spans": N, "verdicts": {"fabric": N, "clean": N, "unknown": N},
//    "stalls": N, "stall_verdicts": {...}, "blamed": [{"signal", "counter",
//    "direction", "priority", "spans"}], "not_selected": N, "over_limit": N,
//    "fabric_groups": [{"signal", "signal_class", "counter", "device", "port",
//    "netdev", "priority", "direction", "spans", "first_start_unix_nano",
//    "last_end_unix_nano", "peak", "peak_score", "partner"}],
//    "fabric_groups_left_out": N}
// ("blamed" counts stalls judged fabric; "fabric_groups" the fabric spans
// that are not stalls, most spans first, at most 10; "peak" is a pause
// fraction for the pause class, else a rate per second) and each element of
// "spans" is:
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
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fabricscope/v1/query.pb.h"
#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunCorrelate(const CliContext& ctx, const std::vector<std::string>& args);

// The listed spans per --verdict/--stalls/--all (shared with `analyze`):
// nullopt selects every span, as does `default_all` when none of the flags
// is given; else the stalls and, unless `grouped` (the human output, which
// prints the summary's fabric groups instead), the fabric spans. Error: a
// bad --verdict.
absl::StatusOr<std::optional<v1::SpanSelection>> ParseSpanSelection(const Flags& flags,
                                                                    bool default_all, bool grouped);

// Renderers (exposed for tests).
// The whole output: the summary line, the selected spans, what was left out.
std::string CorrelateReportHuman(const v1::CorrelateResponse& response);
std::string CorrelateReportJson(const v1::CorrelateResponse& response);
// "1423 spans: 1401 clean, 2 fabric, 20 unknown; 3 stalls: 2 fabric, 1
// unknown; stalls blamed on: pfc_pause_seconds rx prio 3 (2)" (no newline).
std::string CorrelateSummaryLine(const v1::CorrelateSummary& summary);
std::string CorrelateSummaryJson(const v1::CorrelateSummary& summary);
// The spans alone: a JSON array; the human lines ("no spans matched" when none).
std::string CorrelateJson(const v1::CorrelateResponse& response);
std::string CorrelateHuman(const v1::CorrelateResponse& response);

}  // namespace fabricscope::cli
