// Decoding ingest requests from their wire bytes, so that one bad string does
// not sink a whole request (issue #38).
//
// proto3 `string` fields must hold UTF-8, and protobuf's parser fails the
// whole message at the first one that does not: one span name in Latin-1
// would lose every span of the request. DecodeRepairingUtf8 parses strictly
// first (the gRPC services do that themselves, without a copy of the
// request's bytes, and call it only when that fails); then it walks
// the wire format against the message's descriptor, replace each byte of a
// string field that is not part of a valid UTF-8 sequence by U+FFFD (as
// OpenTelemetry's Go SDK and the Collector's exporters repair attributes),
// and parse the repaired bytes. Policy: repaired, not rejected -- the span's
// timing and ids are what correlation needs, and they are intact; each
// repaired string is counted (fabricscope_ingest_strings_repaired_total).
// Bytes that are not a protobuf message of that type at all (bad wire types,
// truncated fields, nesting beyond kMaxDepth) are `malformed`: the request
// is refused as a whole with the reason.
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace fabricscope {

struct DecodeOutcome {
  bool ok = false;
  // String fields repaired, and the path of the first ("spans.name").
  uint64_t repaired_strings = 0;
  std::string first_repaired_field;
  std::string error;  // when !ok: why the bytes are not such a message
};

inline constexpr int kMaxDecodeDepth = 100;  // protobuf's own recursion limit

// Parses `bytes` into `*message`, strictly first.
DecodeOutcome DecodeRepairingUtf8(absl::string_view bytes, google::protobuf::Message* message);

// True when `s` is valid UTF-8 (no overlong forms, surrogates or code points
// past U+10FFFF).
bool IsValidUtf8(absl::string_view s);
// `s` with every byte that is not part of a valid sequence replaced by U+FFFD.
std::string RepairUtf8(absl::string_view s);

}  // namespace fabricscope
