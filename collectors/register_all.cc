// The list of built-in collectors: one line each. Adding a collector is one
// file pair (with its options), one line here, one line in CMakeLists.txt and
// its signal-table rows (core/signals.cc).
#include "collectors/dcb_config_collector.h"
#include "collectors/ethtool_collector.h"
#include "collectors/netdev_collector.h"
#include "collectors/rdma_netlink_collector.h"
#include "collectors/rdma_sysfs_collector.h"
#include "collectors/registry.h"
#include "collectors/topology_collector.h"

namespace fabricscope {

absl::Status RegisterAllCollectors(CollectorRegistry& registry) {
  // Each line: s.Update(registry.Register(name, description, factory[, deps[,
  // options]])); a collector's options are declared in its own files.
  // Update keeps the first error (a duplicate name). netdev, ethtool,
  // dcb_config and topology read the port inventory rdma_sysfs writes at discovery, so they
  // declare {.after = {"rdma_sysfs"}} and the registry discovers them after it
  // whatever the order of these lines (a void dependency when rdma_sysfs is
  // not enabled: the inventory is then empty, or filled by replay).
  absl::Status s;
  const CollectorDeps reads_ports{.after = {"rdma_sysfs"}};
  // One line per collector, however long.
  // clang-format off
  s.Update(registry.Register("rdma_sysfs", RdmaSysfsCollector::kDescription, RdmaSysfsCollector::Create, {}, RdmaSysfsCollector::Options()));
  // rdma_netlink claims ports from the inventory and must poll after rdma_sysfs in each tick.
  s.Update(registry.Register("rdma_netlink", RdmaNetlinkCollector::kDescription, RdmaNetlinkCollector::Create, reads_ports, RdmaNetlinkCollector::Options()));
  s.Update(registry.Register("netdev", NetdevCollector::kDescription, NetdevCollector::Create, reads_ports));
  s.Update(registry.Register("ethtool", EthtoolCollector::kDescription, EthtoolCollector::Create, reads_ports));
  s.Update(registry.Register("dcb_config", DcbConfigCollector::kDescription, DcbConfigCollector::Create, reads_ports));
  s.Update(registry.Register("topology", TopologyCollector::kDescription, TopologyCollector::Create, reads_ports, TopologyCollector::Options()));
  // clang-format on
  return s;
}

}  // namespace fabricscope
