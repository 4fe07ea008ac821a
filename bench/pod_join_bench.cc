// The kubernetes source's poll (daemon/kubernetes/kubernetes_source.h,
// BuildPodTable) on a fake host of the size of a busy inference node: N
// processes in /proc, of which one in ten is in a pod (cgroup v2, systemd
// driver) with 40 open fds (a GPU, a uverbs device, sockets); 8 GPUs and 8
// VFs allocated to 8 pods, the kubelet's log tree. The kubelet's List itself
// is not in it (one small gRPC call).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "daemon/kubernetes/kubernetes_source.h"

namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
}

std::string Uid(int pod) { return absl::StrFormat("8f2c1d90-3e5a-4b17-9c2e-%012x", pod); }
std::string Cid(int pod) { return absl::StrFormat("%064x", pod + 1); }

// The host under `root`, with `processes` processes; the allocations.
std::vector<fabricscope::PodAllocation> MakeHost(const fs::path& root, int processes) {
  fs::remove_all(root);
  std::vector<fabricscope::PodAllocation> allocations;
  for (int pod = 0; pod < 8; ++pod) {
    const std::string bus = absl::StrFormat("0000:%02x:00.0", 0x1b + pod);
    const std::string vf = absl::StrFormat("0000:%02x:00.2", 0x3b + pod);
    const std::string dev = absl::StrCat("mlx5_", 8 + pod);
    Write(root / "proc/driver/nvidia/gpus" / bus / "information",
          absl::StrCat("GPU UUID: \t GPU-", Uid(pod), "\nDevice Minor: \t ", pod, "\n"));
    fs::create_directories(root / "sys/bus/pci/devices" / vf / "infiniband" / dev);
    fs::create_directories(root / "sys/class/infiniband" / dev);
    Write(root / "sys/class/infiniband_verbs" / absl::StrCat("uverbs", 8 + pod) / "ibdev", dev);
    const std::string name = absl::StrCat("vllm-", pod);
    fs::create_directories(root / "log/pods" / absl::StrCat("llm_", name, "_", Uid(pod)) /
                           "engine");
    fabricscope::PodRef owner{"llm", name, "engine", ""};
    allocations.push_back({owner, "nvidia.com/gpu", {absl::StrCat("GPU-", Uid(pod))}});
    allocations.push_back({owner, "nvidia.com/cx7_vf", {vf}});
  }
  for (int pid = 100; pid < 100 + processes; ++pid) {
    const fs::path dir = root / "proc" / std::to_string(pid);
    const int pod = pid % 10 == 0 ? (pid / 10) % 8 : -1;
    if (pod < 0) {
      Write(dir / "cgroup", "0::/system.slice/some.service\n");
      continue;
    }
    std::string uid = Uid(pod);
    for (char& c : uid) c = c == '-' ? '_' : c;
    Write(dir / "cgroup",
          absl::StrCat("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod", uid,
                       ".slice/cri-containerd-", Cid(pod), ".scope\n"));
    Write(dir / "status", absl::StrCat("Name:\tpython3\nNSpid:\t", pid, "\t1\n"));
    fs::create_directories(dir / "fd");
    for (int fd = 0; fd < 40; ++fd) {
      const std::string target = fd == 3   ? absl::StrCat("/dev/nvidia", pod)
                                 : fd == 4 ? absl::StrCat("/dev/infiniband/uverbs", 8 + pod)
                                           : absl::StrCat("socket:[", 1000 + fd, "]");
      fs::create_symlink(target, dir / "fd" / std::to_string(fd));
    }
  }
  return allocations;
}

void BM_BuildPodTable(benchmark::State& state) {
  const fs::path root = fs::path("/tmp") / absl::StrCat("pod_join_bench_", ::getpid());
  const auto allocations = MakeHost(root, static_cast<int>(state.range(0)));
  fabricscope::KubernetesOptions o;
  o.proc_root = (root / "proc").string();
  o.sysfs_root = (root / "sys").string();
  o.log_dir = (root / "log").string();
  size_t processes = 0;
  for (auto _ : state) {
    fabricscope::PodTable t = fabricscope::BuildPodTable(allocations, o);
    processes = t.processes.size();
    benchmark::DoNotOptimize(t);
  }
  state.counters["pod_processes"] = static_cast<double>(processes);
  fs::remove_all(root);
}
BENCHMARK(BM_BuildPodTable)->Arg(500)->Arg(2000)->Arg(8000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
