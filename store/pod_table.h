// Which Kubernetes pod holds what on this host: the devices the kubelet
// allocated to each container and the processes known to run in one.
//
// The kubernetes source (daemon/kubernetes/kubernetes_source.h) builds a
// PodTable each config tick from the kubelet's PodResources API, the host's
// /proc and the kubelet's log tree, and replaces the inventory's
// (PortInventory::SetPods) as a whole. The exporter
// (fabricscope_pod_device_info, pod labels of the per-process series), the
// correlator (a pod-attributed span is judged on its pod's devices) and the
// query engine (--pod) read it.
//
// Bounds: the source caps devices and processes (kMaxPodDevices,
// kMaxPodProcesses); label values are the kubelet's names, bounded by the
// pods on one node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fabricscope {

inline constexpr size_t kMaxPodDevices = 4096;
inline constexpr size_t kMaxPodProcesses = 4096;

// A container of a pod. `uid` is the pod's UID where a source said it (the
// cgroup path, a span's k8s.pod.uid); the PodResources API names pods by
// namespace and name only.
struct PodRef {
  std::string ns;
  std::string pod;
  std::string container;
  std::string uid;

  bool named() const { return !pod.empty(); }
  // "namespace/pod", "namespace/pod/container" with the container.
  std::string Name(bool with_container = true) const;
  // Same pod (namespace and name, else uid).
  bool SamePod(const PodRef& other) const;

  friend bool operator==(const PodRef&, const PodRef&) = default;
};

enum class PodDeviceKind : uint8_t {
  kGpu,         // a GPU of this host: bus_id
  kRdma,        // an RDMA device of this host (a PF, or an SR-IOV VF): device, bus_id
  kPci,         // a PCI address of this host that is no RDMA device: bus_id
  kUnresolved,  // an id that names no device here (RDMA shared device plugin, MIG, gone)
};
const char* PodDeviceKindName(PodDeviceKind kind);  // "gpu", "rdma", "pci", "unresolved"

// One device id the kubelet allocated to a container.
struct PodDevice {
  PodRef owner;
  std::string resource;   // "nvidia.com/gpu", "nvidia.com/cx7_vf", "rdma/hca_shared"
  std::string device_id;  // as the kubelet gave it
  PodDeviceKind kind = PodDeviceKind::kUnresolved;
  std::string device;         // kRdma: the RDMA device ("mlx5_2")
  std::string parent_device;  // kRdma, a VF: its PF's RDMA device (its physical port)
  std::string bus_id;         // kGpu, kRdma, kPci: the PCI address ("0000:1b:00.0")

  friend bool operator==(const PodDevice&, const PodDevice&) = default;
};

// A process attributed to a container, and by what.
struct PodProcess {
  uint32_t pid = 0;  // in the daemon's (the host's) pid namespace
  // The pid the process has in its own pid namespace (the container's: what
  // an OpenTelemetry SDK inside it reports as process.pid); 0 when it shares
  // the host's.
  uint32_t ns_pid = 0;
  PodRef owner;
  std::string via;  // "devices" or "cgroup"

  friend bool operator==(const PodProcess&, const PodProcess&) = default;
};

struct PodTable {
  std::vector<PodDevice> devices;
  std::vector<PodProcess> processes;  // ascending pid

  // The pod of `pid`, null when none is known.
  const PodProcess* FindProcess(uint32_t pid) const;
  // The process a span's process.pid names. An SDK inside a container reports
  // its pid in the container's pid namespace, so `pid` may be a host pid or
  // a container's: the process whose container pid it is and whose pod is
  // `host_name` (a container's hostname is its pod's name unless the pod sets
  // one) wins, else the one host process with that pid, else the one
  // container process with that container pid; null when none or several
  // could be meant.
  const PodProcess* FindSpanProcess(uint32_t pid, absl::string_view host_name) const;
  // The named pod whose UID is `uid` (from a process attributed by both its
  // devices and cgroup, or a device owner that carries it); null if none.
  const PodRef* FindUid(absl::string_view uid) const;
  // The devices of `pod` (its container's alone when `pod.container` is set
  // and that container holds any).
  std::vector<const PodDevice*> DevicesOf(const PodRef& pod) const;

  friend bool operator==(const PodTable&, const PodTable&) = default;
};

// The pod named by a span's OpenTelemetry resource attributes
// (k8s.namespace.name, k8s.pod.name, k8s.container.name, k8s.pod.uid); an
// empty PodRef when it has none of the pod's name or UID.
PodRef PodFromAttributes(const std::vector<std::pair<std::string, std::string>>& attributes);

}  // namespace fabricscope
