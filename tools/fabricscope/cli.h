// Shared by the subcommands of the `fabricscope` CLI (tools/fabricscope/main.cc
// holds the subcommand table: one line per subcommand, one .h/.cc pair each):
// the global context, the flag parser, and Invocation, the preamble every
// subcommand but `push` starts with (its flags, the global options, and how
// it reports errors and exits).
//
// Subcommands are SubcommandFn: they get the global context and the
// arguments after their name and return the process exit code: kExitOk,
// kExitFailure (the call failed: server unreachable, error status; a file
// cannot be read or written), kExitUsage (bad usage: the message names the
// flag).
//
// Thread-safety: none needed (the CLI is single-threaded).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fabricscope::cli {

inline constexpr absl::string_view kDefaultServer = "127.0.0.1:9479";

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Global flags, parsed by main.cc wherever they appear on the command line.
struct CliContext {
  std::string server = std::string(kDefaultServer);  // --server=HOST:PORT
  std::string output = "human";                      // --output=human|json
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

// Parsed "--name=value" / "--name value" flags. Unknown flags are errors.
class Flags {
 public:
  // `known`: flag names (without dashes) that take a value; `bools`: flags
  // without a value.
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                     const std::vector<std::string>& known,
                                     const std::vector<std::string>& bools = {});
  bool Has(absl::string_view name) const;
  std::string Get(absl::string_view name, absl::string_view def = "") const;
  // Every value of a repeatable flag, in command-line order.
  std::vector<std::string> GetAll(absl::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

// --limit N of a list command (correlate, events, top, ports, series,
// analyze): at most N items (0: no limit). Absent: `human_default` for the
// human output, 0 (every item) for --output json. Error: not a number >= 0.
absl::StatusOr<uint32_t> ParseLimit(const Flags& flags, bool json, uint32_t human_default);
// The line a list ends (or starts) with when a limit or a selection left
// items out: "... 1380 more spans (use --limit N; --limit 0 shows all)\n" for
// `what` = "spans"; `how` replaces the parenthesized hint when not empty.
// "" when `n` is 0.
std::string LeftOutLine(uint64_t n, absl::string_view what, absl::string_view how = {});

// The global --server and --output (parsed by main.cc into CliContext).
struct CommonOptions {
  std::string server = std::string(kDefaultServer);
  bool json = false;
};
absl::StatusOr<CommonOptions> ParseCommon(const CliContext& ctx);

// A subcommand's flags as it declares them.
struct FlagSpec {
  std::vector<std::string> values = {};  // flags that take a value
  std::vector<std::string> bools = {};   // flags without one
  // Printed after the message of a flag error, e.g.
  // "usage: fabricscope ports [--server HOST:PORT] [--output human|json]\n".
  std::string usage = {};
};

// One run of a subcommand after its preamble: its parsed flags, the global
// options, and its error reporting. Every message goes to the error stream
// (std::cerr) as "fabricscope NAME: ...".
// The next step after a failed call with gRPC status `code` to `server`
// ("" when the message says it all): the daemon not running or not on that
// address (UNAVAILABLE), too slow (DEADLINE_EXCEEDED), older than this CLI
// (UNIMPLEMENTED).
std::string CallHint(int code, absl::string_view server);

class Invocation {
 public:
  // The preamble: parses `args` by `spec`, then the global options. On a flag
  // error prints the message and the usage; else, when `missing` is not
  // empty (a required operand is absent), prints it and the usage; else on a
  // bad global option prints its message. Returns nullopt after printing:
  // the subcommand returns kExitUsage.
  static std::optional<Invocation> Start(const CliContext& ctx, absl::string_view name,
                                         const std::vector<std::string>& args, const FlagSpec& spec,
                                         absl::string_view missing = {});

  const Flags& flags() const { return flags_; }
  const CommonOptions& common() const { return common_; }
  const std::string& server() const { return common_.server; }
  bool json() const { return common_.json; }

  // The error stream after the "fabricscope NAME: " prefix.
  std::ostream& Say() const;
  // Prints "fabricscope NAME: MESSAGE"; returns kExitUsage.
  int Usage(absl::string_view message) const;
  // The same followed by the usage of the spec; returns kExitUsage.
  int UsageWithHelp(absl::string_view message) const;
  // Prints "fabricscope NAME: MESSAGE"; returns kExitFailure.
  int Fail(absl::string_view message) const;
  // A failed call to the daemon: "fabricscope NAME: SERVER: MESSAGE", then
  // what to check next for the gRPC status `code` (CallHint); returns
  // kExitFailure.
  int CallFailed(int code, absl::string_view message) const;
  // --limit (ParseLimit with this run's output format).
  absl::StatusOr<uint32_t> Limit(uint32_t human_default) const {
    return ParseLimit(flags_, common_.json, human_default);
  }
  // Writes `line` (LeftOutLine) to `out` for the human output, to the error
  // stream for JSON (whose stdout stays one document).
  void LeftOut(std::ostream& out, absl::string_view line) const;

 private:
  Invocation(std::string name, std::string usage, Flags flags, CommonOptions common)
      : name_(std::move(name)),
        usage_(std::move(usage)),
        flags_(std::move(flags)),
        common_(std::move(common)) {}

  std::string name_;
  std::string usage_;
  Flags flags_;
  CommonOptions common_;
};

}  // namespace fabricscope::cli
