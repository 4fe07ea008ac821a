#include "tools/fabricsim/fleet_run.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>

#include "tools/fabricsim/fleet_output.h"

namespace fabricsim {
namespace {

int64_t WallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int RunFleet(const FleetRunOptions& o, const std::atomic<bool>& stop) {
  auto topology = FleetTopology::Parse(o.hosts, o.fabric);
  if (!topology.ok()) {
    std::fprintf(stderr, "fabricsim: %s\n", std::string(topology.status().message()).c_str());
    return 2;
  }
  auto scenario = FleetScenario::Make(o.scenario, *topology, o.seed, o.timing, o.origin);
  if (!scenario.ok()) {
    std::fprintf(stderr, "fabricsim: %s\n", std::string(scenario.status().message()).c_str());
    return 2;
  }
  if (o.out_dir.empty()) {
    std::fprintf(stderr, "fabricsim: --hosts needs --out=DIR\n");
    return 2;
  }
  if (o.fast && o.duration_ns <= 0) {
    std::fprintf(stderr, "fabricsim: --as-fast-as-possible needs --duration\n");
    return 2;
  }
  FleetOptions options;
  options.seed = o.seed;
  options.step_ns = o.step_ns;
  Fleet fleet(*topology, options, &*scenario);
  const int64_t start_unix_ns = o.start_unix_ns >= 0 ? o.start_unix_ns : WallNowNs();
  const int64_t end_ns = o.duration_ns > 0 ? o.duration_ns : std::numeric_limits<int64_t>::max();
  FleetWriter writer(o.out_dir, start_unix_ns);
  auto report = [](const absl::Status& s) {
    std::fprintf(stderr, "fabricsim: %s\n", std::string(s.message()).c_str());
    return 1;
  };
  if (auto s = writer.Init(fleet); !s.ok()) return report(s);
  if (o.verbose) {
    std::fprintf(stderr, "fabricsim: fleet of %d hosts, %s, scenario=%s seed=%llu out=%s\n",
                 o.hosts, topology->Describe().c_str(), scenario->name().c_str(),
                 static_cast<unsigned long long>(o.seed), o.out_dir.c_str());
  }
  const auto wall_start = std::chrono::steady_clock::now();
  const int64_t batch_ns = o.fast ? 100'000'000 : o.write_interval_ns;
  int rc = 0;
  for (int64_t batch = 1; !stop.load(); ++batch) {
    int64_t target;
    if (o.fast) {
      target = std::min(end_ns, fleet.now_ns() + batch_ns);
    } else {
      auto elapsed = std::chrono::steady_clock::now() - wall_start;
      target = std::min<int64_t>(
          end_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
    }
    fleet.AdvanceTo(target);
    absl::Status s = writer.WriteTrees(fleet);
    if (s.ok()) s = writer.WriteSpans(fleet, scenario->name());
    if (s.ok()) s = writer.WriteGroundTruth(fleet, *scenario, false);
    if (!s.ok()) {
      rc = report(s);
      break;
    }
    if (target >= end_ns) break;
    if (o.exit_with_pid > 0 && kill(o.exit_with_pid, 0) != 0 && errno == ESRCH) {
      if (o.verbose)
        std::fprintf(stderr, "fabricsim: process %d is gone; stopping\n", o.exit_with_pid);
      break;
    }
    if (!o.fast) {
      auto deadline = wall_start + std::chrono::nanoseconds(batch * batch_ns);
      auto wait = deadline - std::chrono::steady_clock::now();
      if (wait > std::chrono::nanoseconds(0)) {
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
        timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
        nanosleep(&ts, nullptr);  // a signal cuts it short; the loop re-checks `stop`
      } else {
        // Fell behind: skip missed batches, never accumulate.
        batch = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - wall_start)
                    .count() /
                batch_ns;
      }
    }
  }
  if (auto s = writer.WriteGroundTruth(fleet, *scenario, true); !s.ok() && rc == 0) {
    rc = report(s);
  }
  if (o.verbose) {
    std::fprintf(stderr, "fabricsim: stopped at model time %.3f s, %llu files written\n",
                 static_cast<double>(fleet.now_ns()) / 1e9,
                 static_cast<unsigned long long>(writer.files_written()));
  }
  return rc;
}

}  // namespace fabricsim
