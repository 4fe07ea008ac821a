// Conversion of wire spans (native fabricscope.v1 and OTLP) into the daemon's
// Span, enforcing the per-span attribute limits on the way.
//
// Both converters:
//  - check id lengths (trace 16 bytes, span 8, parent empty or 8) -> invalid_ids;
//  - check the attribute count (span attributes only; the kept resource
//    attributes do not count) -> too_many_attributes, and each attribute's
//    key + value length against max_attribute_bytes -> attribute_too_large;
//  - copy the attributes as strings and then read the well-known ones:
//    fabricscope.kind, fabricscope.stall ("true"), and the scope hints
//    rdma.device, rdma.port (decimal), network.interface.name and
//    fabricscope.gpu (a PCI bus id or GPU index, kept verbatim; resolved by
//    the correlator against the host topology). A hint that does not parse
//    (rdma.port "x") is ignored; the attribute is still kept.
//  - set the kind: explicit (native `kind` field) > fabricscope.kind > the
//    classifier on the name > other;
//  - read a GenAI request span's gen_ai.* attributes (daemon/spans/genai.h):
//    `other` becomes `request`, and the judged window is its decode phase.
// ValidateSpan (span_validation.h) runs after conversion.
//
// OTLP specifics: AnyValue is rendered as a string (bool "true"/"false", int
// decimal, double shortest round-trip, bytes lower-case hex, arrays
// "[a,b]", kvlists "{k=v,...}", nesting bounded); of the resource attributes
// only host.name, service.name and process.pid are kept (appended to each span's
// attributes). OTLP's own span kind (server/client/...) is not fabricscope's
// kind and is ignored, as are links, status and events except a GenAI
// request's kv_cache_transfer_start / kv_cache_transfer_end, whose times are
// kept as the attributes fabricscope.event.<name> (unix ns).
//
// Pure functions; thread-safe as long as the classifier is (it is).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "daemon/ingest/span_validation.h"
#include "daemon/spans/span.h"
#include "daemon/spans/span_kind.h"
#include "fabricscope/v1/span.pb.h"
#include "opentelemetry/proto/common/v1/common.pb.h"
#include "opentelemetry/proto/resource/v1/resource.pb.h"
#include "opentelemetry/proto/trace/v1/trace.pb.h"

namespace fabricscope {

struct ConvertContext {
  const IngestLimits* limits;            // not null
  const SpanKindClassifier* classifier;  // not null
};

using Attributes = std::vector<std::pair<std::string, std::string>>;

RejectReason ConvertNativeSpan(const v1::Span& in, const ConvertContext& ctx, Span* out,
                               std::string* detail);

// The resource attributes kept on every span of one OTLP ResourceSpans.
struct OtlpResourceInfo {
  Attributes kept;  // host.name, service.name, process.pid when present
  // Set when a kept resource attribute exceeds max_attribute_bytes: every span
  // of the resource is then rejected with attribute_too_large.
  bool too_large = false;
};
OtlpResourceInfo ConvertOtlpResource(const opentelemetry::proto::resource::v1::Resource& resource,
                                     const IngestLimits& limits);

RejectReason ConvertOtlpSpan(const opentelemetry::proto::trace::v1::Span& in,
                             const OtlpResourceInfo& resource, const ConvertContext& ctx, Span* out,
                             std::string* detail);

// Renders an AnyValue as a string of at most `max_bytes` bytes. Returns false
// (and leaves `*out` unspecified) when the rendering would be longer.
bool AnyValueToString(const opentelemetry::proto::common::v1::AnyValue& value, size_t max_bytes,
                      std::string* out);

// Lower-case hex of raw bytes (ids, bytes values).
std::string HexEncode(absl::string_view bytes);

}  // namespace fabricscope
