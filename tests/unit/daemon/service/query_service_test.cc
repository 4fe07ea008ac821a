#include "daemon/service/query_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/service/grpc_server.h"
#include "gtest/gtest.h"
#include "tests/unit/daemon/query/query_test_world.h"

namespace fabricscope {
namespace query_service_test {
namespace {

using query_test::Bytes;
using query_test::kMs;
using query_test::kSec;
using query_test::kT;

// The query world (query_test_world.h) served over the QueryService adapter.
class QueryServiceTest : public query_test::QueryWorld {
 protected:
  QueryServiceTest() : service_(&engine_) {}

  QueryService service_;
};

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

// A saturated PMA port_xmit_wait on mlx5_1/1 is carried as blind (a caveat
// of the clean span, whatever the include_all_series choice) and in the
// series list with its why.
TEST_F(QueryServiceTest, CorrelateCarriesTheBlindSeries) {
  SeriesKey k{"counters", "port_xmit_wait", "mlx5_1", 1, ""};
  const SeriesId xmit = store_.Register(k, *MapCounter(k));
  for (int64_t ts = kT; ts <= kT + 30 * kSec; ts += 200 * kMs) store_.Append(xmit, ts, 4294967295u);
  v1::CorrelateRequest req;
  v1::CorrelateResponse resp;
  req.set_span_id(Bytes(8, 2));
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  ASSERT_EQ(resp.spans_size(), 1);
  const v1::SpanVerdict& v = resp.spans(0);
  EXPECT_EQ(v.verdict(), v1::VERDICT_CLEAN) << v.reason();
  EXPECT_EQ(v.signals_size(), 0);
  ASSERT_EQ(v.blind_size(), 1);
  EXPECT_EQ(v.blind(0).signal(), "ib_port_xmit_wait_ticks");
  EXPECT_EQ(v.blind(0).device(), "mlx5_1");
  EXPECT_EQ(v.blind(0).port(), 1u);
  EXPECT_EQ(v.blind(0).why(), "saturated");
  EXPECT_EQ(v.blind(0).source(), "counters");
  EXPECT_EQ(v.blind(0).raw_name(), "port_xmit_wait");

  req.set_include_all_series(true);
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  ASSERT_EQ(resp.spans(0).signals_size(), 3);
  int blind = 0;
  for (const v1::SignalCorrelation& s : resp.spans(0).signals()) {
    if (s.blind().empty()) continue;
    ++blind;
    EXPECT_EQ(s.raw_name(), "port_xmit_wait");
    EXPECT_EQ(s.blind(), "saturated");
    EXPECT_EQ(s.superseded_by(), "");
  }
  EXPECT_EQ(blind, 1);
}

TEST_F(QueryServiceTest, CorrelateSelectsAndSummarizes) {
  v1::CorrelateRequest req;
  req.mutable_time_range()->set_from_unix_nano(kT);
  req.mutable_time_range()->set_to_unix_nano(kT + 60 * kSec);
  v1::CorrelateResponse resp;
  // No selection: every span, with the summary of all three.
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.spans_size(), 3);
  const v1::CorrelateSummary& s = resp.summary();
  EXPECT_EQ(s.spans(), 3u);
  EXPECT_EQ(s.fabric(), 2u);
  EXPECT_EQ(s.clean(), 1u);
  EXPECT_EQ(s.unknown(), 0u);
  EXPECT_EQ(s.stalls(), 1u);  // the 200 ms decode step (threshold 100 ms)
  EXPECT_EQ(s.stalls_fabric(), 1u);
  ASSERT_EQ(s.blamed_size(), 1);
  EXPECT_EQ(s.blamed(0).signal(), "pfc_pause_seconds");
  EXPECT_EQ(s.blamed(0).direction(), "rx");
  EXPECT_EQ(s.blamed(0).priority(), "3");
  EXPECT_EQ(s.blamed(0).spans(), 1u);  // the stall; the other fabric span is grouped
  ASSERT_EQ(s.fabric_groups_size(), 1);
  EXPECT_EQ(s.fabric_groups(0).signal(), "pfc_pause_seconds");
  EXPECT_EQ(s.fabric_groups(0).signal_class(), "pause");
  EXPECT_EQ(s.fabric_groups(0).spans(), 1u);
  EXPECT_LE(s.fabric_groups(0).first_start_unix_nano(), s.fabric_groups(0).last_end_unix_nano());
  EXPECT_EQ(s.not_selected(), 0u);

  // Clean only; then stalls only; then fabric with a listing limit of 1.
  req.mutable_selection()->add_verdicts(v1::VERDICT_CLEAN);
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  ASSERT_EQ(resp.spans_size(), 1);
  EXPECT_EQ(resp.spans(0).verdict(), v1::VERDICT_CLEAN);
  EXPECT_EQ(resp.summary().spans(), 3u);
  EXPECT_EQ(resp.summary().not_selected(), 2u);

  req.mutable_selection()->Clear();
  req.mutable_selection()->set_stalls(true);
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  ASSERT_EQ(resp.spans_size(), 1);
  EXPECT_TRUE(resp.spans(0).stall());

  req.mutable_selection()->Clear();
  req.mutable_selection()->add_verdicts(v1::VERDICT_FABRIC);
  req.set_max_listed(1);
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  ASSERT_EQ(resp.spans_size(), 1);
  EXPECT_TRUE(resp.spans(0).stall());  // the stall is kept first
  EXPECT_EQ(resp.summary().over_limit(), 1u);

  // An empty selection: the summary alone.
  req.mutable_selection()->Clear();
  req.set_max_listed(0);
  resp.Clear();
  ASSERT_TRUE(service_.Correlate(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.spans_size(), 0);
  EXPECT_EQ(resp.summary().not_selected(), 3u);
}

TEST_F(QueryServiceTest, EventsAndSeriesSayWhatTheLimitLeftOut) {
  DetectorEvent later;
  later.detector = "microburst";
  later.kind = "burst";
  later.netdev = "eth1";
  later.start_unix_nano = kT + 40 * kSec;
  later.end_unix_nano = kT + 41 * kSec;
  events_.Open(later);
  v1::EventsRequest ev;
  ev.mutable_time_range()->set_from_unix_nano(kT);
  ev.mutable_time_range()->set_to_unix_nano(kT + 60 * kSec);
  ev.set_limit(1);
  v1::EventsResponse events;
  ASSERT_TRUE(service_.Events(nullptr, &ev, &events).ok());
  ASSERT_EQ(events.events_size(), 1);
  EXPECT_EQ(events.events(0).detector(), "microburst");  // the latest
  EXPECT_EQ(events.left_out(), 1u);

  v1::SeriesRequest sr;
  sr.set_signal("pfc_pause_seconds");
  sr.mutable_time_range()->set_from_unix_nano(kT);
  sr.mutable_time_range()->set_to_unix_nano(kT + 30 * kSec);
  sr.set_max_series(1);
  v1::SeriesResponse series;
  ASSERT_TRUE(service_.Series(nullptr, &sr, &series).ok());
  EXPECT_EQ(series.series_size(), 1);
  EXPECT_EQ(series.series_left_out(), 1u);
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
  EXPECT_EQ(resp.known_signals_size(), 0);
  // The family name, with or without its prefix, names the same series.
  for (const char* name : {"fabricscope_pfc_pause_seconds_total", "pfc_pause_seconds_total"}) {
    req.set_signal(name);
    resp.Clear();
    ASSERT_TRUE(service_.Series(nullptr, &req, &resp).ok());
    EXPECT_EQ(resp.series_size(), 2) << name;
  }
  // A name of nothing: no series, and the names there are.
  req.set_signal("no_such_signal");
  resp.Clear();
  ASSERT_TRUE(service_.Series(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.series_size(), 0);
  ASSERT_GT(resp.known_signals_size(), 0);
  EXPECT_NE(
      std::find(resp.known_signals().begin(), resp.known_signals().end(), "pfc_pause_seconds"),
      resp.known_signals().end());
  EXPECT_TRUE(std::is_sorted(resp.known_signals().begin(), resp.known_signals().end()));
  // A known signal that a label filters out entirely is not a typo.
  req.set_signal("pfc_pause_seconds");
  m = req.add_matchers();
  m->set_label("netdev");
  m->set_value("eth9");
  resp.Clear();
  ASSERT_TRUE(service_.Series(nullptr, &req, &resp).ok());
  EXPECT_EQ(resp.series_size(), 0);
  EXPECT_EQ(resp.known_signals_size(), 0);
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

// Partners and the GPU scope, through the wire: the topology in the
// inventory names eth0's partner on its signals, port and event, and a span
// with fabricscope.gpu is scoped to the NIC nearest that GPU.
TEST_F(QueryServiceTest, OverGrpcPartnersAndGpuScope) {
  HostTopology topo;
  topo.partners = {{"mlx5_0", 1, "eth0", "lldp", "00:11:22:33:44:55", "leaf07", "Ethernet1/12",
                    "to gpu-node-3"}};
  topo.gpus = {{"0000:1b:00.0", 0, "nvidia", "H100", 0}};
  topo.affinity = {{"0000:1b:00.0", 0, "mlx5_1", PciRelation::kPix},
                   {"0000:1b:00.0", 0, "mlx5_0", PciRelation::kSys}};
  ports_.SetTopology(topo);
  Span on_gpu = query_test::MakeSpan(3, 4, "decode_step", kT + 10 * kSec, kT + 10200 * kMs);
  on_gpu.gpu = "1b:00.0";
  spans_.Add(on_gpu);

  GrpcServer server("127.0.0.1:0");
  server.AddService(&service_);
  ASSERT_TRUE(server.Start().ok());
  auto stub =
      v1::Query::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    v1::CorrelateRequest req;
    req.set_trace_id(Bytes(16, 1));
    req.set_include_all_series(true);
    v1::CorrelateResponse resp;
    ASSERT_TRUE(stub->Correlate(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.spans_size(), 2);
    const v1::SpanVerdict& hit = resp.spans(0);
    EXPECT_EQ(hit.verdict(), v1::VERDICT_FABRIC);
    EXPECT_EQ(hit.scope(), "every port");
    EXPECT_EQ(hit.gpu(), "");
    ASSERT_EQ(hit.signals_size(), 2);
    for (const v1::SignalCorrelation& s : hit.signals()) {
      if (s.netdev() == "eth0") {
        ASSERT_TRUE(s.has_partner());
        EXPECT_EQ(s.partner().system_name(), "leaf07");
        EXPECT_EQ(s.partner().port_id(), "Ethernet1/12");
        EXPECT_EQ(s.partner().chassis_id(), "00:11:22:33:44:55");
        EXPECT_EQ(s.partner().port_description(), "to gpu-node-3");
        EXPECT_EQ(s.partner().source(), "lldp");
      } else {
        EXPECT_EQ(s.netdev(), "eth1");
        EXPECT_FALSE(s.has_partner());
      }
    }
  }
  {
    grpc::ClientContext ctx;
    v1::CorrelateRequest req;
    req.set_trace_id(Bytes(16, 3));
    req.set_include_all_series(true);
    v1::CorrelateResponse resp;
    ASSERT_TRUE(stub->Correlate(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.spans_size(), 1);
    const v1::SpanVerdict& v = resp.spans(0);
    // The burst is on eth0 (mlx5_0, SYS to the GPU); mlx5_1 is its PIX NIC.
    EXPECT_EQ(v.verdict(), v1::VERDICT_CLEAN) << v.reason();
    EXPECT_EQ(v.gpu(), "1b:00.0");
    EXPECT_EQ(v.scope(), "NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_1/1");
    ASSERT_EQ(v.signals_size(), 1);
    EXPECT_EQ(v.signals(0).netdev(), "eth1");
  }
  {
    grpc::ClientContext ctx;
    v1::PortsResponse resp;
    ASSERT_TRUE(stub->Ports(&ctx, v1::PortsRequest(), &resp).ok());
    ASSERT_EQ(resp.ports_size(), 2);
    ASSERT_TRUE(resp.ports(0).has_partner());
    EXPECT_EQ(resp.ports(0).partner().system_name(), "leaf07");
    EXPECT_FALSE(resp.ports(1).has_partner());
  }
  {
    grpc::ClientContext ctx;
    v1::EventsRequest req;
    req.mutable_time_range()->set_from_unix_nano(kT);
    req.mutable_time_range()->set_to_unix_nano(kT + 60 * kSec);
    v1::EventsResponse resp;
    ASSERT_TRUE(stub->Events(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.events_size(), 1);
    ASSERT_TRUE(resp.events(0).has_partner());
    EXPECT_EQ(resp.events(0).partner().port_id(), "Ethernet1/12");
  }
  server.Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace query_service_test
}  // namespace fabricscope
