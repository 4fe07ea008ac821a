// How `fabricscope correlate`, `events`, `top` and `ports` render link
// partners and the correlation scope (no daemon): the partner after the port
// ("eth2 -> leaf07 Ethernet1/12"), `partner` in the JSON only where known.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/fabricscope/correlate.h"
#include "tools/fabricscope/events.h"
#include "tools/fabricscope/ports.h"
#include "tools/fabricscope/query_client.h"
#include "tools/fabricscope/top.h"

namespace fabricscope::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPartnerJson[] =
    "\"partner\":{\"system_name\":\"leaf07\",\"port_id\":\"Ethernet1/12\","
    "\"chassis_id\":\"00:11:22:33:44:55\",\"port_description\":\"to gpu-node-3\","
    "\"source\":\"lldp\"}";

v1::LinkPartner Leaf07() {
  v1::LinkPartner p;
  p.set_system_name("leaf07");
  p.set_port_id("Ethernet1/12");
  p.set_chassis_id("00:11:22:33:44:55");
  p.set_port_description("to gpu-node-3");
  p.set_source("lldp");
  return p;
}

TEST(PartnerRenderTest, NameIsSystemAndPortFallingBackToTheChassisId) {
  v1::LinkPartner p = Leaf07();
  EXPECT_EQ(PartnerName(p), "leaf07 Ethernet1/12");
  p.set_system_name("");
  EXPECT_EQ(PartnerName(p), "00:11:22:33:44:55 Ethernet1/12");
  p.set_port_id("");
  EXPECT_EQ(PartnerName(p), "00:11:22:33:44:55");
  EXPECT_EQ(PartnerJson(Leaf07()), std::string(kPartnerJson).substr(10));
}

v1::CorrelateResponse Verdict(bool with_partner) {
  v1::CorrelateResponse r;
  v1::SpanVerdict* v = r.add_spans();
  v->set_name("decode_step");
  v->set_verdict(v1::VERDICT_FABRIC);
  v->set_reason("1 congestion signal(s) anomalous");
  v->set_scope("NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1");
  v->set_gpu("0");
  v1::SignalCorrelation* s = v->add_signals();
  s->set_signal("pfc_pause_seconds");
  s->set_signal_class("pause");
  s->set_netdev("eth2");
  s->set_priority("3");
  s->set_direction("rx");
  s->set_pause_fraction(0.52);
  s->set_score(10.4);
  s->set_anomalous(true);
  if (with_partner) *s->mutable_partner() = Leaf07();
  return r;
}

TEST(PartnerRenderTest, CorrelateShowsTheScopeAndThePartnerOfASignal) {
  const std::string human = CorrelateHuman(Verdict(true));
  EXPECT_THAT(human, HasSubstr("\n    scope: NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1\n"));
  EXPECT_THAT(human, HasSubstr(" eth2 -> leaf07 Ethernet1/12 prio 3 rx "));
  const std::string json = CorrelateJson(Verdict(true));
  EXPECT_THAT(json, HasSubstr(",\"scope\":\"NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1\","));
  EXPECT_THAT(json, HasSubstr(std::string(",\"coverage\":0,") + kPartnerJson + "}"));

  const std::string plain = CorrelateHuman(Verdict(false));
  EXPECT_THAT(plain, HasSubstr(" eth2 prio 3 rx "));
  EXPECT_THAT(plain, Not(HasSubstr("->")));
  EXPECT_THAT(CorrelateJson(Verdict(false)), Not(HasSubstr("\"partner\"")));
  v1::CorrelateResponse no_scope = Verdict(false);
  no_scope.mutable_spans(0)->clear_scope();
  EXPECT_THAT(CorrelateHuman(no_scope), Not(HasSubstr("scope:")));
}

v1::Event Storm(bool with_partner) {
  v1::Event e;
  e.set_detector("pfc_storm");
  e.set_kind("storm");
  e.set_device("mlx5_0");
  e.set_port(1);
  e.set_netdev("eth2");
  e.set_priority("3");
  e.set_summary("eth2 priority 3 rx: paused");
  if (with_partner) *e.mutable_partner() = Leaf07();
  return e;
}

TEST(PartnerRenderTest, EventsAppendThePartnerToTheSummary) {
  v1::EventsResponse r;
  *r.add_events() = Storm(true);
  EXPECT_THAT(EventsHuman(r),
              HasSubstr("eth2 priority 3 rx: paused (eth2 -> leaf07 Ethernet1/12)\n"));
  EXPECT_THAT(EventJson(Storm(true)), HasSubstr(std::string(kPartnerJson) + "}"));
  v1::EventsResponse plain;
  *plain.add_events() = Storm(false);
  EXPECT_THAT(EventsHuman(plain), HasSubstr("eth2 priority 3 rx: paused\n"));
  EXPECT_THAT(EventJson(Storm(false)), Not(HasSubstr("partner")));

  v1::Event ib = Storm(true);  // no netdev: the port is device/port
  ib.clear_netdev();
  *r.mutable_events(0) = ib;
  EXPECT_THAT(EventsHuman(r), HasSubstr("(mlx5_0/1 -> leaf07 Ethernet1/12)"));
}

TEST(PartnerRenderTest, PortsListThePartner) {
  v1::PortsResponse r;
  v1::Port* a = r.add_ports();
  a->set_device("mlx5_0");
  a->set_port(1);
  a->set_netdev("eth2");
  *a->mutable_partner() = Leaf07();
  v1::Port* b = r.add_ports();
  b->set_device("mlx5_1");
  b->set_port(1);
  b->set_netdev("eth3");
  const std::string human = PortsHuman(r);
  EXPECT_THAT(human, HasSubstr(" -> leaf07 Ethernet1/12\n"));
  EXPECT_EQ(human.find("->"), human.rfind("->"));  // only the first port
  const std::string json = PortsJson(r);
  EXPECT_THAT(json, HasSubstr(std::string("\"present\":false,") + kPartnerJson + "}"));
  EXPECT_EQ(json.find("\"partner\""), json.rfind("\"partner\""));
}

TEST(PartnerRenderTest, TopRowsCarryTheirPortsPartner) {
  TopModel model;
  v1::PortsResponse ports;
  v1::Port* a = ports.add_ports();
  a->set_device("mlx5_0");
  a->set_port(1);
  a->set_netdev("eth2");
  *a->mutable_partner() = Leaf07();
  v1::Port* b = ports.add_ports();
  b->set_device("mlx5_1");
  b->set_port(1);
  b->set_netdev("eth3");
  model.SetPorts(ports);
  model.set_all_priorities(true);  // the rows are idle (no samples)
  v1::SeriesResponse series;
  for (const char* netdev : {"eth2", "eth3"}) {
    v1::SeriesData* d = series.add_series();
    d->set_netdev(netdev);
    (*d->mutable_labels())["priority"] = "3";
    d->set_scale(1e-6);
  }
  model.Update(TopColumn::kPause, series, 1'000'000'000);
  const std::string json = model.RenderJson(1);
  EXPECT_THAT(json, HasSubstr(std::string("\"netdev\":\"eth2\",\"priority\":\"3\",") +
                              kPartnerJson + ",\"active\":["));
  EXPECT_THAT(json, HasSubstr("\"netdev\":\"eth3\",\"priority\":\"3\",\"active\":["));
  const std::string human = model.RenderHuman(1);
  EXPECT_THAT(human, HasSubstr("PARTNER"));
  EXPECT_THAT(human, HasSubstr("eth2       leaf07 Ethernet1/12      3"));
  EXPECT_THAT(human, HasSubstr("eth3       -                        3"));

  TopModel without;  // no partner known: no PARTNER column
  b->clear_partner();
  ports.mutable_ports(0)->clear_partner();
  without.SetPorts(ports);
  without.Update(TopColumn::kPause, series, 1'000'000'000);
  EXPECT_THAT(without.RenderHuman(1), Not(HasSubstr("PARTNER")));
  EXPECT_THAT(without.RenderJson(1), Not(HasSubstr("partner")));
}

}  // namespace
}  // namespace fabricscope::cli
