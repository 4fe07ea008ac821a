#include "tools/fabricscope/record.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/series.h"
#include "daemon/recording/recording.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {

int RunRecord(const CliContext& ctx, const std::vector<std::string>& args) {
  const auto run =
      Invocation::Start(ctx, "record", args,
                        {.values = {"since", "out"},
                         .usage = "usage: fabricscope record [--since=DUR] [--out=FILE]\n"});
  if (!run) return kExitUsage;
  const Flags& flags = run->flags();
  auto since = ParseSince(flags.Get("since", "5m"));
  if (!since.ok()) return run->Usage(since.status().message());
  v1::RecordRequest req;
  const int64_t now = NowUnixNano();
  req.mutable_time_range()->set_from_unix_nano(
      static_cast<uint64_t>(now - absl::ToInt64Nanoseconds(*since)));
  req.mutable_time_range()->set_to_unix_nano(static_cast<uint64_t>(now));

  // Every line with its time, sorted before writing (series arrive one by one).
  struct Line {
    int64_t ts;
    int order;  // samples before a span ending at the same time
    std::string text;
  };
  std::vector<Line> lines;
  auto stub = MakeQueryStub(run->server());
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto reader = stub->Record(&call, req);
  v1::RecordChunk chunk;
  size_t series = 0;
  std::string header;  // first line, whatever the times
  while (reader->Read(&chunk)) {
    if (!chunk.header_line().empty() && header.empty()) header = chunk.header_line();
    for (const v1::RecordedSpanLine& l : chunk.span_lines()) {
      lines.push_back({static_cast<int64_t>(l.end_unix_nano()), 1, l.line()});
    }
    for (const v1::SeriesData& d : chunk.series()) {
      ++series;
      SeriesKey key{d.source(), d.raw_name(), d.device(), d.port(), d.netdev()};
      for (const v1::SeriesSample& s : d.samples()) {
        const auto ts = static_cast<int64_t>(s.ts_unix_nano());
        lines.push_back({ts, 0, FormatSampleLine(ts, key, s.raw())});
      }
    }
    for (const v1::Span& s : chunk.spans()) {
      lines.push_back({static_cast<int64_t>(s.end_unix_nano()), 1, FormatSpanLine(s)});
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return run->CallFailed(s.error_code(), s.error_message());
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.order < b.order;
  });
  const std::string path = flags.Get("out");
  std::unique_ptr<FILE, int (*)(FILE*)> file(nullptr, fclose);
  FILE* out = stdout;
  if (!path.empty() && path != "-") {
    file.reset(std::fopen(path.c_str(), "w"));
    if (!file) return run->Fail(absl::StrCat("cannot write ", path));
    out = file.get();
  }
  if (!header.empty()) {
    std::fputs(header.c_str(), out);
    std::fputc('\n', out);
  }
  for (const Line& l : lines) {
    std::fputs(l.text.c_str(), out);
    std::fputc('\n', out);
  }
  if (std::fflush(out) != 0 || std::ferror(out)) return run->Fail("write error");
  run->Say() << lines.size() + (header.empty() ? 0 : 1) << " lines (" << series << " series"
             << (header.empty() ? "; no header: the daemon is older than the CLI" : "") << ")"
             << (path.empty() || path == "-" ? "" : " to " + path) << "\n";
  return kExitOk;
}

}  // namespace fabricscope::cli
