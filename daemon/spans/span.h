// A request-layer span as the daemon keeps it: the common form of spans that
// arrive over the native fabricscope.v1.Ingest API and over OTLP.
//
// Spans name what the inference stack was doing (a decode step, a KV-cache
// transfer, a collective) and when, in unix nanoseconds; the correlator
// matches them against the counter samples of this host's ports.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace fabricscope {

enum class SpanKind : uint8_t {
  kUnspecified = 0,
  kRequest = 1,
  kPrefill = 2,
  kDecodeStep = 3,
  kKvTransfer = 4,
  kCollective = 5,
  kOther = 6,
};

// What a span's stall judgement measured (daemon/correlate/stall_learner.h).
enum class StallCost : uint8_t {
  kDuration = 0,            // end - start, ns
  kTimePerOutputToken = 1,  // GenAI request: decode time / (completion tokens - 1), ns
  kTimePerByte = 2,         // collective: execution time / message bytes, ns per byte
  kTimePerPromptToken = 3,  // GenAI request without decode: prefill time / prompt tokens, ns
};
// What decided a span's stall judgement.
enum class StallSource : uint8_t {
  kNone = 0,        // nothing applies: no flag, no threshold, no learned bound (yet)
  kFlag = 1,        // fabricscope.stall=true
  kConfigured = 2,  // --stall-thresholds for the span's name
  kLearned = 3,     // the learned bound of the span's key
};

// A span's stall judgement, made once when the span is ingested (or replayed)
// by the StallLearner, against what it had learned from the spans before it.
struct StallJudgement {
  bool judged = false;  // false: never judged (the correlator's StallPolicy decides)
  bool stall = false;
  StallSource source = StallSource::kNone;
  StallCost cost_kind = StallCost::kDuration;
  double cost = 0;    // the span's cost, in cost_kind's unit
  double bound = 0;   // the bound held against (0: none applied)
  double median = 0;  // the key's learned median and p99 at judgement (0: none)
  double p99 = 0;
  uint64_t samples = 0;  // samples behind the learned figures
  std::string key;       // the learning key, for humans: "vllm llama-3-70b decode"
};

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct Span {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zero: a root span
  std::string name;
  SpanKind kind = SpanKind::kOther;
  int64_t start_unix_nano = 0;
  int64_t end_unix_nano = 0;
  // Span attributes and resource attributes (host.name, service.name), as
  // strings; bounded by the ingest limits.
  std::vector<std::pair<std::string, std::string>> attributes;
  // Scope hints (from attributes rdma.device, rdma.port, network.interface.name);
  // empty/0 when absent: the span then covers every local port.
  std::string rdma_device;
  uint32_t rdma_port = 0;
  std::string netdev;
  // GPU scope hint (attribute fabricscope.gpu): the GPU the span's work ran
  // on, as a PCI bus id ("0000:1b:00.0", "1b:00.0", nvidia-smi's
  // "00000000:1B:00.0") or a decimal GPU index, verbatim. Without a NIC hint
  // above, the correlator scopes the span to the RDMA ports nearest that GPU
  // on the PCI tree (daemon/correlate/correlator.h).
  std::string gpu;
  // The process that ran the span's work (OpenTelemetry's process.pid, a
  // resource attribute every SDK sets, or a span attribute; native spans: the
  // attribute process.pid), 0 when absent or not a positive decimal. The
  // correlator judges the span against that process's own QP counters first
  // (daemon/correlate/process_scope.h).
  uint32_t pid = 0;
  // Explicit stall flag (attribute fabricscope.stall=true).
  bool stall_flag = false;
  // The part of the span the correlator judges, and its name: a GenAI request
  // span is judged over its decode phase (daemon/spans/genai.h). Both zero:
  // the whole span. Always inside [start, end] when set.
  int64_t window_start_unix_nano = 0;
  int64_t window_end_unix_nano = 0;
  std::string phase;  // "decode", "prefill", "" (the whole span)
  // Set by the StallLearner before the span is stored.
  StallJudgement judgement;
  // Which protocol delivered it: "native" or "otlp".
  std::string protocol;
};

// The window the correlator judges: [window_start, window_end] when set,
// else [start, max(start, end)].
inline std::pair<int64_t, int64_t> JudgedWindow(const Span& span) {
  if (span.window_end_unix_nano > span.window_start_unix_nano &&
      span.window_start_unix_nano >= span.start_unix_nano &&
      span.window_end_unix_nano <= span.end_unix_nano) {
    return {span.window_start_unix_nano, span.window_end_unix_nano};
  }
  return {span.start_unix_nano, std::max(span.start_unix_nano, span.end_unix_nano)};
}

// Span::pid from the value of a process.pid attribute (OTLP renders an int
// value as decimal; a string value is taken as written): a decimal in
// [1, 2^32-1], surrounding whitespace allowed; anything else is 0 (absent).
inline uint32_t ParseProcessPid(absl::string_view value) {
  uint32_t pid = 0;
  return absl::SimpleAtoi(value, &pid) ? pid : 0;
}

}  // namespace fabricscope
