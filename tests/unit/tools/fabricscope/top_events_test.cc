// `fabricscope top` and `events` rendering of detector events (no daemon).
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "tools/fabricscope/events.h"
#include "tools/fabricscope/top.h"

namespace fabricscope::cli {
namespace {

v1::Event StormEvent(bool active) {
  v1::Event e;
  e.set_detector("pfc_storm");
  e.set_kind("storm");
  e.set_netdev("eth2");
  e.set_device("mlx5_0");
  e.set_port(1);
  e.set_priority("3");
  e.set_direction("rx");
  e.set_start_unix_nano(1'000'000'000);
  e.set_detected_unix_nano(1'200'000'000);
  e.set_active(active);
  if (!active) e.set_end_unix_nano(1'600'000'000);
  e.set_peak(0.97);
  e.set_summary("eth2 priority 3 rx: paused");
  return e;
}

TEST(EventsRenderTest, JsonHasTheContractFieldsAndNullEndWhileActive) {
  const std::string active = EventJson(StormEvent(true));
  EXPECT_NE(active.find("\"end_unix_nano\":null"), std::string::npos) << active;
  for (const char* f :
       {"\"detector\":\"pfc_storm\"", "\"kind\":\"storm\"", "\"device\":\"mlx5_0\"", "\"port\":1",
        "\"netdev\":\"eth2\"", "\"priority\":\"3\"", "\"direction\":\"rx\"",
        "\"start_unix_nano\":1000000000", "\"peak\":0.97", "\"summary\":"}) {
    EXPECT_NE(active.find(f), std::string::npos) << f << " in " << active;
  }
  EXPECT_NE(EventJson(StormEvent(false)).find("\"end_unix_nano\":1600000000"), std::string::npos);
  v1::EventsResponse r;
  *r.add_events() = StormEvent(false);
  EXPECT_NE(EventsHuman(r).find("600.0ms"), std::string::npos) << EventsHuman(r);
  EXPECT_EQ(EventsHuman(v1::EventsResponse()), "no detector events\n");
}

// A row's current sums its series (rx and tx pause here, each 30 % of every
// interval): 60 %, above either series' per-interval peak; the peak shown is
// never below the current, on every refresh.
TEST(TopRenderTest, CurrentNeverExceedsPeak) {
  TopModel model;
  for (int refresh = 0; refresh < 3; ++refresh) {
    model.BeginRefresh();
    v1::SeriesResponse series;
    for (const char* dir : {"rx", "tx"}) {
      v1::SeriesData* d = series.add_series();
      d->set_netdev("eth2");
      (*d->mutable_labels())["priority"] = "3";
      (*d->mutable_labels())["direction"] = dir;
      d->set_scale(1e-6);  // microseconds paused
      for (int i = 0; i <= 10; ++i) {
        auto* s = d->add_samples();
        s->set_ts_unix_nano(1'000'000'000LL * refresh + 100'000'000LL * i);
        s->set_raw(static_cast<uint64_t>(30'000 * (10 * refresh + i)));  // 30 ms per 100 ms
      }
    }
    model.Update(TopColumn::kPause, series, 1'000'000'000);
    const std::string json = model.RenderJson(2'000'000'000);
    std::smatch m;
    ASSERT_TRUE(
        std::regex_search(json, m, std::regex(R"("current":([0-9.e+-]+),"peak":([0-9.e+-]+))")))
        << json;
    EXPECT_NEAR(std::stod(m[1].str()), 60, 1e-6) << json;
    EXPECT_GE(std::stod(m[2].str()), std::stod(m[1].str())) << "refresh " << refresh << " " << json;
  }
}

TEST(TopRenderTest, ActiveEventsShowOnTheirPortAndPriority) {
  TopModel model;
  v1::PortsResponse ports;
  v1::Port* p = ports.add_ports();
  p->set_device("mlx5_0");
  p->set_port(1);
  p->set_netdev("eth2");
  model.SetPorts(ports);
  model.set_all_priorities(true);  // the rows are idle (no samples)
  v1::SeriesResponse series;
  for (const char* prio : {"3", "4"}) {
    v1::SeriesData* d = series.add_series();
    d->set_netdev("eth2");
    (*d->mutable_labels())["priority"] = prio;
    d->set_scale(1e-6);
  }
  model.Update(TopColumn::kPause, series, 1'000'000'000);
  v1::EventsResponse active;
  *active.add_events() = StormEvent(true);
  v1::Event ecn;  // port-wide: shows on every priority row of the port
  ecn.set_detector("ecn_mistuning");
  ecn.set_kind("too_aggressive");
  ecn.set_device("mlx5_0");
  ecn.set_port(1);
  ecn.set_active(true);
  *active.add_events() = ecn;
  model.SetActiveEvents(active);
  const std::string json = model.RenderJson(2'000'000'000);
  EXPECT_NE(json.find("\"priority\":\"3\",\"active\":[\"pfc_storm/storm\","
                      "\"ecn_mistuning/too_aggressive\"]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"priority\":\"4\",\"active\":[\"ecn_mistuning/too_aggressive\"]"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"active_events\":[{\"detector\":\"pfc_storm\""), std::string::npos);
  const std::string human = model.RenderHuman(2'000'000'000);
  EXPECT_NE(human.find("pfc_storm/storm,ecn_mistuning/too_aggressive"), std::string::npos) << human;
  EXPECT_NE(human.find("active detectors:"), std::string::npos);
}

}  // namespace
}  // namespace fabricscope::cli
