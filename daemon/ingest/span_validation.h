// Ingest limits and per-span validation (DESIGN.md sections 5 and 9).
//
// Policy (documented for API users in proto/fabricscope/v1/ingest.proto):
//  - Per request: more than max_spans_per_request spans -> the whole request
//    fails with INVALID_ARGUMENT (result="request_too_large" for each span);
//    too many ingest calls in flight -> RESOURCE_EXHAUSTED (result="overload").
//  - Per span: each of the reasons below rejects that span only; the other
//    spans of the request are stored. Attribute limits reject the span rather
//    than silently truncating it, so a client learns its spans are too big.
//
// Nothing here touches files: spans are data, no attribute is ever used as a
// path, and validation allocates nothing beyond the rejection detail.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/spans/span.h"

namespace fabricscope {

enum class RejectReason : uint8_t {
  kNone = 0,
  kInvalidIds,         // zero or wrong-length trace/span id, bad parent id
  kEndBeforeStart,     // end_unix_nano < start_unix_nano
  kTooOld,             // ended more than max_span_age before now
  kInFuture,           // ends more than max_future after now
  kMissingName,        // empty name
  kTooManyAttributes,  // more than max_attributes_per_span
  kAttributeTooLarge,  // key + value longer than max_attribute_bytes
};
inline constexpr int kNumRejectReasons = 8;  // including kNone

// The `result` label value: "invalid_ids", "end_before_start", ... ("accepted"
// for kNone).
absl::string_view RejectReasonName(RejectReason reason);

struct IngestLimits {
  uint32_t max_spans_per_request = 10000;        // --max-spans-per-request
  uint32_t max_attributes_per_span = 64;         // --max-attributes-per-span
  uint32_t max_attribute_bytes = 4096;           // --max-attribute-bytes (key + value)
  absl::Duration max_span_age = absl::Hours(1);  // --max-span-age
  absl::Duration max_future = absl::Minutes(1);  // clock skew tolerated
  // Ingest calls (unary requests, open streams) served at once; one more is
  // answered RESOURCE_EXHAUSTED (counted, result="overload"). Bounds the memory
  // of requests in flight together with the gRPC message size limit, and is
  // half of GrpcServer::kMaxThreads so that stalled ingest streams can never
  // take the threads the Query service needs.
  uint32_t max_concurrent_requests = 16;
};

// Checks the fields of an already converted span: ids not zero, name, time
// order and window relative to `now_unix_nano`. Attribute limits and id
// lengths are checked during conversion (span_convert.h). On rejection,
// `*detail` (may be null) gets a short human-readable explanation.
RejectReason ValidateSpan(const Span& span, const IngestLimits& limits, int64_t now_unix_nano,
                          std::string* detail);

}  // namespace fabricscope
