// fabricscoped: the per-host fabric telemetry daemon. Everything lives in the
// core library; this file only parses the command line and runs the Daemon.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "collectors/registry.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/signals.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/explain_cost.h"
#include "daemon/privileges.h"
#include "daemon/version.h"

int main(int argc, char** argv) {
  using namespace fabricscope;
  BlockDaemonSignals();
  auto cl = ParseCommandLine(argc, argv);
  if (!cl.ok()) {
    std::fprintf(stderr, "fabricscoped: %s\n", std::string(cl.status().message()).c_str());
    return 2;
  }
  if (cl->help) {
    std::fputs(HelpText().c_str(), stdout);
    return 0;
  }
  if (cl->version) {
    std::printf("fabricscoped %s (revision %s)\n", kVersion, kRevision);
    return 0;
  }
  if (cl->dump_metrics_reference) {
    std::fputs((RenderMetricReference() + "\n" + RenderSignalTable()).c_str(), stdout);
    return 0;
  }
  if (cl->dump_options_reference) {
    std::fputs(OptionsReference().c_str(), stdout);
    return 0;
  }
  if (cl->list_collectors) {
    CollectorRegistry registry;
    if (auto s = RegisterAllCollectors(registry); !s.ok()) {
      std::fprintf(stderr, "fabricscoped: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::fputs(registry.List().c_str(), stdout);
    return 0;
  }
  if (cl->explain_cost) {
    absl::StatusOr<std::string> plan = ExplainCost(cl->config);
    if (!plan.ok()) {
      std::fprintf(stderr, "fabricscoped: %s\n", std::string(plan.status().message()).c_str());
      return 1;
    }
    std::fputs(plan->c_str(), stdout);
    return 0;
  }
  const std::string user = cl->config.run_as_user;
  if (auto s = CheckRootPolicy(geteuid() == 0, cl->config.allow_root, user); !s.ok()) {
    std::fprintf(stderr, "fabricscoped: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  Daemon daemon(*std::move(cl), RealClock::Get());
  auto startup_failed = [](const absl::Status& s) {
    Log(LogLevel::kError, "daemon", "startup failed", {{"error", std::string(s.message())}});
    std::fprintf(stderr, "fabricscoped: %s\n", std::string(s.message()).c_str());
    return 1;
  };
  if (auto s = daemon.Init(); !s.ok()) return startup_failed(s);
  if (!user.empty()) {
    if (auto s = DropPrivileges(user); !s.ok()) return startup_failed(s);
    Log(LogLevel::kInfo, "daemon", "switched user",
        {{"user", user}, {"uid", std::to_string(getuid())}, {"gid", std::to_string(getgid())}});
  }
  if (auto s = daemon.CheckPaths(); !s.ok()) return startup_failed(s);
  return daemon.Run();
}
