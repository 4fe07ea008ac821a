#include "daemon/ingest/span_validation.h"

#include "gtest/gtest.h"

namespace fabricscope {
namespace span_validation_test {
namespace {

constexpr int64_t kNow = 1'700'000'000'000'000'000;
constexpr int64_t kSec = 1'000'000'000;

Span Good() {
  Span s;
  s.trace_id[3] = 7;
  s.span_id[5] = 9;
  s.name = "decode";
  s.start_unix_nano = kNow - 2 * kSec;
  s.end_unix_nano = kNow - 1 * kSec;
  return s;
}

RejectReason Check(const Span& s, std::string* detail = nullptr) {
  return ValidateSpan(s, IngestLimits{}, kNow, detail);
}

TEST(SpanValidationTest, AcceptsAGoodSpan) {
  EXPECT_EQ(Check(Good()), RejectReason::kNone);
  Span zero_length = Good();
  zero_length.end_unix_nano = zero_length.start_unix_nano;
  EXPECT_EQ(Check(zero_length), RejectReason::kNone);
}

TEST(SpanValidationTest, EachReason) {
  std::string detail;
  Span s = Good();
  s.trace_id = {};
  EXPECT_EQ(Check(s, &detail), RejectReason::kInvalidIds);
  EXPECT_EQ(detail, "trace_id is all zero");

  s = Good();
  s.span_id = {};
  EXPECT_EQ(Check(s), RejectReason::kInvalidIds);

  s = Good();
  s.name.clear();
  EXPECT_EQ(Check(s), RejectReason::kMissingName);

  s = Good();
  s.end_unix_nano = s.start_unix_nano - 5;
  EXPECT_EQ(Check(s, &detail), RejectReason::kEndBeforeStart);
  EXPECT_EQ(detail, "end is 5ns before start");

  s = Good();
  s.start_unix_nano = kNow - 3700 * kSec;
  s.end_unix_nano = kNow - 3601 * kSec;  // default max age 1h
  EXPECT_EQ(Check(s), RejectReason::kTooOld);
  s.end_unix_nano = kNow - 3599 * kSec;  // started long ago but ended within the hour: fine
  EXPECT_EQ(Check(s), RejectReason::kNone);

  s = Good();
  s.start_unix_nano = kNow;
  s.end_unix_nano = kNow + 61 * kSec;
  EXPECT_EQ(Check(s), RejectReason::kInFuture);
  s.end_unix_nano = kNow + 59 * kSec;
  EXPECT_EQ(Check(s), RejectReason::kNone);

  // A custom max age.
  IngestLimits limits;
  limits.max_span_age = absl::Seconds(10);
  s = Good();
  s.start_unix_nano = kNow - 12 * kSec;
  s.end_unix_nano = kNow - 11 * kSec;
  EXPECT_EQ(ValidateSpan(s, limits, kNow, nullptr), RejectReason::kTooOld);
}

TEST(SpanValidationTest, ReasonNamesAreMetricLabels) {
  EXPECT_EQ(RejectReasonName(RejectReason::kNone), "accepted");
  EXPECT_EQ(RejectReasonName(RejectReason::kInvalidIds), "invalid_ids");
  EXPECT_EQ(RejectReasonName(RejectReason::kEndBeforeStart), "end_before_start");
  EXPECT_EQ(RejectReasonName(RejectReason::kTooOld), "too_old");
  EXPECT_EQ(RejectReasonName(RejectReason::kInFuture), "in_future");
  EXPECT_EQ(RejectReasonName(RejectReason::kMissingName), "missing_name");
  EXPECT_EQ(RejectReasonName(RejectReason::kTooManyAttributes), "too_many_attributes");
  EXPECT_EQ(RejectReasonName(RejectReason::kAttributeTooLarge), "attribute_too_large");
}

}  // namespace
}  // namespace span_validation_test
}  // namespace fabricscope
