#include "tools/fabricscope/cli.h"

#include <iostream>
#include <ostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/support/status.h"

namespace fabricscope::cli {

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                                   const std::vector<std::string>& known,
                                   const std::vector<std::string>& bools) {
  Flags f;
  auto contains = [](const std::vector<std::string>& v, absl::string_view n) {
    for (const auto& x : v) {
      if (x == n) return true;
    }
    return false;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view a = args[i];
    if (!absl::ConsumePrefix(&a, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", args[i], "\" (flags look like --name=value)"));
    }
    std::string name, value;
    size_t eq = a.find('=');
    if (eq != absl::string_view::npos) {
      name = std::string(a.substr(0, eq));
      value = std::string(a.substr(eq + 1));
      if (contains(bools, name)) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      }
    } else {
      name = std::string(a);
      if (contains(bools, name)) {
        value = "true";
      } else if (contains(known, name)) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
        }
        value = args[++i];
      }
    }
    if (!contains(known, name) && !contains(bools, name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    f.values_.emplace_back(std::move(name), std::move(value));
  }
  return f;
}

bool Flags::Has(absl::string_view name) const {
  for (const auto& [n, v] : values_) {
    if (n == name) return true;
  }
  return false;
}

std::vector<std::string> Flags::GetAll(absl::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : values_) {
    if (n == name) out.push_back(v);
  }
  return out;
}

std::string Flags::Get(absl::string_view name, absl::string_view def) const {
  std::string out(def);
  for (const auto& [n, v] : values_) {
    if (n == name) out = v;  // the last one wins
  }
  return out;
}

absl::StatusOr<uint32_t> ParseLimit(const Flags& flags, bool json, uint32_t human_default) {
  if (!flags.Has("limit")) return json ? 0 : human_default;
  uint32_t n;
  if (!absl::SimpleAtoi(flags.Get("limit"), &n)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid value \"", flags.Get("limit"),
                                                   "\" for flag --limit: want a number >= 0 "
                                                   "(0: no limit)"));
  }
  return n;
}

std::string LeftOutLine(uint64_t n, absl::string_view what, absl::string_view how) {
  if (n == 0) return "";
  return absl::StrCat("... ", n, " more ", what, " (",
                      how.empty() ? "use --limit N; --limit 0 shows all" : how, ")\n");
}

absl::StatusOr<CommonOptions> ParseCommon(const CliContext& ctx) {
  CommonOptions o;
  o.server = ctx.server;
  if (o.server.empty()) return absl::InvalidArgumentError("--server must not be empty");
  if (ctx.output == "json") {
    o.json = true;
  } else if (ctx.output != "human") {
    return absl::InvalidArgumentError(
        absl::StrCat("--output must be human or json, got \"", ctx.output, "\""));
  }
  return o;
}

std::optional<Invocation> Invocation::Start(const CliContext& ctx, absl::string_view name,
                                            const std::vector<std::string>& args,
                                            const FlagSpec& spec, absl::string_view missing) {
  std::ostream& err = std::cerr;
  auto flags = Flags::Parse(args, spec.values, spec.bools);
  if (!flags.ok() || !missing.empty()) {
    err << "fabricscope " << name << ": " << (flags.ok() ? missing : flags.status().message())
        << "\n"
        << spec.usage;
    return std::nullopt;
  }
  auto common = ParseCommon(ctx);
  if (!common.ok()) {
    err << "fabricscope " << name << ": " << common.status().message() << "\n";
    return std::nullopt;
  }
  return Invocation(std::string(name), spec.usage, *std::move(flags), *std::move(common));
}

std::ostream& Invocation::Say() const { return std::cerr << "fabricscope " << name_ << ": "; }

int Invocation::Usage(absl::string_view message) const {
  Say() << message << "\n";
  return kExitUsage;
}

int Invocation::UsageWithHelp(absl::string_view message) const {
  Say() << message << "\n" << usage_;
  return kExitUsage;
}

int Invocation::Fail(absl::string_view message) const {
  Say() << message << "\n";
  return kExitFailure;
}

void Invocation::LeftOut(std::ostream& out, absl::string_view line) const {
  if (line.empty()) return;
  if (common_.json) {
    Say() << line;
  } else {
    out << line;
  }
}

std::string CallHint(int code, absl::string_view server) {
  switch (static_cast<grpc::StatusCode>(code)) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::StrCat(
          "is fabricscoped running and serving gRPC on ", server,
          "? It listens on its --grpc-listen address (default 127.0.0.1:9479; `systemctl "
          "status fabricscoped`, or its log line \"serving grpc\"); point this command at "
          "another address with --server HOST:PORT.");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "the daemon did not answer in time: it may be overloaded (see its "
             "fabricscope_scheduler_overruns_total and log), or the query asked for a long "
             "window; try a shorter --since or a lower --limit.";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "the daemon does not know this request: it is older than this CLI "
             "(`fabricscoped --version`).";
    default:
      return "";
  }
}

int Invocation::CallFailed(int code, absl::string_view message) const {
  Say() << common_.server << ": " << message << "\n";
  const std::string hint = CallHint(code, common_.server);
  if (!hint.empty()) std::cerr << "  " << hint << "\n";
  return kExitFailure;
}

}  // namespace fabricscope::cli
