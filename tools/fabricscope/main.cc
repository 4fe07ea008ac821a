// fabricscope: the command-line client of fabricscoped's gRPC API.
//
//   fabricscope [--server=HOST:PORT] [--output=human|json] SUBCOMMAND [args...]
//
// Each subcommand lives in its own tools/fabricscope/<name>.{h,cc} and is one
// line of kSubcommands below. Global flags may appear before or after the
// subcommand name.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/version.h"
#include "tools/fabricscope/analyze.h"
#include "tools/fabricscope/cli.h"
#include "tools/fabricscope/correlate.h"
#include "tools/fabricscope/events.h"
#include "tools/fabricscope/incidents.h"
#include "tools/fabricscope/ports.h"
#include "tools/fabricscope/push.h"
#include "tools/fabricscope/query_client.h"
#include "tools/fabricscope/record.h"
#include "tools/fabricscope/series.h"
#include "tools/fabricscope/top.h"

namespace fabricscope::cli {
namespace {

// The subcommand table: one line per subcommand.
const Subcommand kSubcommands[] = {
    {"push", "push [--batch=N] < spans.jsonl",
     "Send spans (JSON lines on stdin) to the daemon's Ingest API.", RunPush},
    {"correlate",
     "correlate --trace-id=HEX | --span-id=HEX | --since=DUR [--name=N] [--pod=NS/POD]\n"
     "            [--all-series]"
     " [--verdict=fabric|clean|unknown]... [--stalls] [--all] [--limit=N (50)]",
     "Was it the fabric? A summary line, then the stalls and fabric spans: verdict and the\n"
     "      congestion signals ranked by score (--verdict/--stalls/--all select others).",
     RunCorrelate},
    {"series",
     "series --signal=S [--since=DUR] [--label=NAME=VALUE] [--max-samples=N] [--limit=N (20)]",
     "Raw samples of matching series at full resolution.", RunSeries},
    {"events", "events [--since=DUR] [--detector=NAME] [--active] [--limit=N (100)]",
     "Detector events: PFC storms, ECN mistuning, microbursts, retransmit spikes, link.",
     RunEvents},
    {"ports", "ports [--limit=N (100)]", "The RDMA port inventory.", RunPorts},
    {"record", "record [--since=DUR] [--out=FILE]",
     "Write the daemon's samples and spans of a time range as a JSON Lines recording.", RunRecord},
    {"analyze",
     "analyze FILE [--stall-thresholds=NAME=DUR,...] [--verdict=V]... [--stalls] [--all]\n"
     "            [--limit=N (50)]",
     "Run the detectors and correlator offline over a recording (no daemon needed).", RunAnalyze},
    {"incidents", "incidents --dir=DIR | DIR [--limit=N (20)]",
     "List the daemon's --incident-dir recordings (read directly: no daemon needed).",
     RunIncidents},
    {"top", "top [--interval=DUR] [--iterations=N] [--all-priorities] [--limit=N (40)]",
     "Live per-port/priority view of pause, ECN, CNP, discards, retransmits (q quits);\n"
     "      priorities with PFC enabled or moving only, unless --all-priorities.",
     RunTop},
};

void PrintHelp(FILE* out) {
  std::fputs(
      "fabricscope - client of the fabricscoped daemon\n\n"
      "Usage: fabricscope [--server=HOST:PORT] [--output=human|json] SUBCOMMAND [args...]\n\n"
      "Global flags:\n"
      "  --server=HOST:PORT   daemon gRPC address (default 127.0.0.1:9479)\n"
      "  --output=FORMAT      human (default) or json\n"
      "  --tls-ca=FILE        connect with TLS, trusting this PEM CA bundle\n"
      "  --tls-cert=FILE --tls-key=FILE\n"
      "                       client certificate and key (servers with --grpc-tls-client-ca)\n\n"
      "List commands print at most --limit items (default in parentheses; --output json: no\n"
      "limit; --limit 0: no limit) and say how many more there were.\n\n"
      "Subcommands:\n",
      out);
  for (const Subcommand& s : kSubcommands) {
    std::fprintf(out, "  %s\n      %s\n", s.usage, s.help);
  }
}

}  // namespace
}  // namespace fabricscope::cli

int main(int argc, char** argv) {
  using namespace fabricscope::cli;
  CliContext ctx;
  std::string command;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    absl::string_view v = a;
    auto take_value = [&](absl::string_view flag, std::string* out) -> bool {
      v = a;
      if (absl::ConsumePrefix(&v, absl::StrCat(flag, "="))) {
        *out = std::string(v);
        return true;
      }
      if (a == flag && i + 1 < argc) {
        *out = argv[++i];
        return true;
      }
      return false;
    };
    if (a == "--help" || a == "-h" || a == "help") {
      PrintHelp(stdout);
      return 0;
    }
    if (a == "--version") {
      std::printf("fabricscope %s (revision %s)\n", fabricscope::kVersion, fabricscope::kRevision);
      return 0;
    }
    if (take_value("--server", &ctx.server) || take_value("--output", &ctx.output) ||
        take_value("--tls-ca", &ctx.tls_ca) || take_value("--tls-cert", &ctx.tls_cert) ||
        take_value("--tls-key", &ctx.tls_key)) {
      continue;
    }
    if (command.empty() && !absl::StartsWith(a, "-")) {
      command = std::string(a);
    } else {
      args.emplace_back(a);
    }
  }
  if (ctx.output != "human" && ctx.output != "json") {
    std::fputs("fabricscope: --output must be human or json\n", stderr);
    return 2;
  }
  if (command.empty()) {
    PrintHelp(stderr);
    return 2;
  }
  if (auto s = UseTls(ctx); !s.ok()) {
    std::fprintf(stderr, "fabricscope: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  for (const Subcommand& s : kSubcommands) {
    if (command == s.name) return s.run(ctx, args);
  }
  std::fprintf(stderr, "fabricscope: unknown subcommand \"%s\" (see --help)\n", command.c_str());
  return 2;
}
