#include "daemon/ingest/span_convert.h"

#include "gtest/gtest.h"

namespace fabricscope {
namespace span_convert_test {
namespace {

namespace otlp_common = opentelemetry::proto::common::v1;
namespace otlp_trace = opentelemetry::proto::trace::v1;
namespace otlp_resource = opentelemetry::proto::resource::v1;

constexpr int64_t kNow = 1'700'000'000'000'000'000;

std::string Bytes(size_t n, char fill) { return std::string(n, fill); }

std::string Attr(const Span& s, absl::string_view key) {
  for (const auto& [k, v] : s.attributes) {
    if (k == key) return v;
  }
  return "<absent>";
}

class SpanConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = SpanKindClassifier::Create({});
    ASSERT_TRUE(c.ok());
    classifier_ = *std::move(c);
    ctx_ = ConvertContext{&limits_, classifier_.get()};
  }
  IngestLimits limits_;
  std::unique_ptr<SpanKindClassifier> classifier_;
  ConvertContext ctx_{};
};

v1::Span NativeSpan() {
  v1::Span s;
  s.set_trace_id(Bytes(16, '\x01'));
  s.set_span_id(Bytes(8, '\x02'));
  s.set_name("decode");
  s.set_start_unix_nano(kNow - 2000);
  s.set_end_unix_nano(kNow - 1000);
  return s;
}

TEST_F(SpanConvertTest, NativeFieldsAndHints) {
  v1::Span in = NativeSpan();
  in.set_parent_span_id(Bytes(8, '\x03'));
  in.set_rdma_device("mlx5_0");
  in.set_rdma_port(1);
  in.set_network_interface_name("eth2");
  auto* a = in.add_attributes();
  a->set_key("model");
  a->set_value("llama");
  Span out;
  std::string detail;
  ASSERT_EQ(ConvertNativeSpan(in, ctx_, &out, &detail), RejectReason::kNone) << detail;
  EXPECT_EQ(out.trace_id[15], 1);
  EXPECT_EQ(out.span_id[7], 2);
  EXPECT_EQ(out.parent_span_id[0], 3);
  EXPECT_EQ(out.name, "decode");
  EXPECT_EQ(out.kind, SpanKind::kDecodeStep);  // from the name
  EXPECT_EQ(out.start_unix_nano, kNow - 2000);
  EXPECT_EQ(out.end_unix_nano, kNow - 1000);
  EXPECT_EQ(out.rdma_device, "mlx5_0");
  EXPECT_EQ(out.rdma_port, 1u);
  EXPECT_EQ(out.netdev, "eth2");
  EXPECT_EQ(Attr(out, "model"), "llama");
  EXPECT_EQ(out.protocol, "native");
  EXPECT_FALSE(out.stall_flag);
}

TEST_F(SpanConvertTest, NativeKindPrecedenceAndWellKnownAttributes) {
  v1::Span in = NativeSpan();
  auto add = [&](const char* k, const char* v) {
    auto* a = in.add_attributes();
    a->set_key(k);
    a->set_value(v);
  };
  add("fabricscope.kind", "collective");
  add("fabricscope.stall", "TRUE");
  add("rdma.device", "mlx5_1");
  add("rdma.port", "2");
  add("network.interface.name", "ens1f0");
  Span out;
  ASSERT_EQ(ConvertNativeSpan(in, ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.kind, SpanKind::kCollective);  // attribute beats the name
  EXPECT_TRUE(out.stall_flag);
  EXPECT_EQ(out.rdma_device, "mlx5_1");
  EXPECT_EQ(out.rdma_port, 2u);
  EXPECT_EQ(out.netdev, "ens1f0");

  in.set_kind(v1::SPAN_KIND_PREFILL);  // the explicit field beats both
  ASSERT_EQ(ConvertNativeSpan(in, ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.kind, SpanKind::kPrefill);

  v1::Span bad_port = NativeSpan();
  auto* p = bad_port.add_attributes();
  p->set_key("rdma.port");
  p->set_value("../../etc/passwd");
  ASSERT_EQ(ConvertNativeSpan(bad_port, ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.rdma_port, 0u);  // ignored as a hint, kept as data
  EXPECT_EQ(Attr(out, "rdma.port"), "../../etc/passwd");
}

TEST_F(SpanConvertTest, NativeIdLengths) {
  Span out;
  std::string detail;
  v1::Span in = NativeSpan();
  in.set_trace_id(Bytes(15, '\x01'));
  EXPECT_EQ(ConvertNativeSpan(in, ctx_, &out, &detail), RejectReason::kInvalidIds);
  EXPECT_EQ(detail, "trace_id must be 16 bytes, got 15");
  in = NativeSpan();
  in.set_span_id("");
  EXPECT_EQ(ConvertNativeSpan(in, ctx_, &out, nullptr), RejectReason::kInvalidIds);
  in = NativeSpan();
  in.set_parent_span_id(Bytes(4, '\x01'));
  EXPECT_EQ(ConvertNativeSpan(in, ctx_, &out, nullptr), RejectReason::kInvalidIds);
}

TEST_F(SpanConvertTest, NativeAttributeLimits) {
  limits_.max_attributes_per_span = 2;
  limits_.max_attribute_bytes = 16;
  Span out;
  v1::Span in = NativeSpan();
  for (int i = 0; i < 3; ++i) {
    auto* a = in.add_attributes();
    a->set_key("k");
    a->set_value("v");
  }
  EXPECT_EQ(ConvertNativeSpan(in, ctx_, &out, nullptr), RejectReason::kTooManyAttributes);
  in = NativeSpan();
  auto* a = in.add_attributes();
  a->set_key("key");
  a->set_value(Bytes(13, 'x'));  // 3 + 13 = 16: fits
  EXPECT_EQ(ConvertNativeSpan(in, ctx_, &out, nullptr), RejectReason::kNone);
  a->set_value(Bytes(14, 'x'));
  std::string detail;
  EXPECT_EQ(ConvertNativeSpan(in, ctx_, &out, &detail), RejectReason::kAttributeTooLarge);
  EXPECT_NE(detail.find("\"key\""), std::string::npos);
}

TEST_F(SpanConvertTest, AnyValueRendering) {
  otlp_common::AnyValue v;
  std::string s;
  v.set_string_value("hello");
  ASSERT_TRUE(AnyValueToString(v, 100, &s));
  EXPECT_EQ(s, "hello");
  v.set_bool_value(true);
  ASSERT_TRUE(AnyValueToString(v, 100, &s));
  EXPECT_EQ(s, "true");
  v.set_int_value(-42);
  ASSERT_TRUE(AnyValueToString(v, 100, &s));
  EXPECT_EQ(s, "-42");
  v.set_double_value(0.25);
  ASSERT_TRUE(AnyValueToString(v, 100, &s));
  EXPECT_EQ(s, "0.25");
  v.set_bytes_value(std::string("\x00\xab\x10", 3));
  ASSERT_TRUE(AnyValueToString(v, 100, &s));
  EXPECT_EQ(s, "00ab10");
  otlp_common::AnyValue arr;
  arr.mutable_array_value()->add_values()->set_int_value(1);
  arr.mutable_array_value()->add_values()->set_string_value("b");
  ASSERT_TRUE(AnyValueToString(arr, 100, &s));
  EXPECT_EQ(s, "[1,b]");
  otlp_common::AnyValue kv;
  auto* e = kv.mutable_kvlist_value()->add_values();
  e->set_key("x");
  e->mutable_value()->set_bool_value(false);
  ASSERT_TRUE(AnyValueToString(kv, 100, &s));
  EXPECT_EQ(s, "{x=false}");
  otlp_common::AnyValue empty;
  ASSERT_TRUE(AnyValueToString(empty, 100, &s));
  EXPECT_EQ(s, "");
  // Over the budget.
  v.set_string_value(Bytes(11, 'a'));
  EXPECT_FALSE(AnyValueToString(v, 10, &s));
  EXPECT_FALSE(AnyValueToString(arr, 4, &s));
}

otlp_trace::Span OtlpSpan() {
  otlp_trace::Span s;
  s.set_trace_id(Bytes(16, '\x0a'));
  s.set_span_id(Bytes(8, '\x0b'));
  s.set_name("kv_transfer");
  s.set_kind(otlp_trace::Span::SPAN_KIND_CLIENT);
  s.set_start_time_unix_nano(kNow - 2000);
  s.set_end_time_unix_nano(kNow - 1000);
  return s;
}

void AddAttr(google::protobuf::RepeatedPtrField<otlp_common::KeyValue>* attrs, const char* key,
             const char* value) {
  auto* kv = attrs->Add();
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

TEST_F(SpanConvertTest, OtlpSpanWithResource) {
  otlp_resource::Resource resource;
  AddAttr(resource.mutable_attributes(), "service.name", "vllm");
  AddAttr(resource.mutable_attributes(), "host.name", "gpu-node-7");
  AddAttr(resource.mutable_attributes(), "process.pid", "1234");
  AddAttr(resource.mutable_attributes(), "process.runtime.name", "CPython");  // not kept
  OtlpResourceInfo info = ConvertOtlpResource(resource, limits_);
  EXPECT_FALSE(info.too_large);
  ASSERT_EQ(info.kept.size(), 3u);

  otlp_trace::Span in = OtlpSpan();
  in.set_parent_span_id(Bytes(8, '\x0c'));
  AddAttr(in.mutable_attributes(), "rdma.device", "mlx5_0");
  auto* port = in.mutable_attributes()->Add();
  port->set_key("rdma.port");
  port->mutable_value()->set_int_value(1);
  auto* stall = in.mutable_attributes()->Add();
  stall->set_key("fabricscope.stall");
  stall->mutable_value()->set_bool_value(true);
  auto* tokens = in.mutable_attributes()->Add();
  tokens->set_key("gen_ai.usage.output_tokens");
  tokens->mutable_value()->set_int_value(17);
  in.add_events()->set_name("ignored");
  in.mutable_status()->set_code(otlp_trace::Status::STATUS_CODE_ERROR);

  Span out;
  std::string detail;
  ASSERT_EQ(ConvertOtlpSpan(in, info, ctx_, &out, &detail), RejectReason::kNone) << detail;
  EXPECT_EQ(out.trace_id[0], 0x0a);
  EXPECT_EQ(out.trace_id[15], 0x0a);
  EXPECT_EQ(out.span_id[7], 0x0b);
  EXPECT_EQ(out.parent_span_id[0], 0x0c);
  EXPECT_EQ(out.kind, SpanKind::kKvTransfer);
  EXPECT_EQ(out.start_unix_nano, kNow - 2000);
  EXPECT_EQ(out.end_unix_nano, kNow - 1000);
  EXPECT_EQ(out.rdma_device, "mlx5_0");
  EXPECT_EQ(out.rdma_port, 1u);
  EXPECT_TRUE(out.stall_flag);
  EXPECT_EQ(out.protocol, "otlp");
  EXPECT_EQ(Attr(out, "gen_ai.usage.output_tokens"), "17");
  EXPECT_EQ(Attr(out, "service.name"), "vllm");
  EXPECT_EQ(Attr(out, "host.name"), "gpu-node-7");
  EXPECT_EQ(Attr(out, "process.pid"), "1234");
  EXPECT_EQ(Attr(out, "process.runtime.name"), "<absent>");
  EXPECT_EQ(out.pid, 1234u);
  EXPECT_EQ(out.attributes.size(), 7u);
}

// process.pid (OpenTelemetry's resource attribute; an int in every SDK, a
// string from some exporters) becomes Span::pid over both protocols.
TEST_F(SpanConvertTest, OtlpResourceRepeatingAKeyKeepsItsLastValueOnce) {
  otlp_resource::Resource resource;
  for (int i = 0; i < 50; ++i) AddAttr(resource.mutable_attributes(), "host.name", "node-a");
  AddAttr(resource.mutable_attributes(), "process.pid", "1");
  AddAttr(resource.mutable_attributes(), "host.name", "node-b");
  AddAttr(resource.mutable_attributes(), "process.pid", "77");
  OtlpResourceInfo info = ConvertOtlpResource(resource, limits_);
  EXPECT_FALSE(info.too_large);
  ASSERT_EQ(info.kept.size(), 2u);
  EXPECT_EQ(info.kept[0], (std::pair<std::string, std::string>("host.name", "node-b")));
  EXPECT_EQ(info.kept[1], (std::pair<std::string, std::string>("process.pid", "77")));
}

TEST_F(SpanConvertTest, ProcessPidFromTheResourceOrTheSpanOverBothProtocols) {
  auto resource_with = [&](auto set) {
    otlp_resource::Resource resource;
    auto* kv = resource.mutable_attributes()->Add();
    kv->set_key("process.pid");
    set(kv->mutable_value());
    return ConvertOtlpResource(resource, limits_);
  };
  Span out;
  out.pid = 99;  // a reused Span does not keep an old pid
  ASSERT_EQ(ConvertOtlpSpan(OtlpSpan(),
                            resource_with([](otlp_common::AnyValue* v) { v->set_int_value(4242); }),
                            ctx_, &out, nullptr),
            RejectReason::kNone);
  EXPECT_EQ(out.pid, 4242u);
  EXPECT_EQ(Attr(out, "process.pid"), "4242");
  ASSERT_EQ(ConvertOtlpSpan(OtlpSpan(), resource_with([](otlp_common::AnyValue* v) {
                              v->set_string_value(" 77 ");
                            }),
                            ctx_, &out, nullptr),
            RejectReason::kNone);
  EXPECT_EQ(out.pid, 77u);
  for (auto bad : {+[](otlp_common::AnyValue* v) { v->set_int_value(-5); },
                   +[](otlp_common::AnyValue* v) { v->set_int_value(int64_t{1} << 40); },
                   +[](otlp_common::AnyValue* v) { v->set_string_value("worker-3"); },
                   +[](otlp_common::AnyValue* v) { v->set_int_value(0); }}) {
    ASSERT_EQ(ConvertOtlpSpan(OtlpSpan(), resource_with(bad), ctx_, &out, nullptr),
              RejectReason::kNone);
    EXPECT_EQ(out.pid, 0u) << Attr(out, "process.pid");
  }
  ASSERT_EQ(ConvertOtlpSpan(OtlpSpan(), OtlpResourceInfo{}, ctx_, &out, nullptr),
            RejectReason::kNone);
  EXPECT_EQ(out.pid, 0u);
  // A span attribute wins over the resource's.
  otlp_trace::Span in = OtlpSpan();
  AddAttr(in.mutable_attributes(), "process.pid", "31");
  ASSERT_EQ(
      ConvertOtlpSpan(in, resource_with([](otlp_common::AnyValue* v) { v->set_int_value(4242); }),
                      ctx_, &out, nullptr),
      RejectReason::kNone);
  EXPECT_EQ(out.pid, 31u);

  // Native spans: the attribute.
  v1::Span native = NativeSpan();
  auto* a = native.add_attributes();
  a->set_key("process.pid");
  a->set_value("4242");
  ASSERT_EQ(ConvertNativeSpan(native, ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.pid, 4242u);
  ASSERT_EQ(ConvertNativeSpan(NativeSpan(), ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.pid, 0u);
}

TEST_F(SpanConvertTest, GpuHintFromTheAttributeOverBothProtocols) {
  v1::Span native = NativeSpan();
  auto* a = native.add_attributes();
  a->set_key("fabricscope.gpu");
  a->set_value(" 00000000:1B:00.0 ");
  Span out;
  out.gpu = "stale";  // a reused Span does not keep an old hint
  ASSERT_EQ(ConvertNativeSpan(native, ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.gpu, "00000000:1B:00.0");  // verbatim, trimmed; resolved by the correlator
  EXPECT_EQ(Attr(out, "fabricscope.gpu"), " 00000000:1B:00.0 ");
  ASSERT_EQ(ConvertNativeSpan(NativeSpan(), ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.gpu, "");

  otlp_trace::Span otlp = OtlpSpan();
  auto* index = otlp.mutable_attributes()->Add();
  index->set_key("fabricscope.gpu");
  index->mutable_value()->set_int_value(3);  // an index as an OTLP int
  ASSERT_EQ(ConvertOtlpSpan(otlp, OtlpResourceInfo{}, ctx_, &out, nullptr), RejectReason::kNone);
  EXPECT_EQ(out.gpu, "3");
  ASSERT_EQ(ConvertOtlpSpan(OtlpSpan(), OtlpResourceInfo{}, ctx_, &out, nullptr),
            RejectReason::kNone);
  EXPECT_EQ(out.gpu, "");
}

TEST_F(SpanConvertTest, OtlpRejections) {
  OtlpResourceInfo info;
  Span out;
  otlp_trace::Span in = OtlpSpan();
  in.set_trace_id("");  // OTLP/JSON empty id
  EXPECT_EQ(ConvertOtlpSpan(in, info, ctx_, &out, nullptr), RejectReason::kInvalidIds);

  limits_.max_attributes_per_span = 1;
  in = OtlpSpan();
  AddAttr(in.mutable_attributes(), "a", "1");
  AddAttr(in.mutable_attributes(), "b", "2");
  EXPECT_EQ(ConvertOtlpSpan(in, info, ctx_, &out, nullptr), RejectReason::kTooManyAttributes);

  limits_.max_attributes_per_span = 64;
  limits_.max_attribute_bytes = 32;
  in = OtlpSpan();
  auto* big = in.mutable_attributes()->Add();
  big->set_key("prompt");
  big->mutable_value()->set_string_value(Bytes(40, 'p'));
  EXPECT_EQ(ConvertOtlpSpan(in, info, ctx_, &out, nullptr), RejectReason::kAttributeTooLarge);

  // A too-large kept resource attribute rejects the resource's spans.
  otlp_resource::Resource resource;
  AddAttr(resource.mutable_attributes(), "service.name", Bytes(40, 's').c_str());
  OtlpResourceInfo big_resource = ConvertOtlpResource(resource, limits_);
  EXPECT_TRUE(big_resource.too_large);
  EXPECT_EQ(ConvertOtlpSpan(OtlpSpan(), big_resource, ctx_, &out, nullptr),
            RejectReason::kAttributeTooLarge);
}

}  // namespace
}  // namespace span_convert_test
}  // namespace fabricscope
