// How `fabricscope correlate` renders a span's series and blind caveat (no
// daemon): every series line names its counter/reason label where the family
// has one, a blind series says why, and the span's blind list is printed
// ("blind: ...") and carried in the JSON.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/fabricscope/correlate.h"

namespace fabricscope::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::SignalCorrelation* AddSignal(v1::SpanVerdict* v, const std::string& signal,
                                 const std::string& counter) {
  v1::SignalCorrelation* s = v->add_signals();
  s->set_signal(signal);
  s->set_signal_class("retransmits");
  s->set_device("mlx5_0");
  s->set_port(1);
  s->set_counter(counter);
  s->set_coverage(1);
  return s;
}

v1::BlindSeries* AddBlind(v1::SpanVerdict* v, int i) {
  v1::BlindSeries* b = v->add_blind();
  b->set_signal("ib_port_xmit_wait_ticks");
  b->set_device(absl::StrCat("mlx5_", i));
  b->set_port(1);
  b->set_why("saturated");
  b->set_source("counters");
  b->set_raw_name("port_xmit_wait");
  return b;
}

v1::CorrelateResponse CleanWithACaveat() {
  v1::CorrelateResponse r;
  v1::SpanVerdict* v = r.add_spans();
  v->set_name("decode_step");
  v->set_verdict(v1::VERDICT_CLEAN);
  v->set_reason(
      "3 congestion series covered, none anomalous; mlx5_0/1 port_xmit_wait saturated: blind");
  AddSignal(v, "rdma_errors", "out_of_sequence");
  AddSignal(v, "rdma_errors", "packet_seq_err");
  v1::SignalCorrelation* d = AddSignal(v, "discards", "rx_discards_phy");
  d->set_device("");
  d->set_port(0);
  d->set_netdev("eth2");
  v1::SignalCorrelation* x = AddSignal(v, "ib_port_xmit_wait_ticks", "");
  x->set_signal_class("xmit_wait");
  x->set_coverage(0);
  x->set_blind("saturated");
  x->set_source("counters");
  x->set_raw_name("port_xmit_wait");
  AddBlind(v, 0);
  return r;
}

// The line of series #rank ("" if none).
std::string RankLine(const std::string& human, int rank) {
  for (absl::string_view line : absl::StrSplit(human, '\n')) {
    if (absl::StrContains(line, absl::StrCat(" #", rank, " "))) return std::string(line);
  }
  return "";
}

TEST(CorrelateRenderTest, EverySeriesLineNamesItsCounter) {
  const std::string human = CorrelateHuman(CleanWithACaveat());
  EXPECT_THAT(RankLine(human, 1), HasSubstr("#1 rdma_errors out_of_sequence")) << human;
  EXPECT_THAT(RankLine(human, 1), HasSubstr("mlx5_0/1"));
  EXPECT_THAT(RankLine(human, 2), HasSubstr("#2 rdma_errors packet_seq_err"));
  EXPECT_THAT(RankLine(human, 3), HasSubstr("#3 discards rx_discards_phy eth2"));
  // A family without a counter label: the signal alone; a blind series says
  // why instead of a rate.
  EXPECT_THAT(RankLine(human, 4), HasSubstr("#4 ib_port_xmit_wait_ticks mlx5_0/1"));
  EXPECT_THAT(RankLine(human, 4),
              HasSubstr("blind: saturated (covered 0% of the span; counters/port_xmit_wait)"));
}

TEST(CorrelateRenderTest, TheBlindCaveatIsPrintedAndInTheJson) {
  v1::CorrelateResponse r = CleanWithACaveat();
  const std::string human = CorrelateHuman(r);
  EXPECT_THAT(human, HasSubstr("CLEAN"));
  EXPECT_THAT(human, HasSubstr("mlx5_0/1 port_xmit_wait saturated: blind"));
  EXPECT_THAT(human, HasSubstr("    blind: ib_port_xmit_wait_ticks mlx5_0/1 saturated "
                               "(counters/port_xmit_wait): not judged\n"));
  const std::string json = CorrelateJson(r);
  EXPECT_THAT(json, HasSubstr("\"blind\":[{\"signal\":\"ib_port_xmit_wait_ticks\",\"counter\":\"\","
                              "\"device\":\"mlx5_0\",\"port\":1,\"netdev\":\"\",\"priority\":\"\","
                              "\"direction\":\"\",\"why\":\"saturated\",\"source\":\"counters\","
                              "\"raw_name\":\"port_xmit_wait\"}]"));
  EXPECT_THAT(json, HasSubstr("\"blind\":\"saturated\",\"superseded_by\":\"\""));

  // A span with nothing blind has an empty list and no caveat lines.
  r.mutable_spans(0)->clear_blind();
  EXPECT_THAT(CorrelateHuman(r), Not(HasSubstr("not judged")));
  EXPECT_THAT(CorrelateJson(r), HasSubstr("\"blind\":[]}"));

  // At most 8 caveat lines, then how many more.
  for (int i = 0; i < 11; ++i) AddBlind(r.mutable_spans(0), i);
  const std::string many = CorrelateHuman(r);
  size_t lines = 0;
  for (size_t at = many.find("not judged"); at != std::string::npos;
       at = many.find("not judged", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 8u);
  EXPECT_THAT(many, HasSubstr("    blind: 3 more (--output json lists them)\n"));
}

TEST(CorrelateRenderTest, ASupersededSeriesNamesTheOneJudgedInstead) {
  v1::CorrelateResponse r = CleanWithACaveat();
  v1::SignalCorrelation* x = r.mutable_spans(0)->mutable_signals(3);
  x->set_superseded_by("counters_ext/port_xmit_wait_64");
  EXPECT_THAT(CorrelateHuman(r),
              HasSubstr("superseded by counters_ext/port_xmit_wait_64 (saturated)"));
}

}  // namespace
}  // namespace fabricscope::cli
