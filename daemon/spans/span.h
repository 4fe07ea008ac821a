// A request-layer span as the daemon keeps it: the common form of spans that
// arrive over the native fabricscope.v1.Ingest API and over OTLP.
//
// Spans name what the inference stack was doing (a decode step, a KV-cache
// transfer, a collective) and when, in unix nanoseconds; the correlator
// matches them against the counter samples of this host's ports.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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
  // Explicit stall flag (attribute fabricscope.stall=true).
  bool stall_flag = false;
  // Which protocol delivered it: "native" or "otlp".
  std::string protocol;
};

}  // namespace fabricscope
