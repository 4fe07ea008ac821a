#include "core/parse.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

absl::Status CheckRegexBounds(absl::string_view regex) {
  if (regex.size() > kMaxRegexLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("regex longer than ", kMaxRegexLength, " characters"));
  }
  int depth = 0, max_depth = 0;
  bool in_braces = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    // A number std::regex reads as an integer (a repetition count in braces,
    // a backreference after a backslash) overflows its accumulator past
    // about 18 digits (undefined behaviour inside libstdc++): at most
    // kMaxRegexNumberDigits digits there.
    const bool counted = in_braces || (i > 0 && regex[i - 1] == '\\');
    if (counted && absl::ascii_isdigit(static_cast<unsigned char>(regex[i]))) {
      size_t n = 0;
      while (i + n < regex.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(regex[i + n]))) {
        ++n;
      }
      if (n > kMaxRegexNumberDigits) {
        return absl::InvalidArgumentError(
            absl::StrCat("regex has a repetition count or backreference of more than ",
                         kMaxRegexNumberDigits, " digits"));
      }
      i += n - 1;
      continue;
    }
    if (regex[i] == '{') {
      in_braces = true;
    } else if (regex[i] == '}') {
      in_braces = false;
    }
    if (regex[i] == '\\') {
      // an escaped character never opens or closes a group; its digits are
      // checked above on the next round
      if (i + 1 < regex.size() && !absl::ascii_isdigit(static_cast<unsigned char>(regex[i + 1]))) {
        ++i;
      }
    } else if (regex[i] == '(') {
      max_depth = std::max(max_depth, ++depth);
    } else if (regex[i] == ')') {
      --depth;
    }
  }
  if (max_depth > kMaxRegexDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("regex nests groups deeper than ", kMaxRegexDepth, " levels"));
  }
  return absl::OkStatus();
}

}  // namespace fabricscope
