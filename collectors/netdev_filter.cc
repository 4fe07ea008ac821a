#include "collectors/netdev_filter.h"

#include "absl/strings/str_cat.h"

namespace fabricscope {

absl::StatusOr<NetdevFilter> NetdevFilter::Compile(absl::string_view pattern) {
  NetdevFilter filter;
  if (pattern.empty()) return filter;
  try {
    filter.regex_ =
        std::make_shared<const std::regex>(pattern.begin(), pattern.end(), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid regex: ", e.what()));
  }
  filter.pattern_ = std::string(pattern);
  return filter;
}

bool NetdevFilter::Matches(absl::string_view netdev) const {
  if (regex_ == nullptr) return false;
  return std::regex_match(netdev.begin(), netdev.end(), *regex_);
}

}  // namespace fabricscope
