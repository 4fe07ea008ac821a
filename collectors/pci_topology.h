// GPU/NIC placement on the PCI tree through hwloc: the PciTopologySource of
// the topology collector (collectors/topology_sources.h).
//
// Two parts:
//
//  1. A pure classifier over a small PCI path model (PciPath,
//     ClassifyPciPair): the relation of two PCI functions as
//     `nvidia-smi topo -m` names it (PIX, PXB, PHB, NODE, SYS), testable
//     without hwloc.
//
//  2. MakeHwlocPciSource: loads the host's PCI tree through hwloc (or an hwloc
//     XML export of a machine), finds the PCI function of every RDMA device
//     (the hwloc OpenFabrics OS device named like it), every GPU, and
//     classifies every GPU x RDMA device pair.
//
// The classification (closest first; the first rule that applies wins):
//   - different host bridges: NODE when both sit on the same, known NUMA node,
//     else SYS (the path crosses the socket interconnect, or the NUMA
//     locality is unknown and cannot be proven local);
//   - same host bridge, no common PCI-to-PCI bridge below it (different root
//     ports, or a function directly on the root bus): PHB;
//   - a common bridge below the host bridge: count the "bridge units" the
//     path between them touches, where the root port is one unit and each
//     PCIe switch -- its upstream port plus the downstream port on the path --
//     is one unit (nvidia-smi and NCCL count a switch as one bridge; NCCL's
//     topology shows each switch as one node). One unit: PIX; more: PXB.
// Units are read top-down: bridges[0] is the root port, then (upstream,
// downstream) pairs; a bridge left without its pair (a PCIe-to-PCI bridge at
// the bottom of a chain) is a unit of its own. Two functions directly behind
// the same root port (functions of one card) cross one unit: PIX.
//
// What counts as a GPU (by PCI vendor and class; the device id is reported as
// the model when hwloc has no name for it):
//   - vendors NVIDIA 0x10de, AMD 0x1002, Intel 0x8086 (labels "nvidia",
//     "amd", "intel");
//   - classes 0x0300 VGA (e.g. NVIDIA L40S, RTX), 0x0302 3D controller (A100,
//     H100), 0x0380 other display controller (AMD MI100/MI210, Intel Data
//     Center GPU Max) and 0x1200 processing accelerator (AMD MI300X);
//   - except the on-board server display chips some of these vendors made
//     for BMC consoles: ATI ES1000 (1002:515e) and Radeon 7000/VE (1002:5159).
// Other display devices (ASPEED 0x1a03, Matrox 0x102b BMC VGA) are not GPUs.
// GPUs are ordered by PCI bus id (domain, bus, device, function); the index is
// the position in that order (nvidia-smi's default, CUDA_DEVICE_ORDER=PCI_BUS_ID).
//
// Caching: the topology is loaded once and indexed (GPU paths and the PCI path
// of each RDMA device are kept; the hwloc topology itself is freed). With an
// XML file it is
// reloaded when the file's modification time or size changes. When
// discovering the host it is rediscovered when Placement is asked about an
// RDMA device the cached topology does not have (a driver loaded after the
// daemon started), at most once per `rediscover_interval`. Placement itself
// walks the cached tree: microseconds for a few dozen devices.
//
// --sysfs-root: hwloc's Linux backend reads "<fsroot>/sys/..." (and
// "<fsroot>/proc/...") where fsroot comes from the HWLOC_FSROOT environment
// variable only (hwloc 2.x has no API for it). The source derives fsroot from
// the sysfs root: "/sys" -> "/" (HWLOC_FSROOT left alone), "/x/y/sys" ->
// "/x/y". A sysfs root whose last component is not "sys" (a fake tree like
// tests/fixtures/sysfs/root) cannot be given to hwloc: Placement answers
// UnimplementedError naming the root. With a non-default fsroot the source
// sets HWLOC_FSROOT for the duration of the load, under a process-wide mutex,
// and restores it after; setenv is not thread-safe against getenv in other
// threads, so this happens only for a non-default --sysfs-root and only on
// (re)discovery, never on the per-tick path. The GPU vendor discovery plugins
// (cuda, nvml, opencl, rsmi, levelzero, gl) are disabled: they would
// initialise GPU runtimes and are not needed, the PCI tree is enough.
//
// Errors: an XML file that is missing or cannot be parsed, or a discovery that
// fails, is an error status (NotFound / InvalidArgument / Internal) from
// Placement, never a crash; the previous topology is dropped so the collector
// does not export stale placement. A port whose RDMA device is not in the
// tree gets no PortPci and no affinity (not an error). Ports with
// present == false are skipped.
//
// Output order: ports in the order given; gpus by bus id; affinity GPU-major
// (GPU index order), then RDMA devices in the order they first appear among
// the placed ports, one entry per (GPU, device).
//
// Thread-safety: a source is used from one thread at a time (the config
// tier); the HWLOC_FSROOT swap is serialised across sources.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "collectors/topology_sources.h"
#include "store/port_inventory.h"

namespace fabricscope {

// Where a PCI function sits: its host bridge, the PCI-to-PCI bridges from the
// root port down to it, and its NUMA node.
struct PciPath {
  // Identity of the PCIe host bridge (root complex): "DDDD:BB", the domain and
  // root bus, as sysfs's "pciDDDD:BB". Functions with equal strings share it.
  std::string host_bridge;
  // Bus ids of the bridges from the root port down, "0000:00:01.1"; empty for
  // a function directly on the root bus.
  std::vector<std::string> bridges;
  int numa_node = -1;  // -1: unknown
};

// The relation of two distinct PCI functions, per the rules in the file
// comment.
PciRelation ClassifyPciPair(const PciPath& a, const PciPath& b);

// Whether a PCI function with these ids is a GPU (file comment), and its
// vendor label ("nvidia", "amd", "intel"; "" when not a GPU vendor).
bool IsGpuPciFunction(uint16_t vendor_id, uint16_t device_id, uint16_t class_id);
const char* GpuVendorLabel(uint16_t vendor_id);

// HWLOC_FSROOT for a --sysfs-root: "/" for "/sys", the parent directory for a
// path ending in "/sys" (trailing slashes ignored); UnimplementedError for any
// other path (hwloc cannot read a tree not named sys).
absl::StatusOr<std::string> HwlocFsrootForSysfsRoot(const std::string& sysfs_root);

struct HwlocPciSourceOptions {
  std::string sysfs_root = "/sys";  // --sysfs-root; ignored with hwloc_xml
  std::string hwloc_xml;            // --hwloc-xml; empty: discover the host
  // Least time between two host rediscoveries triggered by an RDMA device
  // missing from the cached topology.
  absl::Duration rediscover_interval = absl::Seconds(60);
};

// The hwloc-backed source. `hwloc_xml` non-empty: load that hwloc XML export
// (tests, offline analysis) instead of discovering the host.
std::unique_ptr<PciTopologySource> MakeHwlocPciSource(std::string sysfs_root,
                                                      std::string hwloc_xml);
std::unique_ptr<PciTopologySource> MakeHwlocPciSource(HwlocPciSourceOptions options);

}  // namespace fabricscope
