#include "daemon/spans/span_kind.h"

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

std::unique_ptr<SpanKindClassifier> Defaults() {
  auto c = SpanKindClassifier::Create({});
  EXPECT_TRUE(c.ok()) << c.status();
  return *std::move(c);
}

TEST(SpanKindTest, NamesRoundTrip) {
  for (SpanKind k : {SpanKind::kRequest, SpanKind::kPrefill, SpanKind::kDecodeStep,
                     SpanKind::kKvTransfer, SpanKind::kCollective, SpanKind::kOther}) {
    EXPECT_EQ(ParseSpanKindName(SpanKindName(k)), k);
  }
  EXPECT_EQ(ParseSpanKindName("Decode_Step"), SpanKind::kDecodeStep);
  EXPECT_FALSE(ParseSpanKindName("unspecified").has_value());
  EXPECT_FALSE(ParseSpanKindName("decode").has_value());
}

TEST(SpanKindTest, DefaultsRecogniseInferenceSpanNames) {
  auto c = Defaults();
  struct Case {
    const char* name;
    SpanKind kind;
  } cases[] = {
      {"llm_request", SpanKind::kRequest},      // vLLM
      {"generate", SpanKind::kRequest},         // TGI
      {"generate_stream", SpanKind::kRequest},  // TGI
      {"chat.completion", SpanKind::kRequest},
      {"prefill", SpanKind::kPrefill},  // TGI / SGLang
      {"model.prefill", SpanKind::kPrefill},
      {"decode", SpanKind::kDecodeStep},
      {"decode_step", SpanKind::kDecodeStep},
      {"Decode Step 17", SpanKind::kDecodeStep},
      {"kv_transfer", SpanKind::kKvTransfer},
      {"KV cache send", SpanKind::kKvTransfer},
      {"KVCacheTransfer", SpanKind::kKvTransfer},
      {"decode.kv_recv", SpanKind::kKvTransfer},  // kv wins over decode
      {"nixl_read", SpanKind::kKvTransfer},
      {"allreduce", SpanKind::kCollective},
      {"all_gather", SpanKind::kCollective},
      {"nccl:AllReduce", SpanKind::kCollective},
      {"reduce_scatter", SpanKind::kCollective},
      {"tokenize", SpanKind::kOther},
      {"", SpanKind::kOther},
  };
  for (const Case& tc : cases) {
    EXPECT_EQ(c->Classify(tc.name), tc.kind) << tc.name;
    EXPECT_EQ(c->Classify(tc.name), tc.kind) << tc.name << " (cached)";
  }
}

TEST(SpanKindTest, UserPatternsComeFirst) {
  auto patterns = ParseSpanKindPatterns("^step$=decode_step; xfer{1,2}=kv_transfer ;");
  ASSERT_TRUE(patterns.ok()) << patterns.status();
  ASSERT_EQ(patterns->size(), 2u);
  EXPECT_EQ((*patterns)[1].regex, "xfer{1,2}");  // a comma inside a regex is fine
  auto c = SpanKindClassifier::Create(*patterns);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Classify("step"), SpanKind::kDecodeStep);
  EXPECT_EQ((*c)->Classify("XFER_decode"), SpanKind::kKvTransfer);
  EXPECT_EQ((*c)->Classify("prefill"), SpanKind::kPrefill);  // defaults still apply
  EXPECT_EQ((*c)->Classify("steps"), SpanKind::kOther);
}

TEST(SpanKindTest, PatternErrorsNameTheEntry) {
  auto bad_kind = ParseSpanKindPatterns("foo=bar");
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.status().message().find("unknown kind \"bar\""), absl::string_view::npos);
  auto bad_regex = ParseSpanKindPatterns("ok=request;(unclosed=prefill");
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(bad_regex.status().message().find("(unclosed=prefill"), absl::string_view::npos);
  EXPECT_FALSE(ParseSpanKindPatterns("no-equals-sign").ok());
  EXPECT_FALSE(ParseSpanKindPatterns("=request").ok());
  EXPECT_TRUE(ParseSpanKindPatterns("").ok());
}

// std::regex reads a repetition count or a backreference into a long without
// an overflow check (fuzz_config found "\\888...8" in --netdev-include): more
// than kMaxRegexNumberDigits digits there is refused before it compiles.
TEST(CheckRegexBounds, LongCountsAndBackreferencesAreRefused) {
  EXPECT_TRUE(CheckRegexBounds("eth[0-9]{1,4}|ens\\d+").ok());
  EXPECT_TRUE(CheckRegexBounds("decode_12345678901234567890").ok());  // literal digits
  EXPECT_TRUE(CheckRegexBounds("(a)\\1").ok());
  for (const char* bad :
       {"et}(x\\8888888888888888888888", "a{99999999999999999999}", "a{1,88888888888888888888}"}) {
    const absl::Status s = CheckRegexBounds(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("digits"), absl::string_view::npos) << s;
  }
}

}  // namespace
}  // namespace fabricscope
