// `fabricscope push`: sends spans to the daemon's fabricscope.v1.Ingest API.
//
// Input: JSON Lines on stdin, one span object per line (blank lines skipped),
// the same object `fabricscope correlate --output json` prints and the
// recording format wraps in {"span": ...} (a wrapped line is accepted too):
//
//   {"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7",
//    "name":"decode","kind":"decode_step","start_unix_nano":1700000000000000000,
//    "end_unix_nano":1700000000020000000,"attributes":{"rdma.device":"mlx5_0"}}
//
// Fields: trace_id (32 hex digits), span_id (16 hex), parent_span_id (16 hex,
// optional), name, kind (request, prefill, decode_step, kv_transfer,
// collective, other; optional), start_unix_nano / end_unix_nano (integers or
// decimal strings), attributes (object; non-string values are sent as their
// JSON text), optional rdma_device, rdma_port, network_interface_name, stall.
// Unknown fields are ignored (so correlate's output can be piped back).
//
// A line that is not a span is reported on stderr by its number (the first
// 100, then a count) and not sent; the good lines are. Spans are sent over
// one PushStream in batches of --batch (default 512). Output: accepted/
// rejected counts and each rejection by its stdin line (human), or the
// PushResponse as JSON (--output json). Exit status 0 when every line was a
// span and every span was accepted, 1 when some lines or spans were left out
// or the call failed, 2 when no line was a span (or a usage error).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fabricscope/v1/span.pb.h"
#include "tools/fabricscope/cli.h"

// ParseSpanJson (the input format) lives in daemon/recording/recording.h.

namespace fabricscope::cli {

int RunPush(const CliContext& ctx, const std::vector<std::string>& args);

}  // namespace fabricscope::cli
