// fabricsim: a small RoCE fabric simulator. Writes a live fake sysfs tree and
// `ethtool -S` files for fabricscoped to poll, decode-step spans as JSON lines
// (for `fabricscope push`), the scenario's ground truth, and optionally a JSON
// Lines recording (docs/recording.md). See tools/fabricsim/model.h for the
// model and tools/fabricsim/scenario.h for the scenarios.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/version.h"
#include "tools/fabricsim/fleet_run.h"
#include "tools/fabricsim/fleet_scenario.h"
#include "tools/fabricsim/kubelet.h"
#include "tools/fabricsim/model.h"
#include "tools/fabricsim/scenario.h"
#include "tools/fabricsim/writer.h"

namespace fabricsim {
namespace {

std::atomic<bool> g_stop{false};
// The pretend process ids of the ports' decode workers (Inspector file names).
constexpr int kInspectorPidBase = 70000;
void OnSignal(int) { g_stop.store(true); }

struct Flags {
  std::string scenario = "mixed";
  uint64_t seed = 1;
  int ports = 2;
  int senders = 8;
  int64_t step_ns = 50'000;
  std::string sysfs_root, ethtool_dir, dcb_dir, spans_out, ground_truth, record;
  std::string nccl_inspector_out;
  int64_t record_interval_ns = 10'000'000;
  int64_t duration_ns = -1;
  int64_t steps = -1;
  bool fast = false;
  int64_t start_unix_ns = -1;
  int64_t write_interval_ns = 10'000'000;
  int exit_with_pid = 0;
  std::string remove_on_exit;
  std::string ready_file;
  std::string kubelet_socket;
  bool verbose = false;
  // Fleet mode (--hosts).
  int hosts = 0;
  std::string fabric, out_dir;
  FleetEpisodeTiming timing;
  int origin = -1;
  std::vector<std::string> given;  // flag names seen, for the mode checks
};

constexpr char kUsage[] =
    "usage: fabricsim [--flag=value | --flag value ...]\n"
    "\n"
    "Simulates a small RoCE fabric seen from one host with mlx5 ports and writes\n"
    "what fabricscoped reads on a real host.\n"
    "\n"
    "  --scenario=NAME          scenario (default mixed; --list-scenarios)\n"
    "  --seed=N                 random seed; same seed and start time, same output (default 1)\n"
    "  --ports=N                local mlx5 ports mlx5_0.. / eth2.. (default 2)\n"
    "  --senders=N              senders per switch queue (default 8)\n"
    "  --step=DUR               model time step (default 50us)\n"
    "  --sysfs-root=DIR         write a live /sys-like tree there (class/infiniband, class/net)\n"
    "  --ethtool-dir=DIR        write one `ethtool -S` file per netdev there\n"
    "  --dcb-dir=DIR            write one `dcb pfc show` file per netdev there (PFC on the\n"
    "                           scenario's priority; fabricscoped --dcb-dir)\n"
    "  --spans-out=FILE|-       decode-step spans as JSON lines (- is stdout)\n"
    "  --nccl-inspector-out=DIR each decode step's all-reduce as NCCL's Inspector plugin dumps\n"
    "                           it: DIR/fabricsim-pid<N>.log, one file per port\n"
    "  --ground-truth=FILE      the scenario's injected events as JSON (rewritten as they happen)\n"
    "  --record=FILE            a JSON Lines recording (docs/recording.md)\n"
    "  --record-interval=DUR    recording sample interval (default 10ms)\n"
    "  --duration=DUR           stop after this much model time\n"
    "  --steps=N                stop after N model steps\n"
    "  --as-fast-as-possible    do not pace to the wall clock (needs --duration or --steps)\n"
    "  --start-unix-ns=N        unix time of model time 0 (default: now)\n"
    "  --write-interval=DUR     live tree update period in wall time (default 10ms)\n"
    "  --exit-with-pid=PID      stop when process PID is gone\n"
    "  --remove-on-exit=DIR     remove DIR on exit (must hold a .fabricsim-remove-ok file)\n"
    "  --ready-file=PATH        write PATH once the first whole live tree is written\n"
    "  --kubelet-socket=PATH    serve the kubelet's PodResources API on PATH (mode 0666):\n"
    "                           pod inference/vllm-decode-N holds port N's RDMA device,\n"
    "                           inference/sglang-0 an RDMA shared-device id naming none\n"
    "  --verbose                log progress to stderr\n"
    "  --list-scenarios         print the scenarios\n"
    "  --version                print the version\n"
    "  --help\n"
    "\n"
    "Fleet mode: many hosts on a leaf-spine fabric (tools/fabricsim/fleet.h)\n"
    "\n"
    "  fabricsim --hosts=N --fabric=leaf-spine:LEAVES,SPINES[,HOSTS_PER_LEAF] --scenario=NAME\n"
    "            --out=DIR [--seed=N] [--step=DUR] [--duration=DUR] [--as-fast-as-possible]\n"
    "            [--start-unix-ns=N] [--write-interval=DUR] [--exit-with-pid=PID]\n"
    "            [--remove-on-exit=DIR] [--episode-start=DUR] [--episode-length=DUR]\n"
    "            [--episode-period=DUR] [--origin=host-NN] [--verbose]\n"
    "\n"
    "  --hosts=N                hosts host-01..host-NN, one RoCE port each (mlx5_0 port 1,\n"
    "                           netdev ens1f0np0)\n"
    "  --fabric=leaf-spine:L,S[,H]  L leaves leaf01.., S spines spine01.., H hosts per leaf\n"
    "                           (default ceil(N/L)); host k of a leaf (k=1..H) is on its port\n"
    "                           Ethernet1/k, its uplink to spine s on Ethernet1/(H+s), spine\n"
    "                           port Ethernet1/l faces leaf l\n"
    "  --out=DIR                output directory (below)\n"
    "  --step=DUR               model step (default 100us in fleet mode)\n"
    "  --write-interval=DUR     live tree update period (default 100ms in fleet mode)\n"
    "  --episode-start=DUR      first episode start after the run start (default 20s)\n"
    "  --episode-length=DUR     episode length (default 40s)\n"
    "  --episode-period=DUR     episodes repeat with this period (default 90s)\n"
    "  --origin=host-NN         the host every episode targets (default: drawn per episode\n"
    "                           from the seed)\n"
    "  Scenarios:\n"
    "$FLEET_SCENARIOS"
    "  Files written (NN: the host number, two digits or more):\n"
    "    DIR/host-NN/sys/class/infiniband/mlx5_0/ports/1/{hw_counters,counters}/*, state, ...\n"
    "    DIR/host-NN/sys/class/net/ens1f0np0/...   (pass as --sysfs-root=DIR/host-NN/sys)\n"
    "    DIR/host-NN/ethtool/ens1f0np0             `ethtool -S` text (--ethtool-dir)\n"
    "    DIR/host-NN/topology                      --topology-file: host=* netdev=ens1f0np0\n"
    "                                              system=leafLL port=Ethernet1/K chassis=...\n"
    "                                              (host=*: all daemons share one hostname)\n"
    "    DIR/host-NN/spans.jsonl                   decode-step and GenAI request spans\n"
    "                                              (`fabricscope push` input)\n"
    "    DIR/host-NN/nccl-inspector/               each step's all-reduce as NCCL Inspector\n"
    "                                              dumps it (--nccl-inspector-dir)\n"
    "    DIR/ground_truth.json                     scenario, fabric, host->leaf/port map and per\n"
    "                                              episode: start/end, origin, congested switch\n"
    "                                              ports, pausing switch ports, victims\n";

absl::StatusOr<int64_t> ParseDurationNs(absl::string_view key, absl::string_view v) {
  absl::Duration d;
  if (!absl::ParseDuration(v, &d) || d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": '", v, "' is not a positive duration (e.g. 50us, 10ms, 5s)"));
  }
  return absl::ToInt64Nanoseconds(d);
}

template <typename T>
absl::Status ParseInt(absl::string_view key, absl::string_view v, T* out, int64_t min) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(v, &x) || x < min) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": '", v, "' is not an integer >= ", min));
  }
  *out = static_cast<T>(x);
  return absl::OkStatus();
}

// Returns 1 to exit 0 (help printed), 0 to run, or an error.
absl::StatusOr<int> ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::string usage = kUsage;
      usage.replace(usage.find("$FLEET_SCENARIOS"), 16, FleetScenario::Describe());
      std::fputs(usage.c_str(), stdout);
      return 1;
    }
    if (arg == "--list-scenarios") {
      std::fputs(Scenario::Describe().c_str(), stdout);
      return 1;
    }
    if (arg == "--version") {
      std::printf("fabricsim %s (revision %s)\n", fabricscope::kVersion, fabricscope::kRevision);
      return 1;
    }
    if (arg == "--as-fast-as-possible") {
      f->fast = true;
      continue;
    }
    if (arg == "--verbose") {
      f->verbose = true;
      continue;
    }
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", arg, "' (see --help)"));
    }
    // --flag=value, or --flag value as the other two binaries accept.
    absl::string_view key, v;
    if (size_t eq = arg.find('='); eq != absl::string_view::npos) {
      key = arg.substr(2, eq - 2);
      v = arg.substr(eq + 1);
    } else {
      key = arg.substr(2);
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", key, " needs a value (--", key, "=VALUE or --", key, " VALUE)"));
      }
      v = argv[++i];
    }
    absl::Status s;
    f->given.emplace_back(key);
    if (key == "scenario") {
      f->scenario = std::string(v);
    } else if (key == "seed") {
      s = ParseInt(key, v, &f->seed, 0);
    } else if (key == "ports") {
      s = ParseInt(key, v, &f->ports, 1);
    } else if (key == "senders") {
      s = ParseInt(key, v, &f->senders, 2);
    } else if (key == "step") {
      auto d = ParseDurationNs(key, v);
      if (!d.ok()) return d.status();
      f->step_ns = *d;
    } else if (key == "hosts") {
      s = ParseInt(key, v, &f->hosts, 2);
    } else if (key == "fabric") {
      f->fabric = std::string(v);
    } else if (key == "out") {
      f->out_dir = std::string(v);
    } else if (key == "episode-start") {
      absl::Duration d;
      if (!absl::ParseDuration(v, &d) || d < absl::ZeroDuration()) {
        return absl::InvalidArgumentError(absl::StrCat(key, ": '", v, "' is not a duration >= 0"));
      }
      f->timing.first_start_ns = absl::ToInt64Nanoseconds(d);
    } else if (key == "episode-length") {
      auto d = ParseDurationNs(key, v);
      if (!d.ok()) return d.status();
      f->timing.length_ns = *d;
    } else if (key == "episode-period") {
      auto d = ParseDurationNs(key, v);
      if (!d.ok()) return d.status();
      f->timing.period_ns = *d;
    } else if (key == "origin") {
      int n = 0;
      if (!absl::StartsWith(v, "host-") || !absl::SimpleAtoi(v.substr(5), &n) || n < 1) {
        return absl::InvalidArgumentError(absl::StrCat(key, ": '", v, "' is not host-NN"));
      }
      f->origin = n - 1;
    } else if (key == "sysfs-root") {
      f->sysfs_root = std::string(v);
    } else if (key == "ethtool-dir") {
      f->ethtool_dir = std::string(v);
    } else if (key == "dcb-dir") {
      f->dcb_dir = std::string(v);
    } else if (key == "spans-out") {
      f->spans_out = std::string(v);
    } else if (key == "nccl-inspector-out") {
      f->nccl_inspector_out = std::string(v);
    } else if (key == "ground-truth") {
      f->ground_truth = std::string(v);
    } else if (key == "record") {
      f->record = std::string(v);
    } else if (key == "record-interval") {
      auto d = ParseDurationNs(key, v);
      if (!d.ok()) return d.status();
      f->record_interval_ns = *d;
    } else if (key == "duration") {
      auto d = ParseDurationNs(key, v);
      if (!d.ok()) return d.status();
      f->duration_ns = *d;
    } else if (key == "steps") {
      s = ParseInt(key, v, &f->steps, 1);
    } else if (key == "start-unix-ns") {
      s = ParseInt(key, v, &f->start_unix_ns, 0);
    } else if (key == "write-interval") {
      auto d = ParseDurationNs(key, v);
      if (!d.ok()) return d.status();
      f->write_interval_ns = *d;
    } else if (key == "exit-with-pid") {
      s = ParseInt(key, v, &f->exit_with_pid, 1);
    } else if (key == "remove-on-exit") {
      f->remove_on_exit = std::string(v);
    } else if (key == "ready-file") {
      f->ready_file = std::string(v);
    } else if (key == "kubelet-socket") {
      f->kubelet_socket = std::string(v);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", key, " (see --help)"));
    }
    if (!s.ok()) return s;
  }
  auto given = [&](absl::string_view k) {
    return std::find(f->given.begin(), f->given.end(), k) != f->given.end();
  };
  if (f->hosts > 0) {
    for (const char* k :
         {"sysfs-root", "ethtool-dir", "dcb-dir", "spans-out", "nccl-inspector-out", "ground-truth",
          "record", "record-interval", "ports", "senders", "steps", "kubelet-socket"}) {
      if (given(k)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", k, " is a single-host flag; with --hosts use --out (see --help)"));
      }
    }
    if (!given("step")) f->step_ns = 100'000;
    if (!given("write-interval")) f->write_interval_ns = 100'000'000;
    if (!given("scenario")) f->scenario = "quiet";
  } else {
    for (const char* k :
         {"fabric", "out", "episode-start", "episode-length", "episode-period", "origin"}) {
      if (given(k)) return absl::InvalidArgumentError(absl::StrCat("--", k, " needs --hosts"));
    }
  }
  if (f->fast && f->duration_ns < 0 && f->steps < 0) {
    return absl::InvalidArgumentError("--as-fast-as-possible needs --duration or --steps");
  }
  return 0;
}

int64_t WallNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Span output that never blocks the simulation: lines are queued and written
// without blocking when the output is a pipe (a slow or absent reader must not
// stall the live tree). Whole lines only; when more than kMaxPending bytes are
// queued, new spans are dropped (and counted) until the reader catches up.
class SpanSink {
 public:
  static constexpr size_t kMaxPending = 1 << 20;
  // `nonblocking`: real-time mode; as fast as possible, the reader sets the pace.
  SpanSink(int fd, bool nonblocking) : fd_(fd) {
    struct stat st;
    if (nonblocking && fstat(fd_, &st) == 0 && S_ISFIFO(st.st_mode)) {
      fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
    }
  }
  void Add(const std::string& line) {
    if (failed_) return;
    if (pending_.size() > kMaxPending) {
      ++dropped_;
      return;
    }
    pending_ += line;
    pending_ += '\n';
  }
  // Writes what the reader takes now (blocks only on a regular file).
  void Flush() {
    while (!failed_ && !pending_.empty()) {
      ssize_t n = write(fd_, pending_.data(), pending_.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) failed_ = true;  // EPIPE: reader gone
        return;
      }
      pending_.erase(0, static_cast<size_t>(n));
    }
  }
  uint64_t dropped() const { return dropped_; }
  bool failed() const { return failed_; }

 private:
  int fd_;
  std::string pending_;
  uint64_t dropped_ = 0;
  bool failed_ = false;
};

void RemoveOnExit(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / ".fabricsim-remove-ok", ec)) {
    std::fprintf(stderr, "fabricsim: not removing %s: no .fabricsim-remove-ok marker\n",
                 dir.c_str());
    return;
  }
  std::filesystem::remove_all(dir, ec);
}

int RunFleetMode(const Flags& f) {
  FleetRunOptions o;
  o.hosts = f.hosts;
  o.fabric = f.fabric;
  o.scenario = f.scenario;
  o.out_dir = f.out_dir;
  o.seed = f.seed;
  o.step_ns = f.step_ns;
  o.timing = f.timing;
  o.origin = f.origin;
  o.duration_ns = f.duration_ns;
  o.fast = f.fast;
  o.start_unix_ns = f.start_unix_ns;
  o.write_interval_ns = f.write_interval_ns;
  o.exit_with_pid = f.exit_with_pid;
  o.verbose = f.verbose;
  int rc = RunFleet(o, g_stop);
  RemoveOnExit(f.remove_on_exit);
  return rc;
}

int Run(const Flags& f) {
  if (f.hosts > 0) return RunFleetMode(f);
  auto scenario = Scenario::Make(f.scenario, f.ports);
  if (!scenario.ok()) {
    std::fprintf(stderr, "fabricsim: %s\n", std::string(scenario.status().message()).c_str());
    return 2;
  }
  FabricOptions options;
  options.ports = f.ports;
  options.senders = f.senders;
  options.step_ns = f.step_ns;
  options.seed = f.seed;
  Fabric fabric(options, &*scenario);

  const int64_t start_unix_ns = f.start_unix_ns >= 0 ? f.start_unix_ns : WallNowNs();
  int64_t end_ns = std::numeric_limits<int64_t>::max();
  if (f.duration_ns > 0) end_ns = f.duration_ns;
  if (f.steps > 0) end_ns = std::min(end_ns, f.steps * f.step_ns);

  int spans_fd = -1;
  if (f.spans_out == "-") {
    spans_fd = STDOUT_FILENO;
  } else if (!f.spans_out.empty()) {
    spans_fd = open(f.spans_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (spans_fd < 0) {
      std::fprintf(stderr, "fabricsim: --spans-out %s: %s\n", f.spans_out.c_str(),
                   std::strerror(errno));
      return 1;
    }
  }
  std::unique_ptr<SpanSink> spans;
  if (spans_fd >= 0) spans = std::make_unique<SpanSink>(spans_fd, !f.fast);
  std::FILE* record = nullptr;
  if (!f.record.empty()) {
    record = std::fopen(f.record.c_str(), "w");
    if (record == nullptr) {
      std::fprintf(stderr, "fabricsim: --record %s: %s\n", f.record.c_str(), std::strerror(errno));
      return 1;
    }
  }
  std::unique_ptr<RecordingWriter> recorder;
  if (record != nullptr) recorder = std::make_unique<RecordingWriter>(record, start_unix_ns);
  TreeWriter tree(f.sysfs_root, f.ethtool_dir);
  tree.set_dcb_dir(f.dcb_dir);
  const bool write_tree = !f.sysfs_root.empty() || !f.ethtool_dir.empty() || !f.dcb_dir.empty();
  std::string gt_tmp;
  if (!f.ground_truth.empty()) {
    std::filesystem::path p(f.ground_truth);
    gt_tmp = p.has_parent_path() ? p.parent_path().string() : ".";
  }

  // The kubelet's PodResources API: one pod per port's RDMA device.
  fabricscope::FakeKubelet kubelet;
  if (!f.kubelet_socket.empty()) {
    std::string pods;
    for (size_t p = 0; p < fabric.ports().size(); ++p) {
      absl::StrAppend(&pods, "inference vllm-decode-", p, " engine fabricsim.io/rdma ",
                      fabric.ports()[p].device, "\n");
    }
    absl::StrAppend(&pods, "inference sglang-0 worker rdma/hca_shared_devices_a shared-0\n");
    absl::Status st = kubelet.SetFromText(pods);
    if (st.ok()) st = kubelet.Start(f.kubelet_socket);
    if (!st.ok() || ::chmod(f.kubelet_socket.c_str(), 0666) != 0) {
      std::fprintf(stderr, "fabricsim: --kubelet-socket %s: %s\n", f.kubelet_socket.c_str(),
                   st.ok() ? std::strerror(errno) : std::string(st.message()).c_str());
      return 1;
    }
  }

  // NCCL Inspector dump files, one per port's (pretend) process.
  std::vector<std::unique_ptr<std::ofstream>> inspector;
  std::vector<uint64_t> inspector_sn;
  if (!f.nccl_inspector_out.empty()) {
    std::filesystem::create_directories(f.nccl_inspector_out);
    for (size_t p = 0; p < fabric.ports().size(); ++p) {
      inspector.push_back(std::make_unique<std::ofstream>(
          absl::StrCat(f.nccl_inspector_out, "/fabricsim-pid", kInspectorPidBase + p, ".log"),
          std::ios::app));
      inspector_sn.push_back(0);
    }
  }
  auto flush_spans = [&]() {
    for (const SpanRecord& span : fabric.TakeSpans()) {
      std::string json =
          SpanJson(span, fabric.ports()[span.port_index], start_unix_ns, scenario->name());
      if (spans) spans->Add(json);
      if (recorder) recorder->Span(json);
      if (!inspector.empty() && !span.request) {
        const size_t p = static_cast<size_t>(span.port_index);
        *inspector[p] << InspectorJson(span, span.port_index, start_unix_ns, ++inspector_sn[p],
                                       kInspectorPidBase + static_cast<int>(p))
                      << "\n";
      }
    }
    for (auto& out : inspector) out->flush();
  };
  int64_t next_sample = 0;
  auto run_to = [&](int64_t t) {
    while (recorder && next_sample <= t) {
      fabric.AdvanceTo(next_sample);
      flush_spans();
      recorder->Sample(fabric);
      next_sample += f.record_interval_ns;
    }
    fabric.AdvanceTo(t);
    flush_spans();
  };
  size_t gt_signature = std::numeric_limits<size_t>::max();
  auto write_ground_truth = [&](bool finished) {
    if (f.ground_truth.empty()) return;
    // Rewrite only when an event started or ended (or at the end).
    size_t sig = 0;
    for (const GroundTruthEvent& e : scenario->GroundTruth(fabric.now_ns(), 0)) {
      sig += 1 + (e.end_ns <= fabric.now_ns() ? 1 : 0);
    }
    if (!finished && sig == gt_signature) return;
    gt_signature = sig;
    auto s = WriteFileAtomic(
        gt_tmp, f.ground_truth,
        GroundTruthJson(*scenario, f.seed, fabric, start_unix_ns, fabric.now_ns(), finished));
    if (!s.ok()) std::fprintf(stderr, "fabricsim: %s\n", std::string(s.message()).c_str());
  };

  if (f.verbose) {
    std::fprintf(stderr, "fabricsim: scenario=%s seed=%llu ports=%d sysfs-root=%s ethtool-dir=%s\n",
                 scenario->name().c_str(), static_cast<unsigned long long>(f.seed), f.ports,
                 f.sysfs_root.c_str(), f.ethtool_dir.c_str());
  }
  const auto wall_start = std::chrono::steady_clock::now();
  const int64_t batch_ns = f.fast ? 100'000'000 : f.write_interval_ns;
  int rc = 0;
  for (int64_t batch = 1; !g_stop.load(); ++batch) {
    int64_t target;
    if (f.fast) {
      target = std::min(end_ns, fabric.now_ns() + batch_ns);
    } else {
      auto elapsed = std::chrono::steady_clock::now() - wall_start;
      target = std::min<int64_t>(
          end_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
    }
    run_to(target);
    if (write_tree) {
      if (auto s = tree.Write(fabric); !s.ok()) {
        std::fprintf(stderr, "fabricsim: %s\n", std::string(s.message()).c_str());
        rc = 1;
        break;
      }
      // Every port's files exist now: a reader that starts on the tree (the
      // daemon discovers ports at its start) finds them all.
      if (batch == 1 && !f.ready_file.empty()) {
        std::filesystem::path p(f.ready_file);
        auto s = WriteFileAtomic(p.has_parent_path() ? p.parent_path().string() : ".", f.ready_file,
                                 "ready\n");
        if (!s.ok()) std::fprintf(stderr, "fabricsim: %s\n", std::string(s.message()).c_str());
      }
    }
    if (spans) spans->Flush();
    write_ground_truth(false);
    if (target >= end_ns) break;
    if (f.exit_with_pid > 0 && kill(f.exit_with_pid, 0) != 0 && errno == ESRCH) {
      if (f.verbose)
        std::fprintf(stderr, "fabricsim: process %d is gone; stopping\n", f.exit_with_pid);
      break;
    }
    if (!f.fast) {
      auto deadline = wall_start + std::chrono::nanoseconds(batch * batch_ns);
      auto wait = deadline - std::chrono::steady_clock::now();
      if (wait > std::chrono::nanoseconds(0)) {
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
        timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
        nanosleep(&ts, nullptr);  // a signal cuts it short; the loop re-checks g_stop
      } else {
        batch = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - wall_start)
                    .count() /
                batch_ns;  // fell behind: skip missed batches, never accumulate
      }
    }
  }
  write_ground_truth(true);
  if (spans) {
    // What is left: written out, except to a pipe in real-time mode (the
    // reader may be gone with the daemon).
    spans->Flush();
    if (spans->dropped() > 0) {
      std::fprintf(stderr, "fabricsim: %llu spans dropped (the span reader was too slow)\n",
                   static_cast<unsigned long long>(spans->dropped()));
    }
    if (spans_fd != STDOUT_FILENO) close(spans_fd);
  }
  if (record != nullptr) {
    if (std::fclose(record) != 0 || !recorder->ok()) {
      std::fprintf(stderr, "fabricsim: writing --record %s failed\n", f.record.c_str());
      rc = 1;
    }
  }
  if (f.verbose) {
    std::fprintf(stderr, "fabricsim: stopped at model time %.3f s, %llu files written\n",
                 static_cast<double>(fabric.now_ns()) / 1e9,
                 static_cast<unsigned long long>(tree.files_written()));
  }
  RemoveOnExit(f.remove_on_exit);
  return rc;
}

}  // namespace
}  // namespace fabricsim

int main(int argc, char** argv) {
  using namespace fabricsim;
  Flags flags;
  auto parsed = ParseFlags(argc, argv, &flags);
  if (!parsed.ok()) {
    std::fprintf(stderr, "fabricsim: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  if (*parsed == 1) return 0;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return Run(flags);
}
