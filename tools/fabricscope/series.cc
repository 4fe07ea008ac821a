#include "tools/fabricscope/series.h"

#include <algorithm>
#include <iostream>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {

constexpr uint32_t kSeriesDefaultLimit = 20;

// The rate of interval i (samples i-1 -> i) in family units/s; false when it
// has none (first sample, a decrease: reset or wrap, see `fabricscoped` docs).
bool IntervalRate(const v1::SeriesData& d, int i, double* rate) {
  if (i == 0) return false;
  const auto& a = d.samples(i - 1);
  const auto& b = d.samples(i);
  if (b.raw() < a.raw() || b.ts_unix_nano() <= a.ts_unix_nano()) return false;
  *rate = static_cast<double>(b.raw() - a.raw()) * d.scale() /
          (static_cast<double>(b.ts_unix_nano() - a.ts_unix_nano()) * 1e-9);
  return true;
}

std::string Title(const v1::SeriesData& d) {
  // Sorted: a protobuf map iterates in no stable order.
  std::vector<std::pair<std::string, std::string>> sorted(d.labels().begin(), d.labels().end());
  std::sort(sorted.begin(), sorted.end());
  std::string labels;
  for (const auto& [k, v] : sorted) {
    if (!v.empty()) absl::StrAppend(&labels, labels.empty() ? "" : ",", k, "=", v);
  }
  return absl::StrCat(d.family(), "{", labels, "}  (", d.source(), " ", d.raw_name(), ")");
}

}  // namespace

std::string SeriesJson(const v1::SeriesResponse& response) {
  std::string out = "[";
  for (int i = 0; i < response.series_size(); ++i) {
    const v1::SeriesData& d = response.series(i);
    absl::StrAppend(&out, i ? ",\n " : "\n ", "{\"signal\":", JsonString(d.signal()),
                    ",\"family\":", JsonString(d.family()), ",\"source\":", JsonString(d.source()),
                    ",\"raw_name\":", JsonString(d.raw_name()),
                    ",\"device\":", JsonString(d.device()), ",\"port\":", d.port(),
                    ",\"netdev\":", JsonString(d.netdev()), ",\"labels\":{");
    // Sorted label order for stable output.
    std::vector<std::pair<std::string, std::string>> labels(d.labels().begin(), d.labels().end());
    std::sort(labels.begin(), labels.end());
    for (size_t j = 0; j < labels.size(); ++j) {
      absl::StrAppend(&out, j ? "," : "", JsonString(labels[j].first), ":",
                      JsonString(labels[j].second));
    }
    absl::StrAppend(&out, "},\"scale\":", JsonNumber(d.scale()),
                    ",\"truncated\":", d.truncated() ? "true" : "false", ",\"samples\":[");
    for (int j = 0; j < d.samples_size(); ++j) {
      const auto& s = d.samples(j);
      double rate;
      absl::StrAppend(&out, j ? "," : "", "{\"ts_unix_nano\":", s.ts_unix_nano(),
                      ",\"raw\":", s.raw(),
                      ",\"value\":", JsonNumber(static_cast<double>(s.raw()) * d.scale()),
                      ",\"rate\":", IntervalRate(d, j, &rate) ? JsonNumber(rate) : "null", "}");
    }
    absl::StrAppend(&out, "]}");
  }
  absl::StrAppend(&out, response.series_size() ? "\n]\n" : "]\n");
  return out;
}

std::string SeriesHuman(const v1::SeriesResponse& response) {
  if (response.series_size() == 0) return "no series matched\n";
  std::string out;
  for (const v1::SeriesData& d : response.series()) {
    absl::StrAppend(&out, Title(d), d.truncated() ? "  [truncated: oldest samples dropped]" : "",
                    "\n", absl::StrFormat("  %-28s %20s %14s\n", "TIME", "RAW", "RATE/s"));
    for (int j = 0; j < d.samples_size(); ++j) {
      const auto& s = d.samples(j);
      double rate;
      absl::StrAppend(
          &out, absl::StrFormat("  %-28s %20d %14s\n",
                                FormatUnixNano(static_cast<int64_t>(s.ts_unix_nano())), s.raw(),
                                IntervalRate(d, j, &rate) ? FormatRate(rate) : "-"));
    }
  }
  return out;
}

int RunSeries(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  const auto run = Invocation::Start(
      ctx, "series", args,
      {.values = {"signal", "since", "label", "max-samples", "limit"},
       .usage = "usage: fabricscope series --signal S --since DUR [--label NAME=VALUE]... "
                "[--max-samples N] [--limit N] [--server HOST:PORT] [--output human|json]\n"
                "  --limit N: at most N series (default 20; json: the daemon's 1000; 0: that)\n"});
  if (!run) return kExitUsage;
  const Flags& flags = run->flags();
  if (!flags.Has("signal")) return run->UsageWithHelp("--signal is required");
  auto since = ParseSince(flags.Get("since", "10s"));
  if (!since.ok()) return run->Usage(since.status().message());
  v1::SeriesRequest req;
  req.set_signal(flags.Get("signal"));
  for (const std::string& label : flags.GetAll("label")) {  // every --label must match
    std::pair<std::string, std::string> kv = absl::StrSplit(label, absl::MaxSplits('=', 1));
    if (kv.first.empty()) return run->Usage("--label must be NAME=VALUE");
    auto* m = req.add_matchers();
    m->set_label(kv.first);
    m->set_value(kv.second);
  }
  if (flags.Has("max-samples")) {
    int n;
    if (!absl::SimpleAtoi(flags.Get("max-samples"), &n) || n <= 0) {
      return run->Usage("--max-samples must be a positive integer");
    }
    req.set_max_samples_per_series(static_cast<uint32_t>(n));
  }
  auto limit = run->Limit(kSeriesDefaultLimit);
  if (!limit.ok()) return run->Usage(limit.status().message());
  req.set_max_series(*limit);  // the daemon bounds the reply (0: its default)
  const int64_t now = NowUnixNano();
  req.mutable_time_range()->set_from_unix_nano(
      static_cast<uint64_t>(now - absl::ToInt64Nanoseconds(*since)));
  req.mutable_time_range()->set_to_unix_nano(static_cast<uint64_t>(now));
  auto stub = MakeQueryStub(run->server());
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::SeriesResponse resp;
  grpc::Status s = stub->Series(&call, req, &resp);
  if (!s.ok()) return run->CallFailed(s.error_code(), s.error_message());
  if (resp.known_signals_size() > 0) {
    // The signal names nothing: a typo or a name of another form.
    return run->Fail(absl::StrCat("no signal named '", flags.Get("signal"),
                                  "'; the daemon has: ", absl::StrJoin(resp.known_signals(), ", "),
                                  " (a family name such as fabricscope_pfc_pause_seconds_total "
                                  "works too)"));
  }
  out << (run->json() ? SeriesJson(resp) : SeriesHuman(resp));
  run->LeftOut(out, LeftOutLine(resp.series_left_out(), "series",
                                "use --limit N; the daemon sends at most 1000"));
  return kExitOk;
}

}  // namespace fabricscope::cli
