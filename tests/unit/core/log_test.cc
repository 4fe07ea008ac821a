#include "core/log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

using ::testing::HasSubstr;

TEST(LogTest, FormatsLogfmtWithQuoting) {
  std::string line =
      FormatLogLine(absl::FromUnixMillis(1700000000123), LogLevel::kWarn, "rdma_sysfs",
                    "device vanished", {{"device", "mlx5_1"}, {"path", "a b\"c"}, {"empty", ""}});
  EXPECT_EQ(line,
            "ts=2023-11-14T22:13:20.123Z level=warn component=rdma_sysfs msg=\"device vanished\" "
            "device=mlx5_1 path=\"a b\\\"c\" empty=\"\"\n");
}

TEST(LogTest, QuotedValuesAreJsonStrings) {
  std::string line = FormatLogLine(absl::FromUnixMillis(0), LogLevel::kInfo, "t", "m",
                                   {{"err", "a=b\\c\r\n\x01"}, {"name", "r\xC3\xA9seau"}});
  EXPECT_EQ(line,
            "ts=1970-01-01T00:00:00.000Z level=info component=t msg=m "
            "err=\"a=b\\\\c\\r\\n\\u0001\" name=r\xC3\xA9seau\n");
}

TEST(LogTest, LevelFilters) {
  std::string captured;
  SetLogCaptureForTest(&captured);
  SetLogLevel(LogLevel::kWarn);
  Log(LogLevel::kInfo, "t", "hidden");
  Log(LogLevel::kError, "t", "shown");
  SetLogLevel(LogLevel::kInfo);
  SetLogCaptureForTest(nullptr);
  EXPECT_THAT(captured, ::testing::Not(HasSubstr("hidden")));
  EXPECT_THAT(captured, HasSubstr("msg=shown"));
}

TEST(LogTest, RateLimiterCountsSuppressedLines) {
  LogRateLimiter limiter(absl::Seconds(10));
  absl::Time t0 = absl::FromUnixSeconds(1000);
  uint64_t suppressed = 99;
  EXPECT_TRUE(limiter.Allow("dev", t0, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.Allow("dev", t0 + absl::Seconds(1), nullptr));
  EXPECT_TRUE(limiter.Allow("other", t0 + absl::Seconds(1), nullptr));
  EXPECT_TRUE(limiter.Allow("dev", t0 + absl::Seconds(10), &suppressed));
  EXPECT_EQ(suppressed, 5u);
}

TEST(LogTest, ParseLogLevel) {
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarn);
  EXPECT_FALSE(ParseLogLevel("verbose").ok());
}

}  // namespace
}  // namespace fabricscope
