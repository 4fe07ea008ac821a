#include "tools/fabricscope/analyze.h"

#include <iostream>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "daemon/correlate/correlator.h"
#include "daemon/detect/detectors.h"
#include "daemon/detect/event_log.h"
#include "daemon/recording/replay.h"
#include "daemon/service/query_service.h"
#include "store/store.h"
#include "tools/fabricscope/correlate.h"
#include "tools/fabricscope/events.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {

int RunAnalyze(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  std::ostream& err = std::cerr;
  std::vector<std::string> rest;
  std::string file;
  for (const std::string& a : args) {
    if (a.rfind("--", 0) != 0 && file.empty()) {
      file = a;
    } else {
      rest.push_back(a);
    }
  }
  auto flags = Flags::Parse(rest, {"stall-thresholds"});
  if (!flags.ok() || file.empty()) {
    err << "fabricscope analyze: "
        << (flags.ok() ? "a recording file is required" : flags.status().message()) << "\n"
        << "usage: fabricscope analyze FILE [--stall-thresholds=NAME=DUR,...]\n";
    return kExitUsage;
  }
  auto common = ParseCommon(ctx);
  if (!common.ok()) {
    err << "fabricscope analyze: " << common.status().message() << "\n";
    return kExitUsage;
  }
  auto thresholds = StallPolicy::Parse(flags->Get("stall-thresholds"));
  if (!thresholds.ok()) {
    err << "fabricscope analyze: --stall-thresholds: " << thresholds.status().message() << "\n";
    return kExitUsage;
  }

  StoreOptions store_options;
  store_options.memory_bytes = 2ull << 30;  // the whole recording, within reason
  Store store(store_options);
  EventLog events(1'000'000, nullptr);
  DetectorEngine detectors(DetectorOptions{}, &store, &events, nullptr);
  store.SetObserver(&detectors);
  RecordingFeeder feeder(&store);
  std::vector<Span> spans;
  absl::Status read = ForEachLine(file, [&](size_t line_no, absl::string_view line) {
    feeder.Feed(line_no, line, &spans);
    return true;
  });
  if (!read.ok()) {
    err << "fabricscope analyze: " << read.message() << "\n";
    return kExitFailure;
  }
  const RecordingStats& st = feeder.stats();
  for (const std::string& m : st.messages)
    err << "fabricscope analyze: " << file << ": " << m << "\n";
  const uint64_t problems =
      st.malformed + st.unknown_counters + st.out_of_order + st.rejected_spans;
  if (problems > st.messages.size()) {
    err << "fabricscope analyze: " << problems - st.messages.size() << " more problems not shown\n";
  }

  v1::EventsResponse ev;
  for (const DetectorEvent& e : events.List(INT64_MIN, INT64_MAX, "")) {
    EventToProto(e, ev.add_events());
  }
  Correlator correlator(&store, CorrelationOptions{}, StallPolicy(*thresholds));
  v1::CorrelateResponse verdicts;
  for (const Span& span : spans) {
    FillSpanVerdict(span, correlator.Correlate(span), false, verdicts.add_spans());
  }
  if (common->json) {
    std::string events_json = EventsJson(ev);
    std::string spans_json = CorrelateJson(verdicts);
    while (!events_json.empty() && events_json.back() == '\n') events_json.pop_back();
    while (!spans_json.empty() && spans_json.back() == '\n') spans_json.pop_back();
    out << "{\"events\":" << events_json << ",\n\"spans\":" << spans_json << "}\n";
  } else {
    out << "recording " << file << ": " << st.samples << " samples, " << st.spans << " spans, "
        << problems << " lines skipped, " << st.unknown_counters
        << " counters without a signal rule ignored\n\n"
        << EventsHuman(ev) << "\n"
        << CorrelateHuman(verdicts);
  }
  return kExitOk;
}

}  // namespace fabricscope::cli
