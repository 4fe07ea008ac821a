// Parsers for the value syntaxes every layer shares: durations, byte sizes and
// listen addresses. Each returns InvalidArgument with a message that says what
// was expected; the caller names the key (config.cc, correlator floors).
//
// Thread-safety: pure functions.
#pragma once

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

}  // namespace fabricscope
