// The answers-first CLI (no daemon): correlate's summary line, selection
// flags and left-out lines; --limit parsing; top's priority filter and row
// limit.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/fabricscope/cli.h"
#include "tools/fabricscope/correlate.h"
#include "tools/fabricscope/top.h"

namespace fabricscope::cli {
namespace {

Flags Parse(const std::vector<std::string>& args) {
  auto f = Flags::Parse(args, {"verdict", "limit"}, {"stalls", "all"});
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
}

v1::CorrelateSummary Summary() {
  v1::CorrelateSummary s;
  s.set_spans(1423);
  s.set_clean(1401);
  s.set_fabric(2);
  s.set_unknown(20);
  s.set_stalls(3);
  s.set_stalls_fabric(2);
  s.set_stalls_unknown(1);
  v1::BlamedSignal* b = s.add_blamed();
  b->set_signal("pfc_pause_seconds");
  b->set_direction("rx");
  b->set_priority("3");
  b->set_spans(2);
  b = s.add_blamed();
  b->set_signal("rdma_errors");
  b->set_counter("out_of_sequence");
  b->set_spans(1);
  return s;
}

TEST(CorrelateSummaryTest, OneLineWithVerdictsStallsAndBlame) {
  EXPECT_EQ(CorrelateSummaryLine(Summary()),
            "1423 spans: 1401 clean, 2 fabric, 20 unknown; 3 stalls: 2 fabric, 1 unknown; "
            "stalls blamed on: pfc_pause_seconds rx prio 3 (2), rdma_errors out_of_sequence (1)");
  v1::CorrelateSummary quiet;
  quiet.set_spans(1);
  quiet.set_clean(1);
  EXPECT_EQ(CorrelateSummaryLine(quiet), "1 span: 1 clean; 0 stalls");
}

TEST(CorrelateSummaryTest, ReportStartsWithTheSummaryAndSaysWhatWasLeftOut) {
  v1::CorrelateResponse r;
  *r.mutable_summary() = Summary();
  r.mutable_summary()->set_not_selected(1420);
  r.mutable_summary()->set_over_limit(1);
  v1::SpanVerdict* v = r.add_spans();
  v->set_name("decode_step");
  v->set_verdict(v1::VERDICT_FABRIC);
  v->set_stall(true);
  v->set_start_unix_nano(1'000'000'000);
  v->set_end_unix_nano(1'500'000'000);
  const std::string out = CorrelateReportHuman(r);
  EXPECT_EQ(out.rfind("1423 spans: ", 0), 0u) << out;
  const size_t limit = out.find("... 1 more selected spans (use --limit N");
  const size_t span = out.find("decode_step  500.0ms  STALL  FABRIC");
  const size_t unselected =
      out.find("... 1420 more spans not listed (use --verdict, --stalls or --all)\n");
  ASSERT_NE(limit, std::string::npos) << out;
  ASSERT_NE(span, std::string::npos) << out;
  ASSERT_NE(unselected, std::string::npos) << out;
  EXPECT_LT(span, limit);
  EXPECT_LT(limit, unselected);
  EXPECT_EQ(CorrelateReportHuman(v1::CorrelateResponse()), "no spans matched\n");

  const std::string json = CorrelateReportJson(r);
  EXPECT_EQ(json.rfind("{\"summary\":{\"spans\":1423,\"verdicts\":{\"fabric\":2,\"clean\":1401,"
                       "\"unknown\":20},\"stalls\":3,\"stall_verdicts\":{\"fabric\":2,\"clean\":0,"
                       "\"unknown\":1},\"blamed\":[{\"signal\":\"pfc_pause_seconds\",",
                       0),
            0u)
      << json;
  EXPECT_NE(json.find("\"not_selected\":1420,\"over_limit\":1,\"fabric_groups\":[],"
                      "\"fabric_groups_left_out\":0},\n\"spans\":[\n {\"trace_id\""),
            std::string::npos)
      << json;
}

// A stall of `ms` milliseconds starting at `start_s` with `verdict`.
void AddStall(v1::CorrelateResponse* r, const std::string& name, v1::Verdict verdict,
              uint64_t start_s, uint64_t ms) {
  v1::SpanVerdict* v = r->add_spans();
  v->set_name(name);
  v->set_verdict(verdict);
  v->set_stall(true);
  v->set_start_unix_nano(start_s * 1'000'000'000);
  v->set_end_unix_nano(start_s * 1'000'000'000 + ms * 1'000'000);
}

// The first screen: the summary, the stalls judged fabric first and the
// longest first among them (whatever their start order), then one line per
// port and signal for the fabric spans that did not stall.
TEST(CorrelateSummaryTest, StallsRankFirstThenFabricSpansGrouped) {
  v1::CorrelateResponse r;
  *r.mutable_summary() = Summary();
  AddStall(&r, "early_clean", v1::VERDICT_CLEAN, 1, 900);
  AddStall(&r, "short_fabric", v1::VERDICT_FABRIC, 2, 100);
  AddStall(&r, "unknown", v1::VERDICT_UNKNOWN, 3, 700);
  AddStall(&r, "long_fabric", v1::VERDICT_FABRIC, 4, 622);
  v1::FabricGroup* g = r.mutable_summary()->add_fabric_groups();
  g->set_signal("cnp_sent");
  g->set_signal_class("rate");
  g->set_device("mlx5_1");
  g->set_port(1);
  g->set_netdev("eth3");
  g->mutable_partner()->set_system_name("leaf02");
  g->mutable_partner()->set_port_id("Ethernet1/1");
  g->set_spans(57);
  g->set_first_start_unix_nano(3'600'000'000'000);
  g->set_last_end_unix_nano(3'658'500'000'000);
  g->set_peak(30'800);
  g->set_peak_score(5.8);
  g = r.mutable_summary()->add_fabric_groups();
  g->set_signal("pfc_pause_seconds");
  g->set_signal_class("pause");
  g->set_netdev("eth2");
  g->set_priority("3");
  g->set_direction("rx");
  g->set_spans(1);
  g->set_peak(0.812);
  g->set_peak_score(1.6);
  r.mutable_summary()->set_fabric_groups_left_out(3);
  const std::string out = CorrelateReportHuman(r);
  std::vector<size_t> at;
  for (const char* name : {"long_fabric", "short_fabric", "unknown", "early_clean"}) {
    at.push_back(out.find(absl::StrCat("  ", name, "  ")));
    ASSERT_NE(at.back(), std::string::npos) << name << "\n" << out;
  }
  EXPECT_TRUE(std::is_sorted(at.begin(), at.end())) << out;
  const size_t groups = out.find("fabric spans that were not stalls (0), by the port and signal");
  ASSERT_NE(groups, std::string::npos) << out;
  EXPECT_LT(at.back(), groups);
  EXPECT_NE(out.find("     57 spans cnp_sent             mlx5_1/1 eth3 -> leaf02 Ethernet1/1 "
                     "01:00:00.000 .. 01:00:58.500  peak 30.8k/s, score up to 5.8\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("      1 span  pfc_pause_seconds    eth2 prio 3 rx"), std::string::npos)
      << out;
  EXPECT_NE(out.find("paused up to 81.2% of a span, score up to 1.6\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  ... 3 more groups (--verdict fabric lists each span)\n"), std::string::npos)
      << out;

  const std::string json = CorrelateReportJson(r);
  EXPECT_NE(json.find("\"fabric_groups\":[{\"signal\":\"cnp_sent\",\"signal_class\":\"rate\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"spans\":57,\"first_start_unix_nano\":3600000000000,"
                      "\"last_end_unix_nano\":3658500000000,\"peak\":30800,\"peak_score\":5.8,"
                      "\"partner\":{"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"fabric_groups_left_out\":3}"), std::string::npos) << json;
}

TEST(SpanSelectionTest, GroupedDefaultListsTheStallsAlone) {
  auto sel = ParseSpanSelection(Parse({}), /*default_all=*/false, /*grouped=*/true);
  ASSERT_TRUE(sel.ok());
  ASSERT_TRUE(sel->has_value());
  EXPECT_TRUE((*sel)->stalls());
  EXPECT_EQ((*sel)->verdicts_size(), 0);
  sel = ParseSpanSelection(Parse({"--verdict=fabric"}), false, /*grouped=*/true);
  ASSERT_TRUE(sel.ok());
  ASSERT_EQ((*sel)->verdicts_size(), 1);  // asked for: each listed
}

TEST(SpanSelectionTest, DefaultIsStallsAndFabricOrEverySpanForIds) {
  auto sel = ParseSpanSelection(Parse({}), /*default_all=*/false, /*grouped=*/false);
  ASSERT_TRUE(sel.ok());
  ASSERT_TRUE(sel->has_value());
  EXPECT_TRUE((*sel)->stalls());
  ASSERT_EQ((*sel)->verdicts_size(), 1);
  EXPECT_EQ((*sel)->verdicts(0), v1::VERDICT_FABRIC);
  sel = ParseSpanSelection(Parse({}), /*default_all=*/true, /*grouped=*/false);
  ASSERT_TRUE(sel.ok());
  EXPECT_FALSE(sel->has_value());
}

TEST(SpanSelectionTest, VerdictStallsAndAllReplaceTheDefault) {
  auto sel =
      ParseSpanSelection(Parse({"--verdict=clean,unknown", "--verdict", "fabric"}), false, false);
  ASSERT_TRUE(sel.ok());
  ASSERT_TRUE(sel->has_value());
  EXPECT_FALSE((*sel)->stalls());
  ASSERT_EQ((*sel)->verdicts_size(), 3);
  EXPECT_EQ((*sel)->verdicts(0), v1::VERDICT_CLEAN);
  EXPECT_EQ((*sel)->verdicts(1), v1::VERDICT_UNKNOWN);
  EXPECT_EQ((*sel)->verdicts(2), v1::VERDICT_FABRIC);

  sel = ParseSpanSelection(Parse({"--stalls"}), false, false);
  ASSERT_TRUE(sel.ok());
  ASSERT_TRUE(sel->has_value());
  EXPECT_TRUE((*sel)->stalls());
  EXPECT_EQ((*sel)->verdicts_size(), 0);

  sel = ParseSpanSelection(Parse({"--all"}), false, false);
  ASSERT_TRUE(sel.ok());
  EXPECT_FALSE(sel->has_value());

  sel = ParseSpanSelection(Parse({"--verdict=bogus"}), false, false);
  ASSERT_FALSE(sel.ok());
  EXPECT_NE(sel.status().message().find("invalid value \"bogus\" for flag --verdict"),
            std::string::npos);
  EXPECT_FALSE(ParseSpanSelection(Parse({"--all", "--stalls"}), false, false).ok());
}

// A failed call says what to check next where the status tells it.
TEST(CallHintTest, RefusedSlowAndOlderDaemonsGetANextStep) {
  EXPECT_NE(CallHint(14, "127.0.0.1:9479")
                .find("is fabricscoped running and serving gRPC on "
                      "127.0.0.1:9479?"),
            std::string::npos);  // UNAVAILABLE
  EXPECT_NE(CallHint(14, "h:1").find("--server HOST:PORT"), std::string::npos);
  EXPECT_NE(CallHint(4, "h:1").find("did not answer in time"), std::string::npos);
  EXPECT_NE(CallHint(12, "h:1").find("older than this CLI"), std::string::npos);
  EXPECT_EQ(CallHint(3, "h:1"), "");  // INVALID_ARGUMENT: the message says it
}

TEST(LimitTest, DefaultForHumansNoneForJsonZeroMeansAll) {
  EXPECT_EQ(*ParseLimit(Parse({}), /*json=*/false, 50), 50u);
  EXPECT_EQ(*ParseLimit(Parse({}), /*json=*/true, 50), 0u);
  EXPECT_EQ(*ParseLimit(Parse({"--limit=7"}), true, 50), 7u);
  EXPECT_EQ(*ParseLimit(Parse({"--limit", "0"}), false, 50), 0u);
  const auto bad = ParseLimit(Parse({"--limit=-1"}), false, 50);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("flag --limit"), std::string::npos);
  EXPECT_EQ(LeftOutLine(0, "spans"), "");
  EXPECT_EQ(LeftOutLine(1380, "spans"),
            "... 1380 more spans (use --limit N; --limit 0 shows all)\n");
  EXPECT_EQ(LeftOutLine(2, "rows", "hint"), "... 2 more rows (hint)\n");
}

// Pause-time series of eth2 for priorities 0..3: prio 3 moves (1 ms paused
// per 100 ms poll), the others stay flat.
v1::SeriesResponse PauseSeries() {
  v1::SeriesResponse r;
  for (const char* prio : {"0", "1", "2", "3"}) {
    v1::SeriesData* d = r.add_series();
    d->set_netdev("eth2");
    (*d->mutable_labels())["priority"] = prio;
    (*d->mutable_labels())["direction"] = "rx";
    d->set_scale(1e-6);
    for (int i = 0; i < 5; ++i) {
      v1::SeriesSample* s = d->add_samples();
      s->set_ts_unix_nano(1'000'000'000 + i * 100'000'000ull);
      s->set_raw(std::string(prio) == "3" ? 1000u * i : 7u);
    }
  }
  v1::SeriesData* port_wide = r.add_series();  // no priority: always shown
  port_wide->set_netdev("eth2");
  port_wide->set_scale(1);
  return r;
}

// The pfc_enabled gauges of eth2: priority 1 on (newest sample), 2 turned off.
v1::SeriesResponse PfcEnabled() {
  v1::SeriesResponse r;
  for (const auto& [prio, values] :
       std::vector<std::pair<std::string, std::vector<int>>>{{"1", {0, 1}}, {"2", {1, 0}}}) {
    v1::SeriesData* d = r.add_series();
    d->set_netdev("eth2");
    (*d->mutable_labels())["priority"] = prio;
    for (int v : values) d->add_samples()->set_raw(static_cast<uint64_t>(v));
  }
  return r;
}

std::vector<std::string> RowPriorities(const std::string& json) {
  std::vector<std::string> out;
  for (size_t at = json.find("\"priority\":\""); at != std::string::npos;
       at = json.find("\"priority\":\"", at + 1)) {
    const size_t from = at + 12;
    out.push_back(json.substr(from, json.find('"', from) - from));
  }
  return out;
}

TopModel Model() {
  TopModel m;
  v1::PortsResponse ports;
  v1::Port* p = ports.add_ports();
  p->set_device("mlx5_0");
  p->set_port(1);
  p->set_netdev("eth2");
  m.SetPorts(ports);
  m.Update(TopColumn::kPause, PauseSeries(), 400'000'000);
  return m;
}

TEST(TopPriorityFilterTest, ShowsPfcEnabledOrMovedPrioritiesAndThePortRow) {
  TopModel m = Model();
  m.SetPfcEnabled(PfcEnabled());
  const std::string json = m.RenderJson(2'000'000'000);
  // "-" (port-wide), 1 (PFC on), 3 (moved); 0 (neither) and 2 (PFC off now) hidden.
  EXPECT_EQ(RowPriorities(json), (std::vector<std::string>{"-", "1", "3"})) << json;
  EXPECT_NE(json.find("\"hidden_idle_rows\":2,\"left_out_rows\":0"), std::string::npos) << json;
  const std::string human = m.RenderHuman(2'000'000'000);
  EXPECT_NE(human.find("2 idle priority rows hidden"), std::string::npos) << human;
  EXPECT_NE(human.find("--all-priorities"), std::string::npos) << human;

  // Without any PFC gauge only the moved priority is left.
  TopModel bare = Model();
  EXPECT_EQ(RowPriorities(bare.RenderJson(2'000'000'000)), (std::vector<std::string>{"-", "3"}));
}

TEST(TopPriorityFilterTest, AllPrioritiesShowsEveryRowAndLimitBoundsThem) {
  TopModel m = Model();
  m.set_all_priorities(true);
  std::string json = m.RenderJson(2'000'000'000);
  EXPECT_EQ(RowPriorities(json), (std::vector<std::string>{"-", "0", "1", "2", "3"})) << json;
  EXPECT_NE(json.find("\"hidden_idle_rows\":0"), std::string::npos);
  EXPECT_EQ(m.RenderHuman(2'000'000'000).find("hidden"), std::string::npos);

  m.set_limit(2);
  json = m.RenderJson(2'000'000'000);
  EXPECT_EQ(RowPriorities(json), (std::vector<std::string>{"-", "0"})) << json;
  EXPECT_NE(json.find("\"left_out_rows\":3"), std::string::npos) << json;
  EXPECT_NE(m.RenderHuman(2'000'000'000).find("... 3 more rows (use --limit N"), std::string::npos);
}

}  // namespace
}  // namespace fabricscope::cli
