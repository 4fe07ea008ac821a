// The sources of the topology collector (collectors/topology_collector.h):
// who is on the other end of each link, and where ports and GPUs sit on the
// PCI tree. Each source is a real component behind a small interface, so the
// collector can be tested over fakes and each source on its own:
//
//  - LLDP neighbours from lldpd through liblldpctl (collectors/lldp_source.h);
//  - InfiniBand peers through directed-route SMPs (collectors/ib_mad_source.h,
//    opt-in with --ib-mad-topology);
//  - a topology file exported from an inventory (collectors/topology_file.h);
//  - the PCI tree through hwloc (collectors/pci_topology.h).
//
// Errors follow collectors/collector.h: a source that is not available at all
// (lldpd not running, no umad device) answers UnimplementedError, and the
// collector reports that once, not every tick; other errors are per tick.
//
// Thread-safety: a source is used from one thread at a time (the config tier).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/port_inventory.h"

namespace fabricscope {

// A source of link partners.
class LinkPartnerSource {
 public:
  virtual ~LinkPartnerSource() = default;
  // "lldp", "ib_mad", "file": the `source` label of the partners it returns.
  virtual absl::string_view name() const = 0;
  // The partners this source knows now. `ports` are the RDMA ports of the
  // inventory; `extra_netdevs` the other interfaces of interest
  // (--netdev-include matches). A partner names its port by (device, port)
  // when the source knows it (IB MADs, a file keyed by port GUID) and/or by
  // netdev (LLDP, a file keyed by netdev); the collector fills in the other
  // half from the inventory and drops partners of ports it does not watch.
  virtual absl::StatusOr<std::vector<LinkPartner>> Partners(
      const std::vector<PortInfo>& ports, const std::vector<std::string>& extra_netdevs) = 0;
  // A problem the last Partners() call found although it returned partners
  // (a topology file with a bad line): the collector counts and logs it. OK
  // when there is none; each problem is returned once.
  virtual absl::Status TakeWarning() { return absl::OkStatus(); }
};

// Where the RDMA devices and GPUs sit on the PCI tree.
struct PciPlacement {
  std::vector<PortPci> ports;  // one per RDMA port with a known PCI function
  std::vector<GpuInfo> gpus;   // ordered by bus id; index = position
  std::vector<GpuNicAffinity> affinity;
};

class PciTopologySource {
 public:
  virtual ~PciTopologySource() = default;
  // The placement of `ports` (RDMA ports of the inventory) and of every GPU.
  virtual absl::StatusOr<PciPlacement> Placement(const std::vector<PortInfo>& ports) = 0;
};

}  // namespace fabricscope
