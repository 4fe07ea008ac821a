#include "daemon/ingest/span_ingester.h"

#include "gtest/gtest.h"

namespace fabricscope {
namespace span_ingester_test {
namespace {

namespace otlp_collector = opentelemetry::proto::collector::trace::v1;

constexpr int64_t kNow = 1'700'000'000'000'000'000;
constexpr int64_t kSec = 1'000'000'000;

double IngestCount(MetricsRegistry& metrics, absl::string_view protocol, absl::string_view result) {
  for (const auto& family : metrics.registry()->Collect()) {
    if (family.name != "fabricscope_ingest_spans_total") continue;
    for (const auto& m : family.metric) {
      std::string p, r;
      for (const auto& l : m.label) {
        if (l.name == "protocol") p = l.value;
        if (l.name == "result") r = l.value;
      }
      if (p == protocol && r == result) return m.counter.value;
    }
  }
  return -1;  // not exported at all
}

v1::Span Native(uint8_t id, const char* name = "decode") {
  v1::Span s;
  s.set_trace_id(std::string(16, '\x01'));
  s.set_span_id(std::string(7, '\0') + static_cast<char>(id));
  s.set_name(name);
  s.set_start_unix_nano(kNow - 2 * kSec);
  s.set_end_unix_nano(kNow - 1 * kSec);
  return s;
}

class SpanIngesterTest : public ::testing::Test {
 protected:
  void Make(IngestLimits limits) {
    store_ = std::make_unique<SpanStore>(SpanStoreOptions{}, &clock_, &metrics_);
    auto c = SpanKindClassifier::Create({});
    ASSERT_TRUE(c.ok());
    ingester_ =
        std::make_unique<SpanIngester>(limits, *std::move(c), store_.get(), &clock_, &metrics_);
  }
  void SetUp() override { Make(IngestLimits{}); }

  FakeClock clock_{kNow};
  MetricsRegistry metrics_;
  std::unique_ptr<SpanStore> store_;
  std::unique_ptr<SpanIngester> ingester_;
};

TEST_F(SpanIngesterTest, NativeBatchAcceptsGoodAndRejectsBadIndividually) {
  v1::PushRequest req;
  *req.add_spans() = Native(1);
  v1::Span bad_order = Native(2);
  bad_order.set_end_unix_nano(bad_order.start_unix_nano() - 1);
  *req.add_spans() = bad_order;
  *req.add_spans() = Native(3, "");
  v1::Span zero_ids = Native(4);
  zero_ids.set_trace_id(std::string(16, '\0'));
  *req.add_spans() = zero_ids;
  v1::Span old = Native(5);
  old.set_start_unix_nano(kNow - 7200 * kSec);
  old.set_end_unix_nano(kNow - 7100 * kSec);
  *req.add_spans() = old;
  v1::Span future = Native(6);
  future.set_end_unix_nano(kNow + 120 * kSec);
  *req.add_spans() = future;
  *req.add_spans() = Native(7, "kv_transfer");

  auto result = ingester_->PushNative(req);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->seen, 7u);
  EXPECT_EQ(result->accepted, 2u);
  EXPECT_EQ(result->rejected, 5u);
  ASSERT_EQ(result->rejections.size(), 5u);
  EXPECT_EQ(result->rejections[0].index, 1u);
  EXPECT_EQ(result->rejections[0].reason, RejectReason::kEndBeforeStart);
  EXPECT_EQ(result->rejections[1].reason, RejectReason::kMissingName);
  EXPECT_EQ(result->rejections[2].reason, RejectReason::kInvalidIds);
  EXPECT_EQ(result->rejections[3].reason, RejectReason::kTooOld);
  EXPECT_EQ(result->rejections[4].index, 5u);
  EXPECT_EQ(result->rejections[4].reason, RejectReason::kInFuture);
  EXPECT_NE(result->Summary().find("rejected 5 of 7 spans"), std::string::npos);
  EXPECT_NE(result->Summary().find("1 end_before_start (span 1: end is 1ns before start)"),
            std::string::npos)
      << result->Summary();

  // Accepted spans are in the store, with their kinds.
  EXPECT_EQ(store_->Stats().spans, 2u);
  SpanId id7{};
  id7[7] = 7;
  auto stored = store_->FindBySpanId(id7);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0]->kind, SpanKind::kKvTransfer);

  EXPECT_EQ(IngestCount(metrics_, "native", "accepted"), 2);
  EXPECT_EQ(IngestCount(metrics_, "native", "end_before_start"), 1);
  EXPECT_EQ(IngestCount(metrics_, "native", "missing_name"), 1);
  EXPECT_EQ(IngestCount(metrics_, "native", "invalid_ids"), 1);
  EXPECT_EQ(IngestCount(metrics_, "native", "too_old"), 1);
  EXPECT_EQ(IngestCount(metrics_, "native", "in_future"), 1);
  EXPECT_EQ(IngestCount(metrics_, "native", "too_many_attributes"), 0);  // exported at zero
  EXPECT_EQ(IngestCount(metrics_, "otlp", "accepted"), 0);
}

TEST_F(SpanIngesterTest, RequestOverTheSpanLimitIsRejectedWhole) {
  IngestLimits limits;
  limits.max_spans_per_request = 3;
  Make(limits);
  v1::PushRequest req;
  for (uint8_t i = 1; i <= 4; ++i) *req.add_spans() = Native(i);
  auto result = ingester_->PushNative(req);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("--max-spans-per-request"), absl::string_view::npos);
  EXPECT_EQ(store_->Stats().spans, 0u);
  EXPECT_EQ(IngestCount(metrics_, "native", "request_too_large"), 4);
  EXPECT_EQ(IngestCount(metrics_, "native", "accepted"), 0);
}

TEST_F(SpanIngesterTest, OverloadAnswersResourceExhaustedAndStoresNothing) {
  IngestLimits limits;
  limits.max_concurrent_requests = 1;
  Make(limits);
  v1::PushRequest req;
  *req.add_spans() = Native(1);
  *req.add_spans() = Native(2);
  {
    auto held = ingester_->Admit(IngestProtocol::kNative, 0);  // e.g. an open stream
    ASSERT_TRUE(held.ok());
    EXPECT_EQ(ingester_->in_flight(), 1);
    auto result = ingester_->PushNative(req);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(store_->Stats().spans, 0u);
    EXPECT_EQ(IngestCount(metrics_, "native", "overload"), 2);
  }
  EXPECT_EQ(ingester_->in_flight(), 0);
  auto result = ingester_->PushNative(req);  // the slot is free again
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->accepted, 2u);
}

TEST_F(SpanIngesterTest, OtlpExportCountsAndSummarises) {
  otlp_collector::ExportTraceServiceRequest req;
  auto* rs = req.add_resource_spans();
  auto* svc = rs->mutable_resource()->add_attributes();
  svc->set_key("service.name");
  svc->mutable_value()->set_string_value("vllm");
  auto* ss = rs->add_scope_spans();
  for (int i = 1; i <= 3; ++i) {
    auto* s = ss->add_spans();
    s->set_trace_id(std::string(16, '\x05'));
    s->set_span_id(std::string(7, '\0') + static_cast<char>(i));
    s->set_name("prefill");
    s->set_start_time_unix_nano(kNow - 2 * kSec);
    s->set_end_time_unix_nano(kNow - kSec);
  }
  ss->mutable_spans(2)->set_span_id(std::string(8, '\0'));
  // A second resource with its own scope.
  auto* rs2 = req.add_resource_spans();
  auto* s4 = rs2->add_scope_spans()->add_spans();
  *s4 = ss->spans(0);
  s4->set_span_id(std::string(7, '\0') + '\x09');

  auto result = ingester_->ExportOtlp(req);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->accepted, 3u);
  EXPECT_EQ(result->rejected, 1u);
  EXPECT_EQ(result->rejections[0].index, 2u);
  EXPECT_NE(result->Summary().find("1 invalid_ids"), std::string::npos);
  EXPECT_EQ(IngestCount(metrics_, "otlp", "accepted"), 3);
  EXPECT_EQ(IngestCount(metrics_, "otlp", "invalid_ids"), 1);
  SpanId id1{};
  id1[7] = 1;
  auto stored = store_->FindBySpanId(id1);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0]->kind, SpanKind::kPrefill);
  EXPECT_EQ(stored[0]->protocol, "otlp");
  ASSERT_EQ(stored[0]->attributes.size(), 1u);
  EXPECT_EQ(stored[0]->attributes[0].first, "service.name");
}

TEST_F(SpanIngesterTest, ReportedRejectionsAreBounded) {
  v1::PushRequest req;
  for (int i = 0; i < 1500; ++i) *req.add_spans() = Native(1, "");
  auto result = ingester_->PushNative(req);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->rejected, 1500u);
  EXPECT_EQ(result->rejections.size(), IngestResult::kMaxReportedRejections);
  EXPECT_EQ(IngestCount(metrics_, "native", "missing_name"), 1500);
}

}  // namespace
}  // namespace span_ingester_test
}  // namespace fabricscope
