#include "tools/fabricscope/incidents.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/recording/incident_writer.h"
#include "daemon/recording/recording.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {

constexpr uint32_t kHumanLimit = 20;
// The header line is small (at most 256 episodes); a first line longer than
// this is not one.
constexpr size_t kMaxHeaderBytes = 1 << 20;

struct Listed {
  std::string path;
  uint64_t size = 0;
  IncidentHeader header;
  std::string error;  // the header could not be read
};

// Reads and parses the first line of `path`.
absl::StatusOr<IncidentHeader> ReadHeader(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "r"), fclose);
  if (!f) return absl::NotFoundError("cannot open");
  std::string line;
  int c;
  while ((c = std::fgetc(f.get())) != EOF && c != '\n') {
    if (line.size() >= kMaxHeaderBytes) return absl::DataLossError("first line too long");
    line.push_back(static_cast<char>(c));
  }
  auto parsed = ParseRecordingLine(line);
  if (!parsed.ok()) return parsed.status();
  if (parsed->type != RecordingLine::kIncident) {
    return absl::DataLossError("first line is not an incident header");
  }
  return std::move(parsed->incident);
}

// The episodes' extent: first start, last end (0 while one is still active).
std::pair<int64_t, int64_t> Extent(const IncidentHeader& h) {
  int64_t start = h.episodes.empty() ? h.from_unix_nano : h.episodes.front().start_unix_nano;
  int64_t end = 0;
  bool active = false;
  for (const DetectorEvent& e : h.episodes) {
    start = std::min(start, e.start_unix_nano);
    active = active || e.active();
    end = std::max(end, e.end_unix_nano);
  }
  return {start, active ? 0 : end};
}

std::string PortText(const IncidentHeader& h) {
  std::string out;
  if (!h.device.empty()) out = absl::StrCat(h.device, "/", h.port);
  if (!h.netdev.empty()) absl::StrAppend(&out, out.empty() ? "" : " ", h.netdev);
  return out.empty() ? "host" : out;
}

std::string SizeText(uint64_t b) {
  if (b >= (1ull << 30)) return absl::StrFormat("%.1fGiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return absl::StrFormat("%.1fMiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return absl::StrFormat("%.1fKiB", static_cast<double>(b) / (1ull << 10));
  return absl::StrCat(b, "B");
}

std::string EpisodeJson(const DetectorEvent& e) {
  return absl::StrCat(
      "{\"detector\":", JsonString(e.detector), ",\"kind\":", JsonString(e.kind),
      ",\"device\":", JsonString(e.device), ",\"port\":", e.port,
      ",\"netdev\":", JsonString(e.netdev), ",\"priority\":", JsonString(e.priority),
      ",\"direction\":", JsonString(e.direction), ",\"start_unix_nano\":", e.start_unix_nano,
      ",\"end_unix_nano\":", e.active() ? "null" : absl::StrCat(e.end_unix_nano),
      ",\"peak\":", JsonNumber(e.peak), ",\"summary\":", JsonString(e.summary), "}");
}

std::string IncidentJson(const Listed& l) {
  std::string out = absl::StrCat("{\"file\":", JsonString(l.path), ",\"size_bytes\":", l.size);
  if (!l.error.empty()) return absl::StrCat(out, ",\"error\":", JsonString(l.error), "}");
  const IncidentHeader& h = l.header;
  const auto [start, end] = Extent(h);
  const DetectorEvent* headline = h.Headline();
  absl::StrAppend(&out, ",\"detector\":", JsonString(headline ? headline->detector : ""),
                  ",\"kind\":", JsonString(headline ? headline->kind : ""),
                  ",\"start_unix_nano\":", start,
                  ",\"end_unix_nano\":", end == 0 ? "null" : absl::StrCat(end),
                  ",\"closed\":", JsonString(h.closed), ",\"device\":", JsonString(h.device),
                  ",\"port\":", h.port, ",\"netdev\":", JsonString(h.netdev),
                  ",\"from_unix_nano\":", h.from_unix_nano, ",\"to_unix_nano\":", h.to_unix_nano,
                  ",\"episodes\":[");
  for (size_t i = 0; i < h.episodes.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", EpisodeJson(h.episodes[i]));
  }
  absl::StrAppend(&out, "],\"episodes_omitted\":", h.episodes_omitted, "}");
  return out;
}

std::string IncidentHuman(const Listed& l) {
  if (!l.error.empty()) {
    return absl::StrFormat("%-24s %-20s %-16s %-18s %-12s %-8s %s\n", "?", "?", "?", "?", "?",
                           SizeText(l.size), absl::StrCat(l.path, " (", l.error, ")"));
  }
  const IncidentHeader& h = l.header;
  const auto [start, end] = Extent(h);
  std::string detector = "?", kind = "?";
  if (const DetectorEvent* headline = h.Headline(); headline != nullptr) {
    detector = headline->detector;
    kind = headline->kind;
  }
  const uint64_t more = h.episodes.size() + h.episodes_omitted - (h.episodes.empty() ? 0 : 1);
  if (more > 0) absl::StrAppend(&detector, " +", more);
  // Still active when written (capped, or the daemon stopped): at least
  // until the end of the window.
  std::string duration = end == 0 ? absl::StrCat(">", FormatDurationShort(h.to_unix_nano - start))
                                  : FormatDurationShort(end - start);
  if (h.closed != "ended") absl::StrAppend(&duration, " ", h.closed);
  // "2026-11-30T19:20:01.123456Z" -> milliseconds.
  std::string time = FormatUnixNano(start);
  if (time.size() > 24) time = absl::StrCat(time.substr(0, 23), "Z");
  return absl::StrFormat("%-24s %-20s %-16s %-18s %-12s %-8s %s\n", time, detector, kind,
                         PortText(h), duration, SizeText(l.size), l.path);
}

}  // namespace

int RunIncidents(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  std::vector<std::string> rest;
  std::string dir;
  for (const std::string& a : args) {
    if (a.rfind("--", 0) != 0 && dir.empty()) {
      dir = a;
    } else {
      rest.push_back(a);
    }
  }
  const auto run = Invocation::Start(
      ctx, "incidents", rest,
      {.values = {"dir", "limit"},
       .usage = "usage: fabricscope incidents --dir=DIR | DIR [--limit=N]\n"
                "  DIR: fabricscoped's --incident-dir (read directly; no daemon needed)\n"});
  if (!run) return kExitUsage;
  const Flags& flags = run->flags();
  if (flags.Has("dir")) {
    if (!dir.empty()) return run->UsageWithHelp("give the directory once (--dir or DIR)");
    dir = flags.Get("dir");
  }
  if (dir.empty()) return run->UsageWithHelp("the incident directory is required");
  const absl::StatusOr<uint32_t> parsed_limit = run->Limit(kHumanLimit);
  if (!parsed_limit.ok()) return run->Usage(parsed_limit.status().message());
  const uint32_t limit = *parsed_limit;
  auto files = ListIncidentFiles(dir);
  if (!files.ok()) return run->Fail(files.status().message());
  // The newest `limit`, oldest first.
  const size_t left_out = limit > 0 && files->size() > limit ? files->size() - limit : 0;
  std::vector<Listed> listed;
  for (size_t i = left_out; i < files->size(); ++i) {
    Listed l;
    l.path = absl::StrCat(dir, dir.back() == '/' ? "" : "/", (*files)[i].name);
    l.size = (*files)[i].size;
    auto header = ReadHeader(l.path);
    if (header.ok()) {
      l.header = *std::move(header);
    } else {
      l.error = std::string(header.status().message());
    }
    listed.push_back(std::move(l));
  }
  const std::string more =
      LeftOutLine(left_out, "incidents", "older ones; use --limit N, --limit 0 shows all");
  if (run->json()) {
    out << "[";
    for (size_t i = 0; i < listed.size(); ++i) {
      out << (i ? ",\n " : "\n ") << IncidentJson(listed[i]);
    }
    out << (listed.empty() ? "]\n" : "\n]\n");
    if (!more.empty()) run->Say() << more;
    return kExitOk;
  }
  if (listed.empty()) {
    out << "no incident recordings in " << dir << "\n";
    return kExitOk;
  }
  out << more;
  out << absl::StrFormat("%-24s %-20s %-16s %-18s %-12s %-8s %s\n", "TIME", "DETECTOR", "KIND",
                         "PORT", "DURATION", "SIZE", "FILE");
  for (const Listed& l : listed) out << IncidentHuman(l);
  return kExitOk;
}

}  // namespace fabricscope::cli
