#include "daemon/ingest/span_validation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fabricscope {
namespace {

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& a) {
  return std::all_of(a.begin(), a.end(), [](uint8_t b) { return b == 0; });
}

void SetDetail(std::string* detail, std::string text) {
  if (detail != nullptr) *detail = std::move(text);
}

}  // namespace

absl::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
      return "accepted";
    case RejectReason::kInvalidIds:
      return "invalid_ids";
    case RejectReason::kEndBeforeStart:
      return "end_before_start";
    case RejectReason::kTooOld:
      return "too_old";
    case RejectReason::kInFuture:
      return "in_future";
    case RejectReason::kMissingName:
      return "missing_name";
    case RejectReason::kTooManyAttributes:
      return "too_many_attributes";
    case RejectReason::kAttributeTooLarge:
      return "attribute_too_large";
  }
  return "unknown";
}

RejectReason ValidateSpan(const Span& span, const IngestLimits& limits, int64_t now_unix_nano,
                          std::string* detail) {
  if (AllZero(span.trace_id)) {
    SetDetail(detail, "trace_id is all zero");
    return RejectReason::kInvalidIds;
  }
  if (AllZero(span.span_id)) {
    SetDetail(detail, "span_id is all zero");
    return RejectReason::kInvalidIds;
  }
  if (span.name.empty()) {
    SetDetail(detail, "name is empty");
    return RejectReason::kMissingName;
  }
  if (span.end_unix_nano < span.start_unix_nano) {
    // Unsigned: the difference of two arbitrary int64 times may not fit.
    SetDetail(detail, absl::StrCat("end is ",
                                   static_cast<uint64_t>(span.start_unix_nano) -
                                       static_cast<uint64_t>(span.end_unix_nano),
                                   "ns before start"));
    return RejectReason::kEndBeforeStart;
  }
  const int64_t oldest = now_unix_nano - absl::ToInt64Nanoseconds(limits.max_span_age);
  if (span.end_unix_nano < oldest) {
    SetDetail(detail, absl::StrCat("ended more than ", absl::FormatDuration(limits.max_span_age),
                                   " ago (--max-span-age)"));
    return RejectReason::kTooOld;
  }
  const int64_t newest = now_unix_nano + absl::ToInt64Nanoseconds(limits.max_future);
  if (span.end_unix_nano > newest) {
    SetDetail(detail, absl::StrCat("ends more than ", absl::FormatDuration(limits.max_future),
                                   " in the future"));
    return RejectReason::kInFuture;
  }
  return RejectReason::kNone;
}

}  // namespace fabricscope
