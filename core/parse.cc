#include "core/parse.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace fabricscope {

absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text) {
  absl::Duration d;
  if (!absl::ParseDuration(absl::StripAsciiWhitespace(text), &d) || d <= absl::ZeroDuration() ||
      d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("expected a positive duration such as 10ms, 1s or 1m");
  }
  return d;
}

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  static constexpr std::pair<const char*, uint64_t> kUnits[] = {{"GiB", 1ull << 30},
                                                                {"MiB", 1ull << 20},
                                                                {"KiB", 1ull << 10},
                                                                {"GB", 1000000000ull},
                                                                {"MB", 1000000ull},
                                                                {"KB", 1000ull},
                                                                {"B", 1}};
  uint64_t mult = 1;
  for (const auto& [suffix, m] : kUnits) {
    if (absl::ConsumeSuffix(&t, suffix)) {
      mult = m;
      break;
    }
  }
  uint64_t n;
  if (!absl::SimpleAtoi(t, &n) || n > (UINT64_MAX / mult)) {
    return absl::InvalidArgumentError("expected a size such as 256MiB, 1GiB or 1048576");
  }
  return n * mult;
}

absl::Status ValidateListenAddress(absl::string_view text) {
  absl::string_view host, port;
  if (absl::StartsWith(text, "[")) {
    size_t close = text.find("]:");
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError("expected HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:9479");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos || text.find(':') != colon) {
      return absl::InvalidArgumentError("expected HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:9479");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  int p;
  if (host.empty() || !absl::SimpleAtoi(port, &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(
        "expected HOST:PORT with a port from 0 to 65535 (0 picks a free port)");
  }
  return absl::OkStatus();
}

}  // namespace fabricscope
