// `fabricscope events`: one line per episode, naming its signals (issue #16).
#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "tools/fabricscope/events.h"

namespace fabricscope::cli {
namespace {

v1::Event Burst(const std::string& signal, uint64_t start, uint64_t end) {
  v1::Event e;
  e.set_detector("microburst");
  e.set_kind("burst");
  e.set_device("mlx5_0");
  e.set_port(1);
  e.set_netdev("eth2");
  e.set_start_unix_nano(start);
  e.set_end_unix_nano(end);
  e.set_detected_unix_nano(start + 10'000'000);
  e.set_summary("mlx5_0/1 " + signal + ": burst up to 3.66e+06/s");
  e.add_signals(signal);
  return e;
}

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(EventsEpisodeRenderTest, AnEpisodeIsOneLineListingItsSignals) {
  v1::EventsResponse r;
  v1::Event e = Burst("pfc_pause_frames tx prio 3", 1'000'000'000, 1'200'000'000);
  e.add_signals("discards rx_discards_phy");
  *r.add_events() = e;
  const std::string out = EventsHuman(r);
  EXPECT_EQ(Lines(out), 2u) << out;  // header + one episode
  EXPECT_NE(out.find("[signals: pfc_pause_frames tx prio 3, discards rx_discards_phy]"),
            std::string::npos)
      << out;
  const std::string json = EventJson(e);
  EXPECT_NE(json.find("\"signals\":[\"pfc_pause_frames tx prio 3\",\"discards rx_discards_phy\"]"),
            std::string::npos)
      << json;
  EXPECT_NE(EventJson(v1::Event()).find("\"signals\":[]"), std::string::npos);
}

TEST(EventsEpisodeRenderTest, OverlappingEventsOfOnePlaceFoldIntoOneLine) {
  // Several events that differ only in the counter (an older daemon that did
  // not merge them): one line with every counter named.
  v1::EventsResponse r;
  *r.add_events() = Burst("discards rx_discards_phy", 1'000'000'000, 1'200'000'000);
  *r.add_events() = Burst("discards rx_out_of_buffer", 1'000'000'000, 1'140'000'000);
  *r.add_events() = Burst("discards out_of_buffer", 1'010'000'000, 1'300'000'000);
  // Later, and on another port: their own lines.
  *r.add_events() = Burst("discards rx_discards_phy", 5'000'000'000, 5'100'000'000);
  v1::Event other = Burst("discards rx_discards_phy", 1'000'000'000, 1'200'000'000);
  other.set_device("mlx5_1");
  other.set_netdev("eth3");
  *r.add_events() = other;
  const std::string out = EventsHuman(r);
  EXPECT_EQ(Lines(out), 4u) << out;
  EXPECT_NE(out.find("300.0ms"), std::string::npos) << "the folded line spans all: " << out;
  EXPECT_NE(out.find("[signals: discards rx_discards_phy, discards rx_out_of_buffer, discards "
                     "out_of_buffer]"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace fabricscope::cli
