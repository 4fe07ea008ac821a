#include "collectors/collector.h"

namespace fabricscope {

absl::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kHot:
      return "hot";
    case Tier::kMedium:
      return "medium";
    case Tier::kSlow:
      return "slow";
    case Tier::kConfig:
      return "config";
  }
  return "unknown";
}

absl::string_view CollectorErrorCodeName(CollectorErrorCode code) {
  switch (code) {
    case CollectorErrorCode::kNotFound:
      return "not_found";
    case CollectorErrorCode::kPermissionDenied:
      return "permission_denied";
    case CollectorErrorCode::kParse:
      return "parse";
    case CollectorErrorCode::kIo:
      return "io";
    case CollectorErrorCode::kUnsupported:
      return "unsupported";
    case CollectorErrorCode::kPoll:
      return "poll";
  }
  return "unknown";
}

CollectorErrorCode CollectorErrorCodeOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return CollectorErrorCode::kNotFound;
    case absl::StatusCode::kPermissionDenied:
      return CollectorErrorCode::kPermissionDenied;
    case absl::StatusCode::kDataLoss:
      return CollectorErrorCode::kParse;
    case absl::StatusCode::kUnimplemented:
      return CollectorErrorCode::kUnsupported;
    default:
      return CollectorErrorCode::kIo;
  }
}

}  // namespace fabricscope
