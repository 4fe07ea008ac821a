#include "collectors/netdev_filter.h"

#include "absl/strings/str_cat.h"
#include "core/parse.h"

namespace fabricscope {

absl::StatusOr<NetdevFilter> NetdevFilter::Compile(absl::string_view pattern) {
  NetdevFilter filter;
  if (pattern.empty()) return filter;
  // std::regex recurses per nesting level and overflows on long counts.
  if (absl::Status s = CheckRegexBounds(pattern); !s.ok()) return s;
  // Compiled from a std::string, never from the caller's range: libstdc++ 12's
  // scanner reads the character after a final '(' (to look for "(?"), past
  // the end of a range that is not NUL-terminated (found by fuzz_config).
  const std::string owned(pattern);
  try {
    filter.regex_ = std::make_shared<const std::regex>(owned, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid regex: ", e.what()));
  }
  filter.pattern_ = owned;
  return filter;
}

bool NetdevFilter::Matches(absl::string_view netdev) const {
  if (regex_ == nullptr) return false;
  return std::regex_match(netdev.begin(), netdev.end(), *regex_);
}

}  // namespace fabricscope
