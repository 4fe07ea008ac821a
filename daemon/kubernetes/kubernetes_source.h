// The kubernetes source: which pod holds which device and process on this
// host (store/pod_table.h), for the exporter, the correlator and the query
// engine.
//
// Each poll (every --config-interval, on its own thread):
//  1. Allocations: the kubelet's PodResources v1 List (kubelet/podresources/
//     v1/api.proto) over its unix socket (--kubernetes-socket), with a
//     deadline (2 s): per pod and container, the device ids of each resource,
//     at most kMaxPodDevices. Each id is resolved against this host:
//       "GPU-<uuid>[::N]"  a GPU by its UUID (PROC/driver/nvidia/gpus/*/
//                          information; the ::N replica suffix of time-slicing
//                          dropped) -> gpu, bus_id;
//       a PCI address      an SR-IOV VF or a PF -> rdma with its RDMA device
//                          (and a VF's PF as parent_device), else pci;
//       an RDMA device name -> rdma;
//       anything else      (the RDMA shared device plugin's ids, MIG UUIDs, a
//                          device gone) -> unresolved: listed, naming nothing.
//     A failed List (the kubelet absent, restarting, too slow) keeps the last
//     allocations it gave (pods outlive a kubelet restart): one warning when
//     it starts failing, one info line when it answers again, never a line
//     per poll; fabricscope_kubernetes_up says which.
//  2. Processes: every PROC/<pid> (at most kMaxPidsScanned) whose cgroup
//     names a pod (host_view.h, ParsePodCgroup), at most kMaxPodProcesses.
//     A process is attributed by
//       devices: the GPUs (/dev/nvidiaN) and RDMA devices
//                (/dev/infiniband/uverbsN) it has open, joined with the
//                allocations, when they name exactly one container and that
//                container's pod is not contradicted by the cgroup (a pod
//                the log tree names differently);
//       cgroup:  else its cgroup's pod UID and container id, named through
//                the kubelet's log tree (--kubernetes-log-dir) or through
//                another process of the same pod UID attributed by devices;
//                a pod known by UID alone stays unnamed (no labels).
//     Each pod process also records its pid inside its container's pid
//     namespace (the last NSpid of PROC/<pid>/status): an SDK in a container
//     reports that one as process.pid (PodTable::FindSpanProcess).
//     Why devices first: they are the kubelet's own record, with the names
//     the operator uses, and need no other mount; the cgroup is the fallback
//     for processes that hold no allocated device (a shared RDMA device, a
//     CPU-side process of the pod) and the check against a privileged
//     process that opened another pod's device.
//  3. The table replaces the inventory's (PortInventory::SetPods).
//
// Threads: Start() runs one thread; PollOnce() polls on the calling thread
// (tests). Stop() (or the destructor) joins it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/metrics.h"
#include "store/pod_table.h"
#include "store/port_inventory.h"

namespace fabricscope {

struct KubernetesOptions {
  std::string socket;  // the kubelet's PodResources socket
  std::string proc_root = "/proc";
  std::string sysfs_root = "/sys";
  std::string log_dir = "/var/log";
  absl::Duration interval = absl::Seconds(10);
  absl::Duration deadline = absl::Seconds(2);
  size_t max_pids_scanned = 65536;
  size_t max_fds_per_process = 4096;
  size_t max_log_entries = 16384;
};

// One container's allocation of one resource, as the kubelet listed it.
struct PodAllocation {
  PodRef owner;
  std::string resource;
  std::vector<std::string> device_ids;
};

// The join (steps 1 and 2 above) over `allocations` and the host's files,
// exposed for tests. `processes_scanned`, when given, counts the PROC
// entries looked at.
PodTable BuildPodTable(const std::vector<PodAllocation>& allocations,
                       const KubernetesOptions& options, size_t* processes_scanned = nullptr);

class KubeletClient;

class KubernetesSource {
 public:
  // `ports` and `metrics` are borrowed and must outlive the source.
  KubernetesSource(KubernetesOptions options, PortInventory* ports, MetricsRegistry* metrics);
  ~KubernetesSource();
  KubernetesSource(const KubernetesSource&) = delete;
  KubernetesSource& operator=(const KubernetesSource&) = delete;

  void Start();
  void Stop();
  // One poll on the calling thread; the status of its List.
  absl::Status PollOnce();

 private:
  void Run();

  const KubernetesOptions options_;
  PortInventory* const ports_;
  std::unique_ptr<KubeletClient> client_;
  std::vector<PodAllocation> allocations_;  // the last List that answered
  bool up_ = true;                          // as last logged (starts "up": the first failure logs)
  prometheus::Gauge* up_gauge_ = nullptr;
  prometheus::Counter* polls_ok_ = nullptr;
  prometheus::Counter* polls_unavailable_ = nullptr;
  prometheus::Counter* polls_unsupported_ = nullptr;
  prometheus::Counter* polls_deadline_ = nullptr;
  prometheus::Counter* polls_error_ = nullptr;
  prometheus::Gauge* by_devices_ = nullptr;
  prometheus::Gauge* by_cgroup_ = nullptr;
  prometheus::Gauge* devices_gauge_[4] = {};  // by PodDeviceKind
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fabricscope
