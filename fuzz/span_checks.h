// Shared by the span fuzz targets: the limits they run with and the
// properties every accepted span must have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "daemon/ingest/span_validation.h"
#include "daemon/ingest/wire_decode.h"
#include "daemon/spans/span.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/stubs/logging.h"

namespace fabricscope::fuzz {

// A fixed "now" (2025-10-09) so runs are reproducible.
inline constexpr int64_t kNowNs = 1760000000000000000;

// Small limits, so the fuzzer reaches every rejection reason with short inputs.
inline const IngestLimits* FuzzLimits() {
  static const IngestLimits* const limits = [] {
    auto* l = new IngestLimits;
    l->max_attributes_per_span = 8;
    l->max_attribute_bytes = 64;
    return l;
  }();
  return limits;
}

// `own_attributes`: how many of span.attributes are span attributes (the
// rest are kept OTLP resource attributes, which the count limit ignores).
inline void CheckAcceptedSpan(const Span& span, const IngestLimits& limits, size_t own_attributes) {
  FUZZ_CHECK(!span.name.empty());
  FUZZ_CHECK(span.end_unix_nano >= span.start_unix_nano);
  FUZZ_CHECK(span.end_unix_nano <= kNowNs + absl::ToInt64Nanoseconds(limits.max_future));
  FUZZ_CHECK(span.end_unix_nano >= kNowNs - absl::ToInt64Nanoseconds(limits.max_span_age));
  FUZZ_CHECK(own_attributes <= limits.max_attributes_per_span);
  for (const auto& [k, v] : span.attributes) {
    FUZZ_CHECK(k.size() + v.size() <= limits.max_attribute_bytes);
  }
  bool trace_zero = true, span_zero = true;
  for (uint8_t b : span.trace_id) trace_zero = trace_zero && b == 0;
  for (uint8_t b : span.span_id) span_zero = span_zero && b == 0;
  FUZZ_CHECK(!trace_zero && !span_zero);
  FUZZ_CHECK(span.kind != SpanKind::kUnspecified);
}

// Decodes the fuzz input into `*request` as the gRPC ingest methods do
// (daemon/service/raw_codec.h): strictly, else with strings that are not
// UTF-8 repaired. False when the bytes are no such message (with a reason).
// Whatever it decodes holds only valid UTF-8: a repaired message serializes
// and parses strictly.
template <class Request>
bool DecodeAsIngestDoes(const uint8_t* data, size_t size, Request* request) {
  const DecodeOutcome decoded =
      DecodeRepairingUtf8(absl::string_view(reinterpret_cast<const char*>(data), size), request);
  if (!decoded.ok) {
    FUZZ_CHECK(!decoded.error.empty());
    return false;
  }
  if (decoded.repaired_strings > 0) {
    FUZZ_CHECK(!decoded.first_repaired_field.empty());
    Request again;
    FUZZ_CHECK(again.ParseFromString(request->SerializeAsString()));
  }
  return true;
}

// libprotobuf logs every invalid UTF-8 string it rejects; quiet it so the
// fuzzer's output stays readable (the parse still fails as it would).
inline void SilenceProtobufLogging() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
}

}  // namespace fabricscope::fuzz
