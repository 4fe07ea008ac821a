// `fabricsim --hosts=N`: runs the fleet model (fleet.h) and writes its output
// (fleet_output.h), paced to the wall clock or as fast as possible.
//
// Thread-safety: RunFleet blocks its caller; `stop` may be set from a signal
// handler.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tools/fabricsim/fleet.h"
#include "tools/fabricsim/fleet_scenario.h"

namespace fabricsim {

struct FleetRunOptions {
  int hosts = 0;
  std::string fabric;  // leaf-spine:LEAVES,SPINES[,HOSTS_PER_LEAF]
  std::string scenario = "quiet";
  std::string out_dir;
  uint64_t seed = 1;
  int64_t step_ns = 100'000;
  FleetEpisodeTiming timing;
  int origin = -1;                          // host index; -1: drawn per episode
  int64_t duration_ns = -1;                 // model time; -1: until stopped
  bool fast = false;                        // as fast as possible (needs duration_ns)
  int64_t start_unix_ns = -1;               // -1: now
  int64_t write_interval_ns = 100'000'000;  // live tree update period (wall time)
  int exit_with_pid = 0;
  bool verbose = false;
};

// Returns the process exit code (0 ok, 1 output error, 2 bad options).
int RunFleet(const FleetRunOptions& options, const std::atomic<bool>& stop);

}  // namespace fabricsim
