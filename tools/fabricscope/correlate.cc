#include "tools/fabricscope/correlate.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "daemon/query/query_engine.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {

constexpr uint32_t kCorrelateDefaultLimit = 50;

Verdict FromProto(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_FABRIC:
      return Verdict::kFabric;
    case v1::VERDICT_CLEAN:
      return Verdict::kClean;
    default:
      return Verdict::kUnknown;
  }
}

int64_t Duration(const v1::SpanVerdict& v) {
  return static_cast<int64_t>(v.end_unix_nano() - v.start_unix_nano());
}

// "03:12:01.123" (UTC).
std::string FormatTimeOfDay(int64_t ns) {
  return absl::FormatTime("%H:%M:%E3S", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

absl::string_view VerdictText(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_FABRIC:
      return "fabric";
    case v1::VERDICT_CLEAN:
      return "clean";
    case v1::VERDICT_UNKNOWN:
      return "unknown";
    default:
      return "unspecified";
  }
}

// "eth2 prio 3 rx", "mlx5_0/1", "mlx5_0/1 eth2", "eth2 -> leaf07 Ethernet1/12 prio 3 rx"
// (a SignalCorrelation or a FabricGroup).
template <typename Message>
std::string Where(const Message& s) {
  std::string w;
  if (!s.device().empty())
    absl::StrAppend(&w, s.device(), s.port() ? absl::StrCat("/", s.port()) : "");
  if (!s.netdev().empty()) absl::StrAppend(&w, w.empty() ? "" : " ", s.netdev());
  absl::StrAppend(&w, PartnerArrow(s));
  if (!s.priority().empty()) absl::StrAppend(&w, " prio ", s.priority());
  if (!s.direction().empty()) absl::StrAppend(&w, " ", s.direction());
  return w;
}

// The signal and, where the family has one, its counter/reason label:
// "rdma_errors out_of_sequence", "discards rx_discards_phy",
// "pfc_pause_seconds".
std::string SignalWithCounter(const std::string& signal, const std::string& counter) {
  return counter.empty() ? signal : absl::StrCat(signal, " ", counter);
}

// Where a blind series is: "mlx5_0/1", "eth2 prio 3 rx".
std::string BlindWhere(const v1::BlindSeries& b) {
  std::string w;
  if (!b.device().empty())
    absl::StrAppend(&w, b.device(), b.port() ? absl::StrCat("/", b.port()) : "");
  if (!b.netdev().empty()) absl::StrAppend(&w, w.empty() ? "" : " ", b.netdev());
  if (!b.priority().empty()) absl::StrAppend(&w, " prio ", b.priority());
  if (!b.direction().empty()) absl::StrAppend(&w, " ", b.direction());
  return w;
}

std::string HowMuch(const v1::SignalCorrelation& s) {
  if (!s.superseded_by().empty()) {
    return absl::StrCat("superseded by ", s.superseded_by(),
                        s.blind().empty() ? "" : absl::StrCat(" (", s.blind(), ")"));
  }
  if (!s.blind().empty()) {
    return absl::StrFormat("blind: %s (covered %.0f%% of the span; %s/%s)", s.blind(),
                           100 * s.coverage(), s.source(), s.raw_name());
  }
  if (s.signal_class() == "pause") {
    return absl::StrFormat("paused %.1f%% of the span (%.1fms; baseline %.1f%%, peak %.1f%%)",
                           100 * s.pause_fraction(), s.delta() * 1e3, 100 * s.baseline_rate(),
                           100 * s.peak_rate());
  }
  return absl::StrFormat("%s/s vs baseline %s/s (peak %s/s, +%s in the span)", FormatRate(s.rate()),
                         FormatRate(s.baseline_rate()), FormatRate(s.peak_rate()),
                         FormatRate(s.delta()));
}

// One series of a span: rank, signal with its counter, where, how much.
std::string SeriesLine(const v1::SignalCorrelation& s, int rank) {
  return absl::StrFormat("    %s #%d %-20s %-22s %s  score %.1f\n", s.anomalous() ? "!" : " ", rank,
                         SignalWithCounter(s.signal(), s.counter()), Where(s), HowMuch(s),
                         s.score());
}

// The span's blind series (not judged), one line each, at most kBlindShown.
std::string BlindLines(const v1::SpanVerdict& v) {
  constexpr int kBlindShown = 8;
  std::string out;
  for (int i = 0; i < v.blind_size() && i < kBlindShown; ++i) {
    const v1::BlindSeries& b = v.blind(i);
    absl::StrAppend(&out, "    blind: ", SignalWithCounter(b.signal(), b.counter()), " ",
                    BlindWhere(b), " ", b.why(), " (", b.source(), "/", b.raw_name(),
                    "): not judged\n");
  }
  if (v.blind_size() > kBlindShown) {
    absl::StrAppend(&out, "    blind: ", v.blind_size() - kBlindShown,
                    " more (--output json lists them)\n");
  }
  return out;
}

// The per-span JSON list of blind series.
std::string BlindJson(const v1::SpanVerdict& v) {
  std::string out = "[";
  for (int i = 0; i < v.blind_size(); ++i) {
    const v1::BlindSeries& b = v.blind(i);
    absl::StrAppend(
        &out, i ? "," : "", "{\"signal\":", JsonString(b.signal()),
        ",\"counter\":", JsonString(b.counter()), ",\"device\":", JsonString(b.device()),
        ",\"port\":", b.port(), ",\"netdev\":", JsonString(b.netdev()),
        ",\"priority\":", JsonString(b.priority()), ",\"direction\":", JsonString(b.direction()),
        ",\"why\":", JsonString(b.why()), ",\"source\":", JsonString(b.source()),
        ",\"raw_name\":", JsonString(b.raw_name()), "}");
  }
  absl::StrAppend(&out, "]");
  return out;
}

// "1401 clean, 2 fabric, 20 unknown" (zeros left out; "" when all are 0).
std::string ByVerdict(uint32_t clean, uint32_t fabric, uint32_t unknown) {
  std::vector<std::string> parts;
  if (clean) parts.push_back(absl::StrCat(clean, " clean"));
  if (fabric) parts.push_back(absl::StrCat(fabric, " fabric"));
  if (unknown) parts.push_back(absl::StrCat(unknown, " unknown"));
  return absl::StrJoin(parts, ", ");
}

// "pfc_pause_seconds rx prio 3", "rdma_errors out_of_sequence".
std::string BlamedName(const v1::BlamedSignal& b) {
  std::string out = SignalWithCounter(b.signal(), b.counter());
  if (!b.direction().empty()) absl::StrAppend(&out, " ", b.direction());
  if (!b.priority().empty()) absl::StrAppend(&out, " prio ", b.priority());
  return out;
}

// A cost in the unit people read it in: a duration, a per-token duration, or
// a bandwidth for a time per byte.
std::string CostText(const std::string& kind, double seconds) {
  if (kind == "time_per_byte") {
    if (seconds <= 0) return "-";
    return absl::StrCat(absl::StrFormat("%.1f", 1e-9 / seconds), " GB/s");
  }
  return FormatDurationShort(static_cast<int64_t>(seconds * 1e9));
}

absl::string_view CostName(const std::string& kind) {
  if (kind == "time_per_output_token") return "TPOT";
  if (kind == "time_per_prompt_token") return "prefill per token";
  if (kind == "time_per_byte") return "bandwidth";
  return "duration";
}

// "stall: TPOT 81ms vs learned 20ms (p50 10ms, p99 24ms, 1840 samples; vllm llama decode)";
// "" when nothing decided the stall.
std::string StallCheckLine(const v1::SpanVerdict& v) {
  if (!v.has_stall_check()) return "";
  const v1::StallCheck& c = v.stall_check();
  const std::string& k = c.cost_kind();
  std::string line = absl::StrCat("    stall: ", CostName(k), " ", CostText(k, c.cost_seconds()));
  if (c.source() == "flag") {
    absl::StrAppend(&line, ", flagged fabricscope.stall=true");
  } else if (c.source() == "configured") {
    absl::StrAppend(&line, " vs configured ", CostText("duration", c.bound_seconds()),
                    " (--stall-thresholds)");
  } else if (c.source() == "learned") {
    absl::StrAppend(&line, " vs learned ", CostText(k, c.bound_seconds()));
  } else {
    absl::StrAppend(&line, ", no bound yet");
  }
  if (c.samples() > 0 && c.median_seconds() > 0) {
    absl::StrAppend(&line, " (p50 ", CostText(k, c.median_seconds()), ", p99 ",
                    CostText(k, c.p99_seconds()), ", ", c.samples(), " samples; ", c.key(), ")");
  } else if (!c.key().empty()) {
    absl::StrAppend(&line, " (", c.samples(), " samples; ", c.key(), ")");
  }
  absl::StrAppend(&line, "\n");
  if (v.window_end_unix_nano() > v.window_start_unix_nano()) {
    absl::StrAppend(&line, "    judged: ", v.phase().empty() ? "window" : v.phase(), " ",
                    FormatDurationShort(static_cast<int64_t>(v.window_end_unix_nano() -
                                                             v.window_start_unix_nano())),
                    " from ", FormatUnixNano(static_cast<int64_t>(v.window_start_unix_nano())),
                    "\n");
  }
  return line;
}

// "    step: AllReduce 60.0ms at ...  bandwidth 0.1 GB/s vs learned 0.6 GB/s"
std::string StepLines(const v1::SpanVerdict& v) {
  std::string out;
  for (const v1::StepEvidence& e : v.steps()) {
    const v1::StallCheck& c = e.stall_check();
    absl::StrAppend(
        &out, "    step: ", e.name(), " ",
        FormatDurationShort(static_cast<int64_t>(e.end_unix_nano() - e.start_unix_nano())), " at ",
        FormatUnixNano(static_cast<int64_t>(e.start_unix_nano())), "  ", CostName(c.cost_kind()),
        " ", CostText(c.cost_kind(), c.cost_seconds()), " vs learned ",
        CostText(c.cost_kind(), c.bound_seconds()), "  span ", Hex(e.span_id()), "\n");
  }
  return out;
}

std::string StepsJson(const v1::SpanVerdict& v) {
  std::string out = ",\"steps\":[";
  for (int i = 0; i < v.steps_size(); ++i) {
    const v1::StepEvidence& e = v.steps(i);
    absl::StrAppend(&out, i ? "," : "", "{\"trace_id\":", JsonString(Hex(e.trace_id())),
                    ",\"span_id\":", JsonString(Hex(e.span_id())),
                    ",\"name\":", JsonString(e.name()),
                    ",\"start_unix_nano\":", e.start_unix_nano(),
                    ",\"end_unix_nano\":", e.end_unix_nano(), ",\"gpu\":", JsonString(e.gpu()),
                    ",\"cost_kind\":", JsonString(e.stall_check().cost_kind()),
                    ",\"cost_seconds\":", JsonNumber(e.stall_check().cost_seconds()),
                    ",\"bound_seconds\":", JsonNumber(e.stall_check().bound_seconds()), "}");
  }
  return out + "]";
}

std::string StallCheckJson(const v1::SpanVerdict& v) {
  std::string out =
      absl::StrCat(",\"kind\":", JsonString(v.kind()), ",\"service\":", JsonString(v.service()),
                   ",\"model\":", JsonString(v.model()), ",\"phase\":", JsonString(v.phase()),
                   ",\"window_start_unix_nano\":", v.window_start_unix_nano(),
                   ",\"window_end_unix_nano\":", v.window_end_unix_nano());
  if (!v.has_stall_check()) return out;
  const v1::StallCheck& c = v.stall_check();
  absl::StrAppend(&out, ",\"stall_check\":{\"source\":", JsonString(c.source()),
                  ",\"cost_kind\":", JsonString(c.cost_kind()),
                  ",\"cost_seconds\":", JsonNumber(c.cost_seconds()),
                  ",\"bound_seconds\":", JsonNumber(c.bound_seconds()),
                  ",\"median_seconds\":", JsonNumber(c.median_seconds()),
                  ",\"p99_seconds\":", JsonNumber(c.p99_seconds()), ",\"samples\":", c.samples(),
                  ",\"key\":", JsonString(c.key()), "}");
  return out;
}

}  // namespace

std::string CorrelateSummaryLine(const v1::CorrelateSummary& s) {
  std::string out = absl::StrCat(s.spans(), s.spans() == 1 ? " span" : " spans");
  const std::string spans = ByVerdict(s.clean(), s.fabric(), s.unknown());
  if (!spans.empty()) absl::StrAppend(&out, ": ", spans);
  absl::StrAppend(&out, "; ", s.stalls(), s.stalls() == 1 ? " stall" : " stalls");
  const std::string stalls = ByVerdict(s.stalls_clean(), s.stalls_fabric(), s.stalls_unknown());
  if (!stalls.empty()) absl::StrAppend(&out, ": ", stalls);
  if (s.blamed_size() > 0) {
    absl::StrAppend(&out, "; stalls blamed on: ",
                    absl::StrJoin(s.blamed(), ", ", [](std::string* o, const v1::BlamedSignal& b) {
                      absl::StrAppend(o, BlamedName(b), " (", b.spans(), ")");
                    }));
  }
  return out;
}

namespace {

// The summary's fabric groups, one line each, under a heading ("" when none).
std::string FabricGroupLines(const v1::CorrelateSummary& s) {
  if (s.fabric_groups_size() == 0) return "";
  const uint32_t not_stalls = s.fabric() - std::min(s.fabric(), s.stalls_fabric());
  std::string out = absl::StrCat("fabric spans that were not stalls (", not_stalls,
                                 "), by the port and signal that explained them:\n");
  for (const v1::FabricGroup& g : s.fabric_groups()) {
    const std::string peak = g.signal_class() == "pause"
                                 ? absl::StrFormat("paused up to %.1f%% of a span", 100 * g.peak())
                                 : absl::StrCat("peak ", FormatRate(g.peak()), "/s");
    absl::StrAppend(
        &out, absl::StrFormat("  %5d %-5s %-20s %-22s %s .. %s  %s, score up to %.1f\n", g.spans(),
                              g.spans() == 1 ? "span" : "spans",
                              SignalWithCounter(g.signal(), g.counter()), Where(g),
                              FormatTimeOfDay(static_cast<int64_t>(g.first_start_unix_nano())),
                              FormatTimeOfDay(static_cast<int64_t>(g.last_end_unix_nano())), peak,
                              g.peak_score()));
  }
  if (s.fabric_groups_left_out() > 0) {
    absl::StrAppend(&out, "  ... ", s.fabric_groups_left_out(),
                    " more groups (--verdict fabric lists each span)\n");
  }
  return out;
}

}  // namespace

std::string CorrelateSummaryJson(const v1::CorrelateSummary& s) {
  std::string out = absl::StrCat(
      "{\"spans\":", s.spans(), ",\"verdicts\":{\"fabric\":", s.fabric(), ",\"clean\":", s.clean(),
      ",\"unknown\":", s.unknown(), "},\"stalls\":", s.stalls(),
      ",\"stall_verdicts\":{\"fabric\":", s.stalls_fabric(), ",\"clean\":", s.stalls_clean(),
      ",\"unknown\":", s.stalls_unknown(), "},\"blamed\":[");
  for (int i = 0; i < s.blamed_size(); ++i) {
    const v1::BlamedSignal& b = s.blamed(i);
    absl::StrAppend(&out, i ? "," : "", "{\"signal\":", JsonString(b.signal()),
                    ",\"counter\":", JsonString(b.counter()),
                    ",\"direction\":", JsonString(b.direction()),
                    ",\"priority\":", JsonString(b.priority()), ",\"spans\":", b.spans(), "}");
  }
  absl::StrAppend(&out, "],\"not_selected\":", s.not_selected(), ",\"over_limit\":", s.over_limit(),
                  ",\"fabric_groups\":[");
  for (int i = 0; i < s.fabric_groups_size(); ++i) {
    const v1::FabricGroup& g = s.fabric_groups(i);
    absl::StrAppend(
        &out, i ? "," : "", "{\"signal\":", JsonString(g.signal()),
        ",\"signal_class\":", JsonString(g.signal_class()),
        ",\"counter\":", JsonString(g.counter()), ",\"device\":", JsonString(g.device()),
        ",\"port\":", g.port(), ",\"netdev\":", JsonString(g.netdev()),
        ",\"priority\":", JsonString(g.priority()), ",\"direction\":", JsonString(g.direction()),
        ",\"spans\":", g.spans(), ",\"first_start_unix_nano\":", g.first_start_unix_nano(),
        ",\"last_end_unix_nano\":", g.last_end_unix_nano(), ",\"peak\":", JsonNumber(g.peak()),
        ",\"peak_score\":", JsonNumber(g.peak_score()), PartnerJsonMember(g), "}");
  }
  absl::StrAppend(&out, "],\"fabric_groups_left_out\":", s.fabric_groups_left_out(), "}");
  return out;
}

std::string CorrelateReportHuman(const v1::CorrelateResponse& response) {
  const v1::CorrelateSummary& s = response.summary();
  if (s.spans() == 0 && response.spans_size() == 0) return "no spans matched\n";
  std::string out = absl::StrCat(CorrelateSummaryLine(s), "\n");
  // The stalls first, fabric-bound and longest first; then what the fabric
  // did to spans that did not stall, one line per port and signal; then any
  // other selected spans in start order.
  v1::CorrelateResponse stalls;
  v1::CorrelateResponse others;
  for (const v1::SpanVerdict& v : response.spans()) {
    *(v.stall() ? stalls.add_spans() : others.add_spans()) = v;
  }
  std::stable_sort(stalls.mutable_spans()->begin(), stalls.mutable_spans()->end(),
                   [](const v1::SpanVerdict& a, const v1::SpanVerdict& b) {
                     return StallRanksBefore(FromProto(a.verdict()), Duration(a),
                                             static_cast<int64_t>(a.start_unix_nano()),
                                             FromProto(b.verdict()), Duration(b),
                                             static_cast<int64_t>(b.start_unix_nano()));
                   });
  if (stalls.spans_size() > 0) {
    absl::StrAppend(&out, "\nstalls, fabric-bound and longest first:\n", CorrelateHuman(stalls));
  }
  absl::StrAppend(
      &out, LeftOutLine(s.over_limit(), "selected spans", "use --limit N; --limit 0 shows all"));
  const std::string groups = FabricGroupLines(s);
  if (!groups.empty()) absl::StrAppend(&out, "\n", groups);
  if (others.spans_size() > 0) absl::StrAppend(&out, "\n", CorrelateHuman(others));
  absl::StrAppend(
      &out, LeftOutLine(s.not_selected(), "spans not listed", "use --verdict, --stalls or --all"));
  return out;
}

std::string CorrelateReportJson(const v1::CorrelateResponse& response) {
  std::string spans = CorrelateJson(response);
  while (!spans.empty() && spans.back() == '\n') spans.pop_back();
  return absl::StrCat("{\"summary\":", CorrelateSummaryJson(response.summary()),
                      ",\n\"spans\":", spans, "}\n");
}

absl::StatusOr<std::optional<v1::SpanSelection>> ParseSpanSelection(const Flags& flags,
                                                                    bool default_all,
                                                                    bool grouped) {
  if (flags.Has("all")) {
    if (flags.Has("verdict") || flags.Has("stalls")) {
      return absl::InvalidArgumentError("--all selects every span: drop --verdict and --stalls");
    }
    return std::nullopt;
  }
  if (!flags.Has("verdict") && !flags.Has("stalls")) {
    if (default_all) return std::nullopt;
    v1::SpanSelection sel;  // the answers first: stalls and fabric spans
    sel.set_stalls(true);
    // The human output groups the fabric spans that are not stalls (from the
    // summary) instead of listing each.
    if (!grouped) sel.add_verdicts(v1::VERDICT_FABRIC);
    return sel;
  }
  v1::SpanSelection sel;
  sel.set_stalls(flags.Has("stalls"));
  for (const std::string& value : flags.GetAll("verdict")) {
    for (absl::string_view v : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
      if (v == "fabric") {
        sel.add_verdicts(v1::VERDICT_FABRIC);
      } else if (v == "clean") {
        sel.add_verdicts(v1::VERDICT_CLEAN);
      } else if (v == "unknown") {
        sel.add_verdicts(v1::VERDICT_UNKNOWN);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "invalid value \"", v, "\" for flag --verdict: want fabric, clean or unknown"));
      }
    }
  }
  return sel;
}

// ,"pod":{...} when the span is attributed to a pod.
std::string PodJson(const v1::SpanVerdict& v) {
  if (!v.has_pod()) return "";
  const v1::PodRef& p = v.pod();
  return absl::StrCat(",\"pod\":{\"namespace\":", JsonString(p.namespace_()),
                      ",\"name\":", JsonString(p.name()),
                      ",\"container\":", JsonString(p.container()),
                      ",\"uid\":", JsonString(p.uid()), ",\"via\":", JsonString(p.via()), "}");
}

// "    pod: ns/name/container (via ...)\n" when the span is attributed to a pod.
std::string PodLine(const v1::SpanVerdict& v) {
  if (!v.has_pod()) return "";
  const v1::PodRef& p = v.pod();
  std::string name = p.name().empty() ? absl::StrCat("uid ", p.uid())
                                      : absl::StrCat(p.namespace_(), "/", p.name());
  if (!p.container().empty()) absl::StrAppend(&name, "/", p.container());
  return absl::StrCat("    pod: ", name, p.via().empty() ? "" : absl::StrCat(" (", p.via(), ")"),
                      "\n");
}

std::string CorrelateJson(const v1::CorrelateResponse& response) {
  std::string out = "[";
  for (int i = 0; i < response.spans_size(); ++i) {
    const v1::SpanVerdict& v = response.spans(i);
    absl::StrAppend(
        &out, i ? ",\n " : "\n ", "{\"trace_id\":", JsonString(Hex(v.trace_id())),
        ",\"span_id\":", JsonString(Hex(v.span_id())), ",\"name\":", JsonString(v.name()),
        ",\"start_unix_nano\":", v.start_unix_nano(), ",\"end_unix_nano\":", v.end_unix_nano(),
        ",\"stall\":", v.stall() ? "true" : "false",
        ",\"verdict\":", JsonString(VerdictText(v.verdict())),
        ",\"reason\":", JsonString(v.reason()), ",\"scope\":", JsonString(v.scope()),
        StallCheckJson(v), StepsJson(v), PodJson(v), ",\"signals\":[");
    for (int j = 0; j < v.signals_size(); ++j) {
      const v1::SignalCorrelation& s = v.signals(j);
      absl::StrAppend(
          &out, j ? "," : "", "{\"signal\":", JsonString(s.signal()),
          ",\"signal_class\":", JsonString(s.signal_class()),
          ",\"device\":", JsonString(s.device()), ",\"port\":", s.port(),
          ",\"netdev\":", JsonString(s.netdev()), ",\"priority\":", JsonString(s.priority()),
          ",\"direction\":", JsonString(s.direction()), ",\"counter\":", JsonString(s.counter()),
          ",\"delta\":", JsonNumber(s.delta()), ",\"rate\":", JsonNumber(s.rate()),
          ",\"baseline_rate\":", JsonNumber(s.baseline_rate()),
          ",\"peak_rate\":", JsonNumber(s.peak_rate()),
          ",\"pause_fraction\":", JsonNumber(s.pause_fraction()),
          ",\"score\":", JsonNumber(s.score()), ",\"anomalous\":", s.anomalous() ? "true" : "false",
          ",\"blind\":", JsonString(s.blind()),
          ",\"superseded_by\":", JsonString(s.superseded_by()),
          ",\"coverage\":", JsonNumber(s.coverage()), PartnerJsonMember(s), "}");
    }
    absl::StrAppend(&out, "],\"blind\":", BlindJson(v), "}");
  }
  absl::StrAppend(&out, response.spans_size() ? "\n]\n" : "]\n");
  return out;
}

std::string CorrelateHuman(const v1::CorrelateResponse& response) {
  if (response.spans_size() == 0) return "no spans matched\n";
  std::string out;
  for (const v1::SpanVerdict& v : response.spans()) {
    std::string verdict(VerdictText(v.verdict()));
    for (char& c : verdict) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    absl::StrAppend(
        &out, FormatUnixNano(static_cast<int64_t>(v.start_unix_nano())), "  ", v.name(), "  ",
        FormatDurationShort(static_cast<int64_t>(v.end_unix_nano() - v.start_unix_nano())),
        v.stall() ? "  STALL" : "", "  ", verdict, "  trace ", Hex(v.trace_id()), " span ",
        Hex(v.span_id()), "\n");
    if (v.verdict() != v1::VERDICT_FABRIC) absl::StrAppend(&out, "    ", v.reason(), "\n");
    if (v.stall()) absl::StrAppend(&out, StallCheckLine(v));
    absl::StrAppend(&out, StepLines(v));
    absl::StrAppend(&out, PodLine(v));
    if (!v.scope().empty()) absl::StrAppend(&out, "    scope: ", v.scope(), "\n");
    int rank = 0;
    for (const v1::SignalCorrelation& s : v.signals()) absl::StrAppend(&out, SeriesLine(s, ++rank));
    absl::StrAppend(&out, BlindLines(v));
  }
  return out;
}

int RunCorrelate(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  const auto run = Invocation::Start(
      ctx, "correlate", args,
      {.values = {"trace-id", "span-id", "since", "name", "pod", "limit", "verdict"},
       .bools = {"all-series", "stalls", "all"},
       .usage = "usage: fabricscope correlate --trace-id HEX | --span-id HEX | --since DUR "
                "[--name N] [--pod NAMESPACE/POD] [--verdict fabric|clean|unknown]... [--stalls] "
                "[--all] "
                "[--all-series] [--limit N] [--server HOST:PORT] [--output human|json]\n"
                "  after a summary line, the stalls (fabric-bound and longest first), then\n"
                "  the other fabric spans grouped by port and signal (json: each listed)\n"
                "  (with --since; --trace-id/--span-id: every span); --verdict/--stalls/--all\n"
                "  list others; --limit N: at most N spans, stalls first (default 50; json:\n"
                "  no limit; 0: all)\n"});
  if (!run) return kExitUsage;
  const Flags& flags = run->flags();
  const int selectors = flags.Has("trace-id") + flags.Has("span-id") + flags.Has("since");
  if (selectors != 1) {
    return run->Usage("exactly one of --trace-id, --span-id, --since is required");
  }
  v1::CorrelateRequest req;
  if (flags.Has("trace-id")) {
    auto id = ParseHexId(flags.Get("trace-id"), 16, "trace-id");
    if (!id.ok()) return run->Usage(id.status().message());
    req.set_trace_id(*id);
  } else if (flags.Has("span-id")) {
    auto id = ParseHexId(flags.Get("span-id"), 8, "span-id");
    if (!id.ok()) return run->Usage(id.status().message());
    req.set_span_id(*id);
  } else {
    auto since = ParseSince(flags.Get("since"));
    if (!since.ok()) return run->Usage(since.status().message());
    const int64_t now = NowUnixNano();
    req.mutable_time_range()->set_from_unix_nano(
        static_cast<uint64_t>(now - absl::ToInt64Nanoseconds(*since)));
    // Spans may end up to a minute in the future (clock skew, ingest limit).
    req.mutable_time_range()->set_to_unix_nano(static_cast<uint64_t>(now + 60'000'000'000));
  }
  if (flags.Has("name")) req.set_name(flags.Get("name"));
  if (flags.Has("pod")) {
    const std::string pod = flags.Get("pod");
    const size_t slash = pod.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == pod.size() ||
        pod.find('/', slash + 1) != std::string::npos) {
      return run->Usage(absl::StrCat("--pod takes NAMESPACE/POD, got \"", pod, "\""));
    }
    req.set_pod(pod);
  }
  auto selection =
      ParseSpanSelection(flags, /*default_all=*/!flags.Has("since"), /*grouped=*/!run->json());
  if (!selection.ok()) return run->Usage(selection.status().message());
  if (*selection) *req.mutable_selection() = **selection;
  auto limit = run->Limit(kCorrelateDefaultLimit);
  if (!limit.ok()) return run->Usage(limit.status().message());
  req.set_max_listed(*limit);
  req.set_include_all_series(flags.Has("all-series"));

  auto stub = MakeQueryStub(run->server());
  grpc::ClientContext call;
  // The daemon judges every span of the range for the summary (a busy host's
  // minute of decode steps is thousands of them).
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(90));
  v1::CorrelateResponse resp;
  grpc::Status s = stub->Correlate(&call, req, &resp);
  if (!s.ok()) return run->CallFailed(s.error_code(), s.error_message());
  if (run->json()) {
    out << CorrelateReportJson(resp);
    run->LeftOut(out, LeftOutLine(resp.summary().over_limit(), "earlier selected spans"));
  } else {
    out << CorrelateReportHuman(resp);
  }
  return kExitOk;
}

}  // namespace fabricscope::cli
