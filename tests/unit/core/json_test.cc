#include "core/json.h"

#include <string>

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

TEST(JsonTest, PlainTextIsQuoted) {
  EXPECT_EQ(JsonString("mlx5_0"), "\"mlx5_0\"");
  EXPECT_EQ(JsonString(""), "\"\"");
}

TEST(JsonTest, QuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(JsonString("a\"b"), R"("a\"b")");
  EXPECT_EQ(JsonString("C:\\dir\\"), R"("C:\\dir\\")");
  EXPECT_EQ(JsonString("\\\""), R"("\\\"")");
}

TEST(JsonTest, ShortEscapesForNewlineTabAndCarriageReturn) {
  EXPECT_EQ(JsonString("a\nb\tc\rd"), R"("a\nb\tc\rd")");
}

TEST(JsonTest, OtherControlCharactersAsLowercaseUnicodeEscapes) {
  EXPECT_EQ(JsonString(std::string("\0", 1)), R"("\u0000")");
  EXPECT_EQ(JsonString("\x01\x08\x0c\x1b\x1f"), R"("\u0001\u0008\u000c\u001b\u001f")");
  // Space and DEL are not control characters for JSON: copied.
  EXPECT_EQ(JsonString(" \x7f"), "\" \x7f\"");
}

TEST(JsonTest, NonAsciiUtf8IsCopiedUnchanged) {
  EXPECT_EQ(JsonString("r\xC3\xA9seau \xE2\x86\x92 \xF0\x9F\x94\xA5"),
            "\"r\xC3\xA9seau \xE2\x86\x92 \xF0\x9F\x94\xA5\"");
}

TEST(JsonTest, InvalidUtf8BytesArePassedThrough) {
  // A lone continuation byte, a truncated sequence and 0xFF: not replaced,
  // not escaped; the string stays byte-for-byte what it was.
  const std::string bad = "x\x80y\xC3z\xFF";
  EXPECT_EQ(JsonString(bad), "\"" + bad + "\"");
}

TEST(JsonTest, AppendJsonStringAppends) {
  std::string out = "{\"name\":";
  AppendJsonString(&out, "a\"b");
  out += "}";
  EXPECT_EQ(out, R"({"name":"a\"b"})");
}

}  // namespace
}  // namespace fabricscope
