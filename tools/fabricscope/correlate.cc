#include "tools/fabricscope/correlate.h"

#include <cctype>
#include <iostream>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {

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

// "eth2 prio 3 rx", "mlx5_0/1", "mlx5_0/1 eth2", "eth2 -> leaf07 Ethernet1/12 prio 3 rx".
std::string Where(const v1::SignalCorrelation& s) {
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

}  // namespace

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
        ",\"signals\":[");
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
      {.values = {"trace-id", "span-id", "since", "name", "limit"},
       .bools = {"all-series"},
       .usage = "usage: fabricscope correlate --trace-id HEX | --span-id HEX | --since DUR "
                "[--name N] [--all-series] [--limit N] [--server HOST:PORT] "
                "[--output human|json]\n"});
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
  if (flags.Has("limit")) {
    int limit;
    if (!absl::SimpleAtoi(flags.Get("limit"), &limit) || limit <= 0) {
      return run->Usage("--limit must be a positive integer");
    }
    req.set_limit(static_cast<uint32_t>(limit));
  }
  req.set_include_all_series(flags.Has("all-series"));

  auto stub = MakeQueryStub(run->server());
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::CorrelateResponse resp;
  grpc::Status s = stub->Correlate(&call, req, &resp);
  if (!s.ok()) return run->CallFailed(s.error_message());
  out << (run->json() ? CorrelateJson(resp) : CorrelateHuman(resp));
  return kExitOk;
}

}  // namespace fabricscope::cli
