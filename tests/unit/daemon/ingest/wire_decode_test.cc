#include "daemon/ingest/wire_decode.h"

#include "fabricscope/v1/ingest.pb.h"
#include "gtest/gtest.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace fabricscope {
namespace wire_decode_test {
namespace {

TEST(Utf8Test, ValidatesAsTheStandardSays) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("decode"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // 2, 3, 4 bytes
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));                           // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("caf\xe9"));                                   // Latin-1
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));                                  // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));                              // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));                              // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));                          // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));                                  // cut short
  EXPECT_FALSE(IsValidUtf8("\x80"));                                      // lone continuation
}

TEST(Utf8Test, RepairReplacesEachInvalidByte) {
  EXPECT_EQ(RepairUtf8("caf\xe9!"), "caf\xEF\xBF\xBD!");
  EXPECT_EQ(RepairUtf8("\xe2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(RepairUtf8("ok \xe2\x82\xac"), "ok \xe2\x82\xac");
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xff\xfe", "a\x80z"}) {
    EXPECT_TRUE(IsValidUtf8(RepairUtf8(bad))) << bad;
  }
}

TEST(DecodeRepairingUtf8Test, ValidBytesParseAsTheyAre) {
  v1::PushRequest req;
  req.add_spans()->set_name("decode");
  v1::PushRequest out;
  DecodeOutcome d = DecodeRepairingUtf8(req.SerializeAsString(), &out);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.repaired_strings, 0u);
  EXPECT_EQ(out.spans(0).name(), "decode");
}

TEST(DecodeRepairingUtf8Test, RepairsStringsAndKeepsEverythingElse) {
  v1::PushRequest req;
  for (int i = 0; i < 3; ++i) {
    v1::Span* s = req.add_spans();
    s->set_trace_id(std::string(16, '\xff'));  // bytes: never touched
    s->set_span_id(std::string(8, static_cast<char>(0x80 + i)));
    s->set_name(i == 1 ? "dec\xffode" : "decode");
    s->set_start_unix_nano(1000 + i);
    s->set_end_unix_nano(2000 + i);
    s->set_rdma_port(static_cast<uint32_t>(i));
  }
  auto* a = req.mutable_spans(2)->add_attributes();
  a->set_key("k\xe9y");
  a->set_value("v");
  v1::PushRequest out;
  DecodeOutcome d = DecodeRepairingUtf8(req.SerializePartialAsString(), &out);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.repaired_strings, 2u);
  EXPECT_EQ(d.first_repaired_field, "spans.name");
  ASSERT_EQ(out.spans_size(), 3);
  EXPECT_EQ(out.spans(1).name(), "dec\xEF\xBF\xBDode");
  EXPECT_EQ(out.spans(2).attributes(0).key(), "k\xEF\xBF\xBDy");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out.spans(i).trace_id(), std::string(16, '\xff'));
    EXPECT_EQ(out.spans(i).span_id(), std::string(8, static_cast<char>(0x80 + i)));
    EXPECT_EQ(out.spans(i).start_unix_nano(), 1000u + i);
    EXPECT_EQ(out.spans(i).end_unix_nano(), 2000u + i);
    EXPECT_EQ(out.spans(i).rdma_port(), static_cast<uint32_t>(i));
  }
}

TEST(DecodeRepairingUtf8Test, RepairsNestedOtlpValues) {
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest req;
  auto* span = req.add_resource_spans()->add_scope_spans()->add_spans();
  span->set_name("llm_request");
  auto* v = span->add_attributes()->mutable_value();
  for (int depth = 0; depth < 5; ++depth) {
    auto* kv = v->mutable_kvlist_value()->add_values();
    kv->set_key("k");
    v = kv->mutable_value();
  }
  v->set_string_value("\xc3");
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest out;
  DecodeOutcome d = DecodeRepairingUtf8(req.SerializePartialAsString(), &out);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.repaired_strings, 1u);
  EXPECT_NE(d.first_repaired_field.find("string_value"), std::string::npos)
      << d.first_repaired_field;
}

TEST(DecodeRepairingUtf8Test, RefusesBytesThatAreNoSuchMessage) {
  v1::PushRequest out;
  EXPECT_FALSE(DecodeRepairingUtf8("not protobuf \xff\xff\xff\xff", &out).ok);
  v1::PushRequest req;
  req.add_spans()->set_name("dec\xffode");
  std::string cut = req.SerializePartialAsString();
  cut.pop_back();  // the name's declared length runs past the end
  DecodeOutcome d = DecodeRepairingUtf8(cut, &out);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.error.find("spans"), std::string::npos) << d.error;
  // A group (wire type 3) that is never closed.
  EXPECT_FALSE(DecodeRepairingUtf8(std::string("\x0b\x08\x01", 3), &out).ok);
  // Nesting deeper than protobuf's own limit: refused, not a stack overflow.
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest deep, deep_out;
  auto* v =
      deep.add_resource_spans()->add_scope_spans()->add_spans()->add_attributes()->mutable_value();
  for (int level = 0; level < 40; ++level) {  // 3 messages a level
    auto* kv = v->mutable_kvlist_value()->add_values();
    v = kv->mutable_value();
  }
  v->set_string_value("\xff");
  d = DecodeRepairingUtf8(deep.SerializePartialAsString(), &deep_out);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.error.find("nested deeper"), std::string::npos) << d.error;
}

}  // namespace
}  // namespace wire_decode_test
}  // namespace fabricscope
