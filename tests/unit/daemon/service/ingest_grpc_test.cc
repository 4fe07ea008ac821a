// In-process gRPC test: the real GrpcServer on 127.0.0.1:0 with the Ingest and
// OTLP TraceService adapters, called through generated stubs.
#include "daemon/service/grpc_server.h"

#include <future>
#include <limits>

#include "daemon/service/ingest_service.h"
#include "daemon/service/otlp_trace_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace ingest_grpc_test {
namespace {

namespace otlp_collector = opentelemetry::proto::collector::trace::v1;

v1::Span Native(int id, int64_t now, const char* name = "decode") {
  v1::Span s;
  s.set_trace_id(std::string(16, '\x01'));
  std::string sid(8, '\0');
  sid[6] = static_cast<char>(id >> 8);
  sid[7] = static_cast<char>(id & 0xff);
  s.set_span_id(sid);
  s.set_name(name);
  s.set_start_unix_nano(now - 2'000'000);
  s.set_end_unix_nano(now - 1'000'000);
  return s;
}

class IngestGrpcTest : public ::testing::Test {
 protected:
  void Start(IngestLimits limits) {
    store_ = std::make_unique<SpanStore>(SpanStoreOptions{}, RealClock::Get(), &metrics_);
    auto c = SpanKindClassifier::Create({});
    ASSERT_TRUE(c.ok());
    ingester_ = std::make_unique<SpanIngester>(limits, *std::move(c), store_.get(),
                                               RealClock::Get(), &metrics_);
    ingest_ = std::make_unique<IngestService>(ingester_.get());
    otlp_ = std::make_unique<OtlpTraceService>(ingester_.get());
    server_ = std::make_unique<GrpcServer>("127.0.0.1:0");
    server_->AddService(ingest_.get());
    server_->AddService(otlp_.get());
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
    EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
    auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    ingest_stub_ = v1::Ingest::NewStub(channel);
    otlp_stub_ = otlp_collector::TraceService::NewStub(channel);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
  }
  std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ctx;
  }
  int64_t Now() { return RealClock::Get()->RealtimeNs(); }

  MetricsRegistry metrics_;
  std::unique_ptr<SpanStore> store_;
  std::unique_ptr<SpanIngester> ingester_;
  std::unique_ptr<IngestService> ingest_;
  std::unique_ptr<OtlpTraceService> otlp_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::Ingest::Stub> ingest_stub_;
  std::unique_ptr<otlp_collector::TraceService::Stub> otlp_stub_;
};

TEST_F(IngestGrpcTest, PushReturnsPerSpanRejections) {
  Start({});
  v1::PushRequest req;
  *req.add_spans() = Native(1, Now());
  *req.add_spans() = Native(2, Now(), "");
  v1::Span bad = Native(3, Now());
  bad.set_span_id("short");
  *req.add_spans() = bad;
  v1::PushResponse resp;
  grpc::Status s = ingest_stub_->Push(Ctx().get(), req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.accepted_spans(), 1u);
  EXPECT_EQ(resp.rejected_spans(), 2u);
  ASSERT_EQ(resp.rejections_size(), 2);
  EXPECT_EQ(resp.rejections(0).index(), 1u);
  EXPECT_EQ(resp.rejections(0).reason(), v1::REJECTION_REASON_MISSING_NAME);
  EXPECT_EQ(resp.rejections(1).index(), 2u);
  EXPECT_EQ(resp.rejections(1).reason(), v1::REJECTION_REASON_INVALID_IDS);
  EXPECT_EQ(resp.rejections(1).message(), "span_id must be 8 bytes, got 5");
  EXPECT_EQ(store_->Stats().spans, 1u);
}

TEST_F(IngestGrpcTest, PushStreamIndexesAcrossMessages) {
  Start({});
  v1::PushResponse resp;
  auto ctx = Ctx();
  auto writer = ingest_stub_->PushStream(ctx.get(), &resp);
  int id = 0;
  for (int m = 0; m < 5; ++m) {
    v1::PushRequest req;
    for (int i = 0; i < 100; ++i) *req.add_spans() = Native(++id, Now());
    if (m == 3) req.mutable_spans(7)->set_name("");  // index 307 over the stream
    ASSERT_TRUE(writer->Write(req));
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.accepted_spans(), 499u);
  EXPECT_EQ(resp.rejected_spans(), 1u);
  ASSERT_EQ(resp.rejections_size(), 1);
  EXPECT_EQ(resp.rejections(0).index(), 307u);
  EXPECT_EQ(store_->Stats().spans, 499u);
}

TEST_F(IngestGrpcTest, TooManySpansIsInvalidArgument) {
  IngestLimits limits;
  limits.max_spans_per_request = 10;
  Start(limits);
  v1::PushRequest req;
  for (int i = 1; i <= 11; ++i) *req.add_spans() = Native(i, Now());
  v1::PushResponse resp;
  grpc::Status s = ingest_stub_->Push(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(store_->Stats().spans, 0u);

  // In a stream: the earlier message stays stored and the status says so.
  auto ctx = Ctx();
  auto writer = ingest_stub_->PushStream(ctx.get(), &resp);
  v1::PushRequest small;
  for (int i = 1; i <= 5; ++i) *small.add_spans() = Native(i, Now());
  ASSERT_TRUE(writer->Write(small));
  writer->Write(req);  // may fail once the server has answered
  writer->WritesDone();
  s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("5 spans of earlier messages were accepted"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(store_->Stats().spans, 5u);
}

TEST_F(IngestGrpcTest, OverloadIsResourceExhausted) {
  IngestLimits limits;
  limits.max_concurrent_requests = 1;
  Start(limits);
  // An open stream holds the only admission slot.
  v1::PushResponse stream_resp;
  auto stream_ctx = Ctx();
  auto writer = ingest_stub_->PushStream(stream_ctx.get(), &stream_resp);
  v1::PushRequest first;
  *first.add_spans() = Native(1, Now());
  ASSERT_TRUE(writer->Write(first));
  // Wait (bounded) until the server has admitted the stream.
  for (int i = 0; i < 500 && ingester_->in_flight() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(ingester_->in_flight(), 1);

  v1::PushRequest req;
  *req.add_spans() = Native(2, Now());
  v1::PushResponse resp;
  grpc::Status s = ingest_stub_->Push(Ctx().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  otlp_collector::ExportTraceServiceRequest export_req;
  auto* span = export_req.add_resource_spans()->add_scope_spans()->add_spans();
  span->set_trace_id(std::string(16, '\x02'));
  span->set_span_id(std::string(8, '\x02'));
  span->set_name("decode");
  span->set_start_time_unix_nano(Now() - 2'000'000);
  span->set_end_time_unix_nano(Now() - 1'000'000);
  otlp_collector::ExportTraceServiceResponse export_resp;
  s = otlp_stub_->Export(Ctx().get(), export_req, &export_resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(stream_resp.accepted_spans(), 1u);
  // The slot is free again.
  s = ingest_stub_->Push(Ctx().get(), req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(store_->Stats().spans, 2u);
}

TEST_F(IngestGrpcTest, OtlpExportReportsPartialSuccess) {
  Start({});
  otlp_collector::ExportTraceServiceRequest req;
  auto* rs = req.add_resource_spans();
  auto* host = rs->mutable_resource()->add_attributes();
  host->set_key("host.name");
  host->mutable_value()->set_string_value("node-1");
  auto* ss = rs->add_scope_spans();
  ss->mutable_scope()->set_name("vllm");
  for (int i = 1; i <= 4; ++i) {
    auto* s = ss->add_spans();
    s->set_trace_id(std::string(16, '\x03'));
    s->set_span_id(std::string(7, '\0') + static_cast<char>(i));
    s->set_name(i == 4 ? "decode" : "kv_transfer");
    s->set_start_time_unix_nano(Now() - 2'000'000);
    s->set_end_time_unix_nano(i == 3 ? Now() - 3'000'000 : Now() - 1'000'000);
  }
  otlp_collector::ExportTraceServiceResponse resp;
  grpc::Status s = otlp_stub_->Export(Ctx().get(), req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(resp.has_partial_success());
  EXPECT_EQ(resp.partial_success().rejected_spans(), 1);
  EXPECT_NE(resp.partial_success().error_message().find("end_before_start"), std::string::npos);
  EXPECT_EQ(store_->Stats().spans, 3u);

  // A fully accepted export leaves partial_success unset.
  req.mutable_resource_spans(0)->mutable_scope_spans(0)->mutable_spans()->RemoveLast();
  req.mutable_resource_spans(0)->mutable_scope_spans(0)->mutable_spans()->RemoveLast();
  otlp_collector::ExportTraceServiceResponse ok_resp;
  s = otlp_stub_->Export(Ctx().get(), req, &ok_resp);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(ok_resp.has_partial_success());
}

// The value of one self-metric counter, 0 when absent.
double CounterValue(MetricsRegistry& m, const std::string& family, const std::string& protocol,
                    const std::string& label, const std::string& value) {
  for (const prometheus::MetricFamily& f : m.registry()->Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& cm : f.metric) {
      bool p = false, l = false;
      for (const auto& pair : cm.label) {
        p |= pair.name == "protocol" && pair.value == protocol;
        l |= pair.name == label && pair.value == value;
      }
      if (p && l) return cm.counter.value;
    }
  }
  return 0;
}

// Calls `method` with raw request bytes, as a client with its own encoder
// (or no protobuf at all) would.
grpc::Status RawCall(const std::string& address, const std::string& method,
                     const std::string& bytes, std::string* answer) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  answer->clear();
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const auto& s : slices) answer->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

// One span name that is not UTF-8 no longer sinks the request: it is
// repaired (U+FFFD), counted, and every span of the request is stored.
TEST_F(IngestGrpcTest, InvalidUtf8IsRepairedAndTheRequestKept) {
  Start({});
  v1::PushRequest req;
  *req.add_spans() = Native(1, Now());
  *req.add_spans() = Native(2, Now(), "dec\xffode");
  auto* attr = req.mutable_spans(2 - 1)->add_attributes();
  attr->set_key("model");
  attr->set_value("caf\xe9");  // Latin-1
  *req.add_spans() = Native(3, Now());
  std::string answer;
  grpc::Status s = RawCall(server_->address(), "/fabricscope.v1.Ingest/Push",
                           req.SerializePartialAsString(), &answer);
  ASSERT_TRUE(s.ok()) << s.error_message();
  v1::PushResponse resp;
  ASSERT_TRUE(resp.ParseFromString(answer));
  EXPECT_EQ(resp.accepted_spans(), 3u);
  EXPECT_EQ(store_->Stats().spans, 3u);
  SpanId id{};
  id[7] = 2;
  auto found = store_->FindBySpanId(id);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->name, "dec\xEF\xBF\xBDode");
  EXPECT_EQ(CounterValue(metrics_, "fabricscope_ingest_strings_repaired_total", "native", "reason",
                         "invalid_utf8"),
            2);
  EXPECT_EQ(
      CounterValue(metrics_, "fabricscope_ingest_spans_total", "native", "result", "accepted"), 3);

  // OTLP: a resource attribute and a nested kvlist value, repaired too.
  otlp_collector::ExportTraceServiceRequest otlp;
  auto* rs = otlp.add_resource_spans();
  auto* svc = rs->mutable_resource()->add_attributes();
  svc->set_key("service.name");
  svc->mutable_value()->set_string_value("vllm\xc0");  // an overlong lead byte
  auto* span = rs->add_scope_spans()->add_spans();
  span->set_trace_id(std::string(16, '\x05'));
  span->set_span_id(std::string(7, '\0') + '\x01');
  span->set_name("llm_request");
  span->set_start_time_unix_nano(Now() - 2'000'000);
  span->set_end_time_unix_nano(Now() - 1'000'000);
  auto* kv = span->add_attributes();
  kv->set_key("nested");
  auto* inner = kv->mutable_value()->mutable_kvlist_value()->add_values();
  inner->set_key("k");
  inner->mutable_value()->set_string_value("\xed\xa0\x80");  // a surrogate
  s = RawCall(server_->address(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
              otlp.SerializePartialAsString(), &answer);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(store_->Stats().spans, 4u);
  EXPECT_EQ(CounterValue(metrics_, "fabricscope_ingest_strings_repaired_total", "otlp", "reason",
                         "invalid_utf8"),
            2);
}

// Bytes that are no protobuf message at all: INVALID_ARGUMENT (not gRPC's
// INTERNAL), counted with the reason.
TEST_F(IngestGrpcTest, MalformedRequestsAreCountedWithAReason) {
  Start({});
  std::string answer;
  const std::string junk = "this is not protobuf \xff\xff\xff\xff";
  grpc::Status s = RawCall(server_->address(), "/fabricscope.v1.Ingest/Push", junk, &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("fabricscope.v1.PushRequest"), std::string::npos);
  s = RawCall(server_->address(), "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
              junk, &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  // A truncated message: the length of its last field runs past the end.
  v1::PushRequest req;
  *req.add_spans() = Native(1, Now());
  std::string cut = req.SerializeAsString();
  cut.resize(cut.size() - 3);
  s = RawCall(server_->address(), "/fabricscope.v1.Ingest/Push", cut, &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(CounterValue(metrics_, "fabricscope_ingest_requests_failed_total", "native", "reason",
                         "malformed"),
            2);
  EXPECT_EQ(CounterValue(metrics_, "fabricscope_ingest_requests_failed_total", "otlp", "reason",
                         "malformed"),
            1);
  EXPECT_EQ(store_->Stats().spans, 0u);
}

// A message far over the size limit is refused once the transport's memory
// quota is spent (gRPC would otherwise buffer all of it before comparing it
// with the limit); the server goes on serving.
TEST_F(IngestGrpcTest, AnOversizedMessageIsRefusedAndTheServerGoesOn) {
  Start({});
  v1::PushRequest req;
  *req.add_spans() = Native(1, Now());
  auto* blob = req.mutable_spans(0)->add_attributes();
  blob->set_key("blob");
  blob->set_value(std::string(96 << 20, 'x'));
  std::string answer;
  grpc::Status s =
      RawCall(server_->address(), "/fabricscope.v1.Ingest/Push", req.SerializeAsString(), &answer);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_EQ(store_->Stats().spans, 0u);
  v1::PushRequest small;
  *small.add_spans() = Native(2, Now());
  v1::PushResponse resp;
  s = ingest_stub_->Push(Ctx().get(), small, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.accepted_spans(), 1u);
}

// A time past INT64_MAX ns is in the future, not (wrapped to negative) too old.
TEST_F(IngestGrpcTest, FarFutureTimestampIsInFuture) {
  Start({});
  v1::PushRequest req;
  *req.add_spans() = Native(1, Now());
  req.mutable_spans(0)->set_end_unix_nano(std::numeric_limits<uint64_t>::max() - 5);
  *req.add_spans() = Native(2, Now());
  req.mutable_spans(1)->set_start_unix_nano(uint64_t{1} << 63);
  req.mutable_spans(1)->set_end_unix_nano(uint64_t{1} << 63);
  v1::PushResponse resp;
  grpc::Status s = ingest_stub_->Push(Ctx().get(), req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.rejections_size(), 2);
  for (const auto& r : resp.rejections()) {
    EXPECT_EQ(r.reason(), v1::REJECTION_REASON_IN_FUTURE) << r.message();
  }
}

TEST(GrpcServerTest, BindFailureIsAnError) {
  IngestService service(nullptr);  // never called
  GrpcServer first("127.0.0.1:0");
  first.AddService(&service);
  ASSERT_TRUE(first.Start().ok());
  GrpcServer second(first.address());
  second.AddService(&service);
  absl::Status s = second.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("grpc-listen"), absl::string_view::npos);
}

}  // namespace
}  // namespace ingest_grpc_test
}  // namespace fabricscope
