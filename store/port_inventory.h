// The port inventory: every RDMA port a collector (or a replayed recording)
// has discovered, with the attributes fabricscope_port_info renders.
//
// Who writes, who reads: the rdma_sysfs collector upserts a port at
// discovery and whenever its attributes change (hot-plug, link state);
// replay (daemon/recording) upserts the ports a recording names. The netdev,
// ethtool and dcb_config collectors read it at discovery to know which
// interfaces belong to RDMA ports, which is why the collector registry
// creates and discovers a collector that reads the inventory after the one
// that writes it (collectors/registry.h, CollectorDeps). The
// detectors (link rates), the correlator (span scope), the query engine and
// the Prometheus exporter read it too.
//
// The inventory also holds the host's topology (HostTopology below): link
// partners, PCI placement of each port, GPUs and GPU-NIC affinity. The
// topology collector (collectors/topology_collector.h) replaces it as a whole
// on each config tick; the correlator (GPU-scoped spans, partner names), the
// query engine and the CLI read it. Likewise the pods (store/pod_table.h):
// the kubernetes source replaces them each config tick.
//
// Records are keyed by (device, port): Upsert replaces the record with the
// same key in place, else appends. A port that vanished is upserted with
// present = false; records are never removed.
//
// Thread-safety: all methods are thread-safe (one mutex, held only to copy
// or replace records). Readers get copies.
//
// Ownership: the daemon owns one PortInventory next to its Store (the CLI's
// analyze builds one per recording); users hold plain pointers that it
// outlives.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "store/pod_table.h"

namespace fabricscope {

// An RDMA port as discovered by a collector (inventory, fabricscope_port_info).
struct PortInfo {
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  std::string link_layer;  // "Ethernet" or "InfiniBand"
  std::string state;       // "ACTIVE", "DOWN", ...
  std::string rate;        // "100 Gb/sec (4X EDR)"
  bool present = true;
  // After `present`, so that positional initialisers of the fields above stay valid.
  std::string driver;  // the signal table's driver name (RdmaDriverOf): "mlx5", "bnxt_re", ...
  std::string fw_ver;  // sysfs <dev>/fw_ver, "" where the driver leaves it empty
};

// The other end of a port's link, as one source saw it. A port is named by
// (device, port) when it is an RDMA port, else by netdev alone (an extra
// interface from --netdev-include): port 0 and device "".
struct LinkPartner {
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  std::string source;  // "lldp", "ib_mad" or "file"
  std::string chassis_id;
  std::string system_name;
  std::string port_id;
  std::string port_description;

  friend bool operator==(const LinkPartner&, const LinkPartner&) = default;
};

// Where an RDMA port sits on the PCI tree.
struct PortPci {
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  std::string pci_address;  // "0000:1b:00.0"
  int numa_node = -1;       // -1: unknown

  friend bool operator==(const PortPci&, const PortPci&) = default;
};

struct GpuInfo {
  std::string bus_id;  // PCI address, "0000:1b:00.0"
  int index = 0;       // position in PCI bus order (nvidia-smi's default order)
  std::string vendor;  // "nvidia", "amd", "intel" or the PCI vendor id "0x1234"
  std::string model;   // PCI device name where known, else the device id "0x2330"
  int numa_node = -1;

  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

// The PCI relation of a GPU and an RDMA device, as `nvidia-smi topo -m`
// names the classes; declared closest first (the order is the ranking).
enum class PciRelation : uint8_t {
  kPix,   // at most one PCIe bridge (switch) between them
  kPxb,   // several bridges, not through the host bridge
  kPhb,   // through a PCIe host bridge
  kNode,  // across host bridges within one NUMA node
  kSys,   // across NUMA nodes
};
const char* PciRelationName(PciRelation relation);  // "PIX", ...

struct GpuNicAffinity {
  std::string gpu_bus_id;
  int gpu_index = 0;
  std::string device;  // RDMA device
  PciRelation relation = PciRelation::kSys;

  friend bool operator==(const GpuNicAffinity&, const GpuNicAffinity&) = default;
};

struct HostTopology {
  std::vector<LinkPartner> partners;  // at most one per port
  std::vector<PortPci> ports;
  std::vector<GpuInfo> gpus;
  std::vector<GpuNicAffinity> affinity;  // every GPU x RDMA device pair with a known placement

  // The partner of (device, port), else of `netdev` when given; null if none.
  const LinkPartner* FindPartner(absl::string_view device, uint32_t port,
                                 absl::string_view netdev) const;
  // The GPU whose bus id or index (decimal) is `gpu`; bus ids compare without
  // case and with or without the "0000:" domain. Null if none.
  const GpuInfo* FindGpu(const std::string& gpu) const;

  friend bool operator==(const HostTopology&, const HostTopology&) = default;
};

class PortInventory {
 public:
  PortInventory() = default;
  PortInventory(const PortInventory&) = delete;
  PortInventory& operator=(const PortInventory&) = delete;

  // Inserts `port`, or replaces the record with the same (device, port),
  // keeping its position.
  void Upsert(const PortInfo& port);

  // Every record, in first-insertion order.
  std::vector<PortInfo> List() const;

  // Replaces the host topology as a whole / returns a copy of it.
  void SetTopology(HostTopology topology);
  HostTopology Topology() const;

  // The pods holding this host's devices and processes (store/pod_table.h),
  // replaced as a whole by the kubernetes source; never null (empty until
  // it first runs, and without it).
  void SetPods(PodTable pods);
  std::shared_ptr<const PodTable> Pods() const;

  // hw_counters source of a port: the rdma_netlink collector claims the ports
  // whose hardware counters it reads over RDMA netlink, and rdma_sysfs skips
  // the hw_counters files of a claimed port, so that each series has exactly
  // one writer (collectors/rdma_netlink_collector.h). Unclaimed: sysfs.
  void SetHwCountersClaim(const std::string& device, uint32_t port, bool claimed);
  bool HwCountersClaimed(const std::string& device, uint32_t port) const;
  // Bumped by every change of a claim: a reader re-checks its ports only when
  // it moved (one atomic load per tick).
  uint64_t HwCountersClaimsGeneration() const {
    return claims_generation_.load(std::memory_order_acquire);
  }

 private:
  mutable std::mutex mu_;
  std::vector<PortInfo> ports_ ABSL_GUARDED_BY(mu_);
  HostTopology topology_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PodTable> pods_ ABSL_GUARDED_BY(mu_) = std::make_shared<PodTable>();
  std::vector<std::pair<std::string, uint32_t>> hw_claims_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> claims_generation_{0};
};

}  // namespace fabricscope
