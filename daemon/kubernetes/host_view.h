// What the host's files say about pods, processes and devices, for the
// kubernetes source (kubernetes_source.h). Pure readers of a filesystem root
// (PROC = --proc-root, SYS = --sysfs-root, LOGS = --kubernetes-log-dir), so
// the tests build the trees they read.
//
//   PROC/<pid>/cgroup    the kubelet's cgroup of a container process: the pod
//                        UID and container id (ParsePodCgroup)
//   PROC/<pid>/fd/*      links to /dev/nvidiaN (a GPU by device minor) and
//                        /dev/infiniband/uverbsN (an RDMA device)
//   PROC/driver/nvidia/gpus/<bus id>/information
//                        "GPU UUID:", "Device Minor:" of every NVIDIA GPU (no NVML)
//   SYS/class/infiniband_verbs/uverbsN/ibdev   the RDMA device of uverbsN
//   SYS/bus/pci/devices/<addr>/infiniband/<dev>  the RDMA device at a PCI
//                        address; <addr>/physfn: a VF's PF
//   LOGS/pods/<namespace>_<pod>_<uid>/<container>/   the kubelet's pod logs
//   LOGS/containers/<pod>_<namespace>_<container>-<container id>.log
//                        which names the pod and container behind a cgroup.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fabricscope {

// At most the first `max_bytes` of a (proc or sysfs) file; "" when it cannot
// be read.
std::string ReadHostFile(const std::string& path, size_t max_bytes);

// The pod UID and container id of a /proc/PID/cgroup file, in any of the
// kubelet's layouts: cgroup v1 (one line per hierarchy) or v2 ("0::"), the
// cgroupfs driver (/kubepods/<qos>/pod<uid>/<id>) or the systemd driver
// (/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid with _>.slice/
// cri-containerd-<id>.scope, docker-<id>.scope, crio-<id>.scope), also as a
// path relative to a cgroup namespace ("/../../kubepods-..."). The UID is
// returned with dashes; the container id is the 64-hex id, "" for a process
// of the pod's own cgroup (or crio's conmon). False when the file names no
// pod.
struct CgroupPod {
  std::string uid;
  std::string container_id;
};
bool ParsePodCgroup(absl::string_view file, CgroupPod* out);

// An NVIDIA GPU as /proc/driver/nvidia/gpus/<bus id>/information shows it.
struct NvidiaGpu {
  std::string bus_id;  // the directory name, "0000:1b:00.0"
  std::string uuid;    // "GPU-4b8a..."
  int minor = -1;      // /dev/nvidia<minor>
};
std::vector<NvidiaGpu> ReadNvidiaGpus(const std::string& proc_root);

// The devices a process has open (its fd links), at most `max_fds` looked at.
struct ProcessDevices {
  std::vector<int> nvidia_minors;   // /dev/nvidiaN
  std::vector<std::string> uverbs;  // "uverbs3" of /dev/infiniband/uverbs3
};
ProcessDevices ReadProcessDevices(const std::string& proc_root, uint32_t pid, size_t max_fds);

// The RDMA device behind uverbsN ("" when unknown).
std::string UverbsDevice(const std::string& sysfs_root, absl::string_view uverbs);

// What a PCI address is on this host: the RDMA device there (first listed),
// and for a VF its PF's RDMA device. `exists` false when no such PCI device.
struct PciDeviceView {
  bool exists = false;
  std::string rdma_device;
  std::string parent_rdma_device;
};
PciDeviceView ReadPciDevice(const std::string& sysfs_root, absl::string_view address);
// Whether `id` has the form of a PCI address ("0000:3b:00.2").
bool IsPciAddress(absl::string_view id);
// Whether SYS/class/infiniband/<name> exists.
bool IsRdmaDevice(const std::string& sysfs_root, absl::string_view name);

// The kubelet's log tree: pod UID -> namespace and name; container id ->
// container name. Bounded: at most `max_entries` directory entries of each.
struct PodLogTree {
  struct Pod {
    std::string ns;
    std::string name;
  };
  std::map<std::string, Pod> pods;                // by UID
  std::map<std::string, std::string> containers;  // container id -> container name
};
PodLogTree ReadPodLogTree(const std::string& log_dir, size_t max_entries);

}  // namespace fabricscope
