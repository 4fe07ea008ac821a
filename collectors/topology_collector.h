// The topology collector (config tier, --config-interval, default 10 s): who
// is on the other end of each link, where each RDMA port sits on the PCI
// tree, which GPUs the host has and how close each is to each NIC.
//
// Each tick it asks its sources (collectors/topology_sources.h), merges their
// answers into a HostTopology and stores it in the port inventory
// (PortInventory::SetTopology): the correlator scopes GPU spans with it, the
// CLI shows partners, and the Prometheus exporter renders it at scrape time
// (exporters/prometheus_exporter.cc) as info gauges (value 1):
//
//  - fabricscope_link_partner_info{device,port,netdev,source,partner_*}: one
//    series per watched port with a known partner. Sources in precedence
//    order: ib_mad (--ib-mad-topology), lldp (--lldpd-socket), file
//    (--topology-file); the first that names a partner for a port wins, so a
//    live observation beats the inventory file. A port is watched when it is
//    an RDMA port of the inventory or its netdev matches --netdev-include.
//  - fabricscope_port_pci_info{device,port,netdev,pci_address,numa_node}
//  - fabricscope_gpu_info{gpu_bus_id,gpu_index,vendor,model,numa_node}
//  - fabricscope_gpu_nic_affinity{gpu_bus_id,gpu_index,device,relation}
// A partner that disappears or changes ends its old series at the next tick
// (the exporter renders only the current topology: no stale labels); a port
// without a partner has no series. The collector itself exports
// fabricscope_topology_source_up{source}: 1 when the source answered on the
// last tick (lldp, ib_mad, file, hwloc), 0 when it failed.
//
// Errors: a source's error is reported (PollContext::Error, key
// "topology/<source>") when it first appears or changes, not every tick: lldpd
// not running is one `unsupported` error, not one per 10 s. Warnings from a
// source that still answered (bad lines in the topology file) likewise.
//
// Thread-safety: Discover and Poll run on one thread at a time (config tier).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectors/collector.h"
#include "collectors/topology_sources.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "store/port_inventory.h"

namespace fabricscope {

// Where a source reports per-port errors that do not fail its whole answer
// (the ib_mad source: a timeout on one port): the collector points it at the
// tick's PollContext while the sources run.
struct TopologyErrorSink {
  PollContext* ctx = nullptr;
  void Report(const absl::Status& status, absl::string_view key) {
    if (ctx != nullptr) ctx->Error(status, key);
  }
};

struct TopologySources {
  // Partner sources, in precedence order (the first partner for a port wins).
  std::vector<std::unique_ptr<LinkPartnerSource>> partners;
  // PCI placement (hwloc); may be null.
  std::unique_ptr<PciTopologySource> pci;
  // The name of `pci` in fabricscope_topology_source_up.
  std::string pci_name = "hwloc";
  // Per-port error sink shared with the sources that report through it; may be null.
  std::shared_ptr<TopologyErrorSink> errors;
};

class TopologyCollector final : public Collector {
 public:
  static constexpr char kDescription[] =
      "Link partners (LLDP, InfiniBand SMPs, topology file), PCI placement of ports, GPUs and "
      "GPU-NIC affinity (config tier)";

  static absl::StatusOr<std::unique_ptr<Collector>> Create(const CollectorContext& ctx);
  // Its options (--lldpd-socket, --ib-mad-topology, --topology-file,
  // --hwloc-xml), registered with it (collectors/register_all.cc).
  static std::vector<OptionSpec> Options();

  // `ports` and `metrics` outlive the collector.
  TopologyCollector(PortInventory* ports, MetricsRegistry* metrics, std::string sysfs_root,
                    NetdevFilter netdev_include, TopologySources sources);

  absl::string_view name() const override { return "topology"; }
  std::vector<Tier> Tiers() const override { return {Tier::kConfig}; }
  absl::Status Discover(PollContext& ctx) override;
  absl::Status Poll(PollContext& ctx) override;

 private:
  // Reports `status` for `source` when it differs from the last one reported.
  void Report(PollContext& ctx, const std::string& source, const absl::Status& status);
  void SetUp(const std::string& source, bool up);
  // The netdevs matching --netdev-include under <sysfs_root>/class/net.
  std::vector<std::string> ExtraNetdevs() const;

  PortInventory* const ports_;
  const std::string sysfs_root_;
  const NetdevFilter include_;
  TopologySources sources_;
  prometheus::Family<prometheus::Gauge>* source_up_ = nullptr;  // null without a registry
  // The last error reported per source ("" when the source is healthy).
  std::map<std::string, std::string> reported_;
};

}  // namespace fabricscope
