#include "tools/fabricscope/analyze.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "daemon/correlate/correlator.h"
#include "daemon/detect/detectors.h"
#include "daemon/detect/event_log.h"
#include "daemon/query/query_engine.h"
#include "daemon/recording/recording_header.h"
#include "daemon/recording/replay.h"
#include "daemon/service/query_proto.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tools/fabricscope/correlate.h"
#include "tools/fabricscope/events.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {
constexpr uint32_t kAnalyzeDefaultLimit = 50;
}  // namespace

const char kBaselineIncomplete[] = "baseline incomplete";

int RunAnalyze(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  std::vector<std::string> rest;
  std::string file;
  // The first operand that is not the value of a "--flag value" pair.
  const std::vector<std::string> value_flags = {"--stall-thresholds", "--verdict", "--limit"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 && file.empty()) {
      file = a;
      continue;
    }
    rest.push_back(a);
    if (std::find(value_flags.begin(), value_flags.end(), a) != value_flags.end() &&
        i + 1 < args.size()) {
      rest.push_back(args[++i]);
    }
  }
  const auto run = Invocation::Start(
      ctx, "analyze", rest,
      {.values = {"stall-thresholds", "verdict", "limit"},
       .bools = {"stalls", "all"},
       .usage = "usage: fabricscope analyze FILE [--stall-thresholds=NAME=DUR,...] "
                "[--verdict fabric|clean|unknown]... [--stalls] [--all] [--limit N]\n"
                "  lists the events, a summary line of the spans, then the stalls and fabric\n"
                "  spans (--verdict/--stalls/--all select others, as in correlate); --limit N:\n"
                "  at most the latest N events and N spans (stalls first; default 50; json: no\n"
                "  limit; 0: all)\n"},
      file.empty() ? "a recording file is required" : "");
  if (!run) return kExitUsage;
  auto selection =
      ParseSpanSelection(run->flags(), /*default_all=*/false, /*grouped=*/!run->json());
  if (!selection.ok()) return run->Usage(selection.status().message());
  auto limit = run->Limit(kAnalyzeDefaultLimit);
  if (!limit.ok()) return run->Usage(limit.status().message());
  auto thresholds = StallPolicy::Parse(run->flags().Get("stall-thresholds"));
  if (!thresholds.ok()) {
    return run->Usage(absl::StrCat("--stall-thresholds: ", thresholds.status().message()));
  }

  // The recording's header (its first line, when `fabricscope record` wrote
  // it): the daemon's options, applied before anything is built, so the
  // verdicts are the daemon's; --stall-thresholds given here still wins.
  std::optional<RecordingHeader> header;
  (void)ForEachLine(file, [&](size_t, absl::string_view line) {
    auto l = ParseRecordingLine(line);
    if (l.ok() && l->type == RecordingLine::kHeader) header = std::move(l->header);
    return false;  // the first line only
  });
  AnalysisSettings settings;
  if (header.has_value()) {
    if (absl::Status s = ApplyRecordedOptions(header->options, &settings); !s.ok()) {
      run->Say() << file << ": " << s.message() << "; analysing with the defaults\n";
      settings = AnalysisSettings{};
    }
  }
  if (run->flags().Has("stall-thresholds")) settings.learn.thresholds = *thresholds;

  StoreOptions store_options;
  store_options.memory_bytes = 2ull << 30;  // the whole recording, within reason
  Store store(store_options);
  PortInventory ports;  // the ports the recording names (its header's first)
  EventLog events(1'000'000, nullptr);
  DetectorEngine detectors(settings.detect, &ports, &events, nullptr);
  store.SetObserver(&detectors);
  RecordingFeeder feeder(&store, &ports);
  // Stalls as the daemon judged them where the recording says (each span's
  // judgement); else learned in recording order, --stall-thresholds winning
  // for the names they list.
  StallLearner learner(settings.learn, /*metrics=*/nullptr);
  feeder.SetStallLearner(&learner);
  std::vector<Span> spans;
  absl::Status read = ForEachLine(file, [&](size_t line_no, absl::string_view line) {
    feeder.Feed(line_no, line, &spans);
    return true;
  });
  if (!read.ok()) return run->Fail(read.message());
  const RecordingStats& st = feeder.stats();
  for (const std::string& m : st.messages) run->Say() << file << ": " << m << "\n";
  const uint64_t problems =
      st.malformed + st.unknown_counters + st.out_of_order + st.rejected_spans;
  if (problems > st.messages.size()) {
    run->Say() << problems - st.messages.size() << " more problems not shown\n";
  }

  // The daemon's query engine over the recording: every event it raised and
  // each recorded span's verdict, in the messages the daemon would send.
  Correlator correlator(&store, &ports, settings.correlation,
                        StallPolicy(settings.learn.thresholds));
  const QueryEngine engine(/*spans=*/nullptr, &correlator, &store, &ports, &events,
                           RealClock::Get());
  const HostTopology topology = ports.Topology();
  EventsQuery every_event;
  every_event.time_range = {INT64_MIN, INT64_MAX};
  every_event.limit = *limit;
  size_t events_left_out = 0;
  auto listed = engine.Events(every_event, &events_left_out);
  if (!listed.ok()) return run->Fail(listed.status().message());  // the range is valid
  v1::EventsResponse ev;
  for (const DetectorEvent& e : *listed) EventToProto(e, ev.add_events(), &topology);
  ev.set_left_out(static_cast<uint32_t>(events_left_out));
  // The spans as Query.Correlate would answer them: summary, then selection.
  // In a window cut from a daemon's history (a header says so), a span whose
  // baseline window starts before the window is not judged: the daemon had
  // that history, the recording does not. A recording without a header
  // (fabricsim's, a hand-made one) is the whole history: judged on what it
  // holds.
  const int64_t recording_start =
      header.has_value() && header->from_unix_nano > 0 ? header->from_unix_nano : INT64_MIN / 2;
  const int64_t baseline_ns = absl::ToInt64Nanoseconds(settings.correlation.baseline_window);
  size_t incomplete = 0;
  std::vector<CorrelatedSpan> correlated;
  correlated.reserve(spans.size());
  for (const Span& span : spans) {
    SpanCorrelation c = engine.CorrelateSpan(span, /*include_all_series=*/false);
    const int64_t window_start = JudgedWindow(span).first;
    if (window_start - baseline_ns < recording_start) {
      ++incomplete;
      c.verdict = Verdict::kUnknown;
      c.reason = absl::StrCat(kBaselineIncomplete, ": the recording starts ",
                              FormatDurationShort(window_start - recording_start),
                              " before the span, its baseline needs ",
                              FormatDurationShort(baseline_ns), "; not judged");
      c.series.clear();
      c.blind.clear();
    }
    correlated.push_back({std::make_shared<const Span>(span), std::move(c), {}});
  }
  v1::CorrelateRequest as_request;  // the selection in the daemon's terms
  if (*selection) *as_request.mutable_selection() = **selection;
  const CorrelateSummary summary =
      SelectSpans(CorrelateQueryFromProto(as_request).selection, *limit, &correlated);
  v1::CorrelateResponse verdicts;
  CorrelateSummaryToProto(summary, verdicts.mutable_summary(), &topology);
  for (const CorrelatedSpan& c : correlated) {
    FillSpanVerdict(*c.span, c.correlation, verdicts.add_spans(), &topology);
  }
  const std::string events_left = LeftOutLine(events_left_out, "earlier events");
  if (run->json()) {
    std::string events_json = EventsJson(ev);
    std::string spans_json = CorrelateJson(verdicts);
    while (!events_json.empty() && events_json.back() == '\n') events_json.pop_back();
    while (!spans_json.empty() && spans_json.back() == '\n') spans_json.pop_back();
    out << "{\"summary\":" << CorrelateSummaryJson(verdicts.summary())
        << ",\n\"events\":" << events_json << ",\n\"spans\":" << spans_json << "}\n";
    run->LeftOut(out, events_left);
    run->LeftOut(out, LeftOutLine(summary.over_limit, "earlier selected spans"));
  } else {
    out << "recording " << file << ": " << st.samples << " samples, " << st.spans << " spans, "
        << problems << " lines skipped, " << st.unknown_counters
        << " counters without a signal rule ignored\n";
    if (header.has_value()) {
      out << "recorded by fabricscoped " << header->version << ": " << header->ports.size()
          << " ports, " << header->topology.partners.size() << " link partners, "
          << header->pods.devices.size() << " pod devices, " << header->options.size()
          << " options (the daemon's thresholds), " << st.recorded_judgements
          << " spans with the daemon's stall judgement\n";
    } else {
      out << "no header line: the daemon's defaults, no link rates or partners, stalls "
             "learned from this file alone\n";
    }
    if (header.has_value()) {
      out << incomplete << " spans baseline incomplete (their " << FormatDurationShort(baseline_ns)
          << " baseline starts before the recording): not judged\n";
    }
    out << "\n" << events_left << EventsHuman(ev) << "\n" << CorrelateReportHuman(verdicts);
  }
  return kExitOk;
}

}  // namespace fabricscope::cli
