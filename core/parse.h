// Parsers for the value syntaxes every layer shares: durations, byte sizes and
// listen addresses. Each returns InvalidArgument with a message that says what
// was expected; the caller names the key (config.cc, correlator floors).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fabricscope {

// "10ms", "1s", "1m": a finite duration > 0.
absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text);

// "256MiB", "1GiB", "5MB", "1048576": bytes (binary and decimal suffixes).
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

// HOST:PORT, [V6]:PORT; port 0 means "pick a free port".
absl::Status ValidateListenAddress(absl::string_view text);

// Bounds a user-supplied regex before it reaches std::regex, whose compiler
// and matcher recurse per nesting level (deep nesting overflows the stack)
// and whose integer parsing overflows: at most kMaxRegexLength characters,
// kMaxRegexDepth nested groups and kMaxRegexNumberDigits digits in a count.
inline constexpr size_t kMaxRegexLength = 1024;
inline constexpr int kMaxRegexDepth = 16;
// Digits of a repetition count ({n,m}) or a backreference (\n).
inline constexpr size_t kMaxRegexNumberDigits = 6;
absl::Status CheckRegexBounds(absl::string_view regex);

}  // namespace fabricscope
