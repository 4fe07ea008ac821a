#include "tools/fabricscope/events.h"

#include <algorithm>
#include <iostream>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {

constexpr uint32_t kEventsDefaultLimit = 100;

std::string SignalsJson(const v1::Event& e) {
  std::string out = "[";
  for (int i = 0; i < e.signals_size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", JsonString(e.signals(i)));
  }
  return out + "]";
}

bool SamePlace(const v1::Event& a, const v1::Event& b) {
  return a.detector() == b.detector() && a.kind() == b.kind() && a.device() == b.device() &&
         a.port() == b.port() && a.netdev() == b.netdev() && a.priority() == b.priority() &&
         a.direction() == b.direction();
}

// Folds events of the same detector, kind and place that overlap in time
// into one (the earliest start, the latest end, the union of the signals).
std::vector<v1::Event> Episodes(const v1::EventsResponse& response) {
  std::vector<v1::Event> out;
  std::vector<int> folded;  // events folded into each
  for (const v1::Event& e : response.events()) {
    v1::Event* into = nullptr;
    for (auto it = out.rbegin(); it != out.rend(); ++it) {
      if (SamePlace(*it, e) && (it->active() || it->end_unix_nano() >= e.start_unix_nano()) &&
          (e.active() || e.end_unix_nano() >= it->start_unix_nano())) {
        into = &*it;
        break;
      }
    }
    if (into == nullptr) {
      out.push_back(e);
      folded.push_back(1);
      continue;
    }
    ++folded[static_cast<size_t>(into - out.data())];
    into->set_start_unix_nano(std::min(into->start_unix_nano(), e.start_unix_nano()));
    if (e.active()) {
      into->set_active(true);
      into->set_end_unix_nano(0);
    } else if (!into->active()) {
      into->set_end_unix_nano(std::max(into->end_unix_nano(), e.end_unix_nano()));
    }
    for (const std::string& s : e.signals()) {
      if (std::find(into->signals().begin(), into->signals().end(), s) == into->signals().end()) {
        into->add_signals(s);
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (folded[i] > 1 && out[i].signals_size() <= 1) {
      out[i].set_summary(absl::StrCat(out[i].summary(), " (", folded[i], " events)"));
    }
  }
  return out;
}

}  // namespace

std::string EventJson(const v1::Event& e) {
  return absl::StrCat(
      "{\"detector\":", JsonString(e.detector()), ",\"kind\":", JsonString(e.kind()),
      ",\"device\":", JsonString(e.device()), ",\"port\":", e.port(),
      ",\"netdev\":", JsonString(e.netdev()), ",\"priority\":", JsonString(e.priority()),
      ",\"direction\":", JsonString(e.direction()), ",\"start_unix_nano\":", e.start_unix_nano(),
      ",\"end_unix_nano\":", e.active() ? "null" : absl::StrCat(e.end_unix_nano()),
      ",\"detected_unix_nano\":", e.detected_unix_nano(), ",\"peak\":", JsonNumber(e.peak()),
      ",\"summary\":", JsonString(e.summary()), ",\"signals\":", SignalsJson(e),
      PartnerJsonMember(e), "}");
}

std::string EventsJson(const v1::EventsResponse& response) {
  std::string out = "[";
  for (int i = 0; i < response.events_size(); ++i) {
    absl::StrAppend(&out, i ? ",\n " : "\n ", EventJson(response.events(i)));
  }
  absl::StrAppend(&out, response.events_size() ? "\n]\n" : "]\n");
  return out;
}

std::string EventsHuman(const v1::EventsResponse& response) {
  if (response.events_size() == 0) return "no detector events\n";
  std::string out = absl::StrFormat("%-27s %-9s %-17s %-29s %s\n", "START", "DURATION", "DETECTOR",
                                    "KIND", "SUMMARY");
  for (const v1::Event& e : Episodes(response)) {
    const std::string duration =
        e.active() ? "active"
                   : FormatDurationShort(static_cast<int64_t>(e.end_unix_nano()) -
                                         static_cast<int64_t>(e.start_unix_nano()));
    std::string summary = e.summary();
    if (e.signals_size() > 1) {
      absl::StrAppend(&summary, " [signals: ", absl::StrJoin(e.signals(), ", "), "]");
    }
    if (e.has_partner()) {  // "(eth2 -> leaf07 Ethernet1/12)"
      const std::string port =
          !e.netdev().empty()
              ? e.netdev()
              : absl::StrCat(e.device(), e.port() ? absl::StrCat("/", e.port()) : "");
      absl::StrAppend(&summary, " (", port, PartnerArrow(e), ")");
    }
    absl::StrAppend(&out, absl::StrFormat("%-27s %-9s %-17s %-29s %s\n",
                                          FormatUnixNano(static_cast<int64_t>(e.start_unix_nano())),
                                          duration, e.detector(), e.kind(), summary));
  }
  return out;
}

int RunEvents(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  const auto run = Invocation::Start(
      ctx, "events", args,
      {.values = {"since", "detector", "limit"},
       .bools = {"active"},
       .usage =
           "usage: fabricscope events [--since=DUR] [--detector=NAME] [--active] [--limit=N]\n"
           "  --limit N: at most the latest N events (default 100; json: no limit; 0: all)\n"});
  if (!run) return kExitUsage;
  const Flags& flags = run->flags();
  auto since = ParseSince(flags.Get("since", "1h"));
  if (!since.ok()) return run->Usage(since.status().message());
  v1::EventsRequest req;
  const int64_t now = NowUnixNano();
  req.mutable_time_range()->set_from_unix_nano(
      static_cast<uint64_t>(now - absl::ToInt64Nanoseconds(*since)));
  req.mutable_time_range()->set_to_unix_nano(static_cast<uint64_t>(now + 60'000'000'000));
  req.set_detector(flags.Get("detector"));
  req.set_active_only(flags.Has("active"));
  auto limit = run->Limit(kEventsDefaultLimit);
  if (!limit.ok()) return run->Usage(limit.status().message());
  req.set_limit(*limit);
  auto stub = MakeQueryStub(run->server());
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::EventsResponse resp;
  grpc::Status s = stub->Events(&call, req, &resp);
  if (!s.ok()) return run->CallFailed(s.error_code(), s.error_message());
  // The limit keeps the latest events: the ones left out come before them.
  const std::string left_out = LeftOutLine(resp.left_out(), "earlier events");
  if (!run->json()) out << left_out;
  out << (run->json() ? EventsJson(resp) : EventsHuman(resp));
  if (run->json()) run->LeftOut(out, left_out);
  return kExitOk;
}

}  // namespace fabricscope::cli
