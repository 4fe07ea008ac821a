// fabricsim fleet output: one live host tree per directory and the fleet's
// ground truth.
//
// Layout under the output directory DIR (N hosts, host-NN as
// FleetTopology::HostName):
//   DIR/host-NN/sys/...                 a --sysfs-root: class/infiniband/mlx5_0/ports/1/
//                                       {counters,hw_counters,state,...}, class/net/ens1f0np0/...
//                                       (TreeWriter, as single-host fabricsim writes them)
//   DIR/host-NN/ethtool/ens1f0np0       an --ethtool-dir: the `ethtool -S` text
//   DIR/host-NN/topology                a --topology-file naming the host's leaf and port:
//                                       host=* netdev=ens1f0np0 system=leafLL port=Ethernet1/K
//                                       chassis=02:fa:b0:01:00:LL
//   DIR/host-NN/spans.jsonl             decode-step spans and GenAI-shaped request
//                                       spans, one JSON object a line (the
//                                       `fabricscope push` input)
//   DIR/host-NN/nccl-inspector/fabricsim-pid70000.log
//                                       each decode step's all-reduce as NCCL's
//                                       Inspector plugin dumps it (InspectorJson;
//                                       a --nccl-inspector-dir)
//   DIR/ground_truth.json               FleetGroundTruthJson, rewritten atomically
// The topology line says host=*: every simulated host's daemon runs on the same
// machine under the same hostname, so a line naming host-NN would match none
// of them; each daemon gets its own file instead.
//
// Thread-safety: none; one thread drives a FleetWriter.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/fabricsim/fleet.h"
#include "tools/fabricsim/fleet_scenario.h"
#include "tools/fabricsim/writer.h"

namespace fabricsim {

// The (pretend) process id of each host's decode worker in its Inspector file.
inline constexpr int kFleetInspectorPid = 70000;

// Ground-truth thresholds, over an episode's elapsed time.
inline constexpr double kVictimRxPauseFraction = 0.05;  // a victim's rx pause
inline constexpr double kCongestedFraction = 0.1;       // an egress paused or over Kmin
inline constexpr double kPausingFraction = 0.05;        // an ingress port sending XOFF

// The --topology-file of one host.
std::string FleetTopologyFile(const Fleet& fleet, int host);

// What TreeWriter writes for one host.
TreeSource FleetTreeSource(const Fleet& fleet, int host);

// The ground-truth document at the fleet's model time. `finished`: the run
// has ended (end_unix_nano set).
std::string FleetGroundTruthJson(const Fleet& fleet, const FleetScenario& scenario,
                                 int64_t start_unix_ns, bool finished);

class FleetWriter {
 public:
  FleetWriter(std::string out_dir, int64_t start_unix_ns);
  ~FleetWriter();
  FleetWriter(const FleetWriter&) = delete;
  FleetWriter& operator=(const FleetWriter&) = delete;

  // Creates the directories and writes the topology files.
  absl::Status Init(const Fleet& fleet);
  // Updates every host's tree.
  absl::Status WriteTrees(const Fleet& fleet);
  // Appends the spans finished since the last call (takes them from `fleet`).
  absl::Status WriteSpans(Fleet& fleet, const std::string& scenario);
  // Rewrites ground_truth.json when an episode started or ended, every
  // second of model time while one runs, and when `finished`.
  absl::Status WriteGroundTruth(const Fleet& fleet, const FleetScenario& scenario, bool finished);
  uint64_t files_written() const;

 private:
  std::string out_dir_;
  int64_t start_unix_ns_;
  std::vector<std::unique_ptr<TreeWriter>> trees_;
  std::vector<std::FILE*> spans_;
  std::vector<std::FILE*> inspector_;
  std::vector<uint64_t> inspector_sn_;  // each host's collective sequence number
  int64_t gt_signature_ = -1;
  int64_t gt_written_ns_ = -1;
};

}  // namespace fabricsim
