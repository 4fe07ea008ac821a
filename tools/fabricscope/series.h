// `fabricscope series --signal S --since DUR [--label NAME=VALUE ...]
//                     [--max-samples N] [--server HOST:PORT] [--output human|json]`
//
// Raw samples, at full resolution, of every series matching the signal
// (signal name like pfc_pause_seconds, family name, or raw counter name) and
// the labels, over the last DUR (Query.Series).
//
// JSON: [{"signal", "family", "source", "raw_name", "device", "port", "netdev",
//         "labels": {...}, "scale", "truncated",
//         "samples": [{"ts_unix_nano", "raw", "value", "rate"}]}]
// where value = raw x scale and rate = the interval's rate in family units/s
// (null on the first sample and across a decrease).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "fabricscope/v1/query.pb.h"
#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunSeries(const CliContext& ctx, const std::vector<std::string>& args);
std::string SeriesJson(const v1::SeriesResponse& response);
std::string SeriesHuman(const v1::SeriesResponse& response);

}  // namespace fabricscope::cli
