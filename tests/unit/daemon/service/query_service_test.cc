#include "daemon/service/query_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/detect/detectors.h"
#include "daemon/service/grpc_server.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT = 1'700'000'000 * kSec;

// Ports mlx5_0/1 on eth0 (paused on priority 3 during [10 s, 10.2 s]) and
// mlx5_1/1 on eth1 (quiet); spans over the burst and after it.
class QueryServiceTest : public ::testing::Test {
 protected:
  QueryServiceTest()
      : clock_(kT + 60 * kSec),
        events_(100, nullptr),
        detectors_({}, &ports_, &events_, nullptr),
        spans_({}, &clock_, nullptr),
        correlator_(&store_, &ports_, {}, StallPolicy({{"decode_step", absl::Milliseconds(100)}})),
        engine_(&spans_, &correlator_, &store_, &ports_, &events_, &clock_),
        service_(&engine_) {
    store_.SetObserver(&detectors_);
    ports_.Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "100 Gb/sec", true});
    ports_.Upsert({"mlx5_1", 1, "eth1", "Ethernet", "ACTIVE", "100 Gb/sec", true});
    for (const char* netdev : {"eth0", "eth1"}) {
      SeriesKey k{"ethtool", "rx_prio3_pause_duration", "", 0, netdev};
      SeriesId id = store_.Register(k, *MapCounter(k));
      const bool burst = std::string(netdev) == "eth0";
      for (int64_t ts = kT; ts <= kT + 30 * kSec; ts += 100 * kMs) {
        const int64_t from = kT + 10 * kSec, to = from + 200 * kMs;
        store_.Append(id, ts,
                      burst ? static_cast<uint64_t>((std::clamp(ts, from, to) - from) / 1000) : 0);
      }
    }
    spans_.Add(MakeSpan(1, 1, "decode_step", kT + 10 * kSec, kT + 10200 * kMs));
    spans_.Add(MakeSpan(1, 2, "decode_step", kT + 20 * kSec, kT + 20050 * kMs));
    spans_.Add(MakeSpan(2, 3, "kv_transfer", kT + 10 * kSec, kT + 10300 * kMs));
  }

  static Span MakeSpan(uint8_t trace, uint8_t id, const std::string& name, int64_t t0, int64_t t1) {
    Span s;
    s.trace_id[15] = trace;
    s.span_id[7] = id;
    s.name = name;
    s.start_unix_nano = t0;
    s.end_unix_nano = t1;
    return s;
  }

  FakeClock clock_;
  Store store_;
  PortInventory ports_;
  EventLog events_;
  DetectorEngine detectors_;
  SpanStore spans_;
  Correlator correlator_;
  QueryEngine engine_;
  QueryService service_;
};

std::string Bytes(size_t n, uint8_t last) {
  std::string s(n, '\0');
  s.back() = static_cast<char>(last);
  return s;
}

TEST_F(QueryServiceTest, CorrelateByTraceIdSpanIdAndTimeRange) {
  v1::CorrelateRequest req;
  v1::CorrelateResponse resp;
  req.set_trace_id(Bytes(16, 1));
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  ASSERT_EQ(resp.spans_size(), 2);
  const v1::SpanVerdict& hit = resp.spans(0);
  EXPECT_EQ(hit.verdict(), v1::VERDICT_FABRIC) << hit.reason();
  EXPECT_TRUE(hit.stall());  // 200 ms >= 100 ms decode_step threshold
  ASSERT_EQ(hit.signals_size(), 1);
  EXPECT_EQ(hit.signals(0).signal(), "pfc_pause_seconds");
  EXPECT_EQ(hit.signals(0).netdev(), "eth0");
  EXPECT_EQ(hit.signals(0).priority(), "3");
  EXPECT_NEAR(hit.signals(0).pause_fraction(), 1.0, 0.01);
  EXPECT_EQ(resp.spans(1).verdict(), v1::VERDICT_CLEAN) << resp.spans(1).reason();
  EXPECT_FALSE(resp.spans(1).stall());
  EXPECT_EQ(resp.spans(1).signals_size(), 0);

  // include_all_series lists both ports' series.
  req.set_include_all_series(true);
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.spans(1).signals_size(), 2);

  v1::CorrelateRequest by_span;
  by_span.set_span_id(Bytes(8, 3));
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &by_span, &resp).ok());
  ASSERT_EQ(resp.spans_size(), 1);
  EXPECT_EQ(resp.spans(0).name(), "kv_transfer");
  EXPECT_EQ(resp.spans(0).verdict(), v1::VERDICT_FABRIC);

  v1::CorrelateRequest by_range;
  by_range.mutable_time_range()->set_from_unix_nano(kT);
  by_range.mutable_time_range()->set_to_unix_nano(kT + 60 * kSec);
  by_range.set_name("decode_step");
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &by_range, &resp).ok());
  EXPECT_EQ(resp.spans_size(), 2);
  for (const auto& s : resp.spans()) EXPECT_EQ(s.name(), "decode_step");
}

TEST_F(QueryServiceTest, CorrelateRejectsBadSelectors) {
  v1::CorrelateResponse resp;
  v1::CorrelateRequest none;
  EXPECT_EQ(service_.Correlate(nullptr, &none, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::CorrelateRequest bad_id;
  bad_id.set_trace_id("short");
  EXPECT_EQ(service_.Correlate(nullptr, &bad_id, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::CorrelateRequest backwards;
  backwards.mutable_time_range()->set_from_unix_nano(10);
  backwards.mutable_time_range()->set_to_unix_nano(5);
  EXPECT_EQ(service_.Correlate(nullptr, &backwards, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(QueryServiceTest, SeriesMatchesSignalAndLabels) {
  v1::SeriesRequest req;
  req.set_signal("pfc_pause_seconds");
  auto* m = req.add_matchers();
  m->set_label("netdev");
  m->set_value("eth0");
  req.mutable_time_range()->set_from_unix_nano(kT + 10 * kSec);
  req.mutable_time_range()->set_to_unix_nano(kT + 11 * kSec);
  v1::SeriesResponse resp;
  ASSERT_TRUE(service_.Series(nullptr, &req, &resp).ok());
  ASSERT_EQ(resp.series_size(), 1);
  const v1::SeriesData& d = resp.series(0);
  EXPECT_EQ(d.netdev(), "eth0");
  EXPECT_EQ(d.raw_name(), "rx_prio3_pause_duration");
  EXPECT_EQ(d.labels().at("priority"), "3");
  EXPECT_DOUBLE_EQ(d.scale(), 1e-6);
  ASSERT_EQ(d.samples_size(), 11);  // every 100 ms poll, inclusive
  EXPECT_EQ(d.samples(2).raw(), 200'000u);

  req.set_max_samples_per_series(3);
  resp.Clear();
  ASSERT_TRUE(service_.Series(nullptr, &req, &resp).ok());
  EXPECT_TRUE(resp.series(0).truncated());
  EXPECT_EQ(resp.series(0).samples_size(), 3);

  req.clear_matchers();
  req.set_max_samples_per_series(0);
  resp.Clear();
  ASSERT_TRUE(service_.Series(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.series_size(), 2);
  req.set_signal("no_such_signal");
  resp.Clear();
  ASSERT_TRUE(service_.Series(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.series_size(), 0);
}

TEST_F(QueryServiceTest, OverGrpcOnAnEphemeralPort) {
  GrpcServer server("127.0.0.1:0");
  server.AddService(&service_);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::Query::NewStub(channel);

  {
    grpc::ClientContext ctx;
    v1::CorrelateRequest req;
    req.mutable_time_range()->set_from_unix_nano(kT);
    req.mutable_time_range()->set_to_unix_nano(kT + 60 * kSec);
    v1::CorrelateResponse resp;
    grpc::Status s = stub->Correlate(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.spans_size(), 3);
    int fabric = 0, clean = 0;
    for (const auto& v : resp.spans()) {
      fabric += v.verdict() == v1::VERDICT_FABRIC;
      clean += v.verdict() == v1::VERDICT_CLEAN;
    }
    EXPECT_EQ(fabric, 2);
    EXPECT_EQ(clean, 1);
  }
  {
    grpc::ClientContext ctx;
    v1::PortsResponse resp;
    ASSERT_TRUE(stub->Ports(&ctx, v1::PortsRequest(), &resp).ok());
    ASSERT_EQ(resp.ports_size(), 2);
    EXPECT_EQ(resp.ports(0).device(), "mlx5_0");
    EXPECT_EQ(resp.ports(0).netdev(), "eth0");
  }
  {
    grpc::ClientContext ctx;
    v1::EventsResponse resp;
    v1::EventsRequest req;
    req.mutable_time_range()->set_from_unix_nano(kT);
    req.mutable_time_range()->set_to_unix_nano(kT + 60 * kSec);
    ASSERT_TRUE(stub->Events(&ctx, req, &resp).ok());
    // The 200 ms pause on eth0 priority 3 (rx) is one PFC storm; eth1 is quiet.
    ASSERT_EQ(resp.events_size(), 1);
    const v1::Event& e = resp.events(0);
    EXPECT_EQ(e.detector(), "pfc_storm");
    EXPECT_EQ(e.kind(), "storm");
    EXPECT_EQ(e.netdev(), "eth0");
    EXPECT_EQ(e.device(), "mlx5_0");
    EXPECT_EQ(e.priority(), "3");
    EXPECT_EQ(e.direction(), "rx");
    EXPECT_EQ(e.start_unix_nano(), static_cast<uint64_t>(kT + 10 * kSec));
    EXPECT_EQ(e.end_unix_nano(), static_cast<uint64_t>(kT + 10200 * kMs));
    EXPECT_FALSE(e.active());
    EXPECT_DOUBLE_EQ(e.peak(), 1.0);
  }
  {
    grpc::ClientContext ctx;
    v1::CorrelateResponse resp;
    EXPECT_EQ(stub->Correlate(&ctx, v1::CorrelateRequest(), &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  server.Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace fabricscope
