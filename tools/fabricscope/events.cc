#include "tools/fabricscope/events.h"

#include <iostream>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {
constexpr uint32_t kEventsDefaultLimit = 100;
}  // namespace

std::string EventJson(const v1::Event& e) {
  return absl::StrCat(
      "{\"detector\":", JsonString(e.detector()), ",\"kind\":", JsonString(e.kind()),
      ",\"device\":", JsonString(e.device()), ",\"port\":", e.port(),
      ",\"netdev\":", JsonString(e.netdev()), ",\"priority\":", JsonString(e.priority()),
      ",\"direction\":", JsonString(e.direction()), ",\"start_unix_nano\":", e.start_unix_nano(),
      ",\"end_unix_nano\":", e.active() ? "null" : absl::StrCat(e.end_unix_nano()),
      ",\"detected_unix_nano\":", e.detected_unix_nano(), ",\"peak\":", JsonNumber(e.peak()),
      ",\"summary\":", JsonString(e.summary()), PartnerJsonMember(e), "}");
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
  for (const v1::Event& e : response.events()) {
    const std::string duration =
        e.active() ? "active"
                   : FormatDurationShort(static_cast<int64_t>(e.end_unix_nano()) -
                                         static_cast<int64_t>(e.start_unix_nano()));
    std::string summary = e.summary();
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
  if (!s.ok()) return run->CallFailed(s.error_message());
  // The limit keeps the latest events: the ones left out come before them.
  const std::string left_out = LeftOutLine(resp.left_out(), "earlier events");
  if (!run->json()) out << left_out;
  out << (run->json() ? EventsJson(resp) : EventsHuman(resp));
  if (run->json()) run->LeftOut(out, left_out);
  return kExitOk;
}

}  // namespace fabricscope::cli
