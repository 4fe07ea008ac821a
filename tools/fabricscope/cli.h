// Shared by the subcommands of the `fabricscope` CLI (tools/fabricscope/main.cc
// holds the subcommand table: one line per subcommand, one .h/.cc pair each).
#pragma once

#include <string>
#include <vector>

namespace fabricscope::cli {

// Global flags, parsed by main.cc wherever they appear on the command line.
struct CliContext {
  std::string server = "127.0.0.1:9479";  // --server=HOST:PORT
  std::string output = "human";           // --output=human|json
  // --tls-ca=FILE (server CA: connect with TLS), --tls-cert/--tls-key=FILE
  // (client certificate for a mutual-TLS server).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
};

// A subcommand: gets the global context and its own arguments (global flags
// removed); returns the process exit status (0 ok, 1 failure, 2 usage error).
using SubcommandFn = int (*)(const CliContext& ctx, const std::vector<std::string>& args);

struct Subcommand {
  const char* name;
  const char* usage;  // e.g. "push [--batch=N] < spans.jsonl"
  const char* help;   // one line
  SubcommandFn run;
};

}  // namespace fabricscope::cli
