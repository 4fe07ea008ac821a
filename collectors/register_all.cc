// The list of built-in collectors: one line each. Adding a collector is one
// file pair, one line here and one line in CMakeLists.txt.
#include "collectors/dcb_config_collector.h"
#include "collectors/ethtool_collector.h"
#include "collectors/netdev_collector.h"
#include "collectors/rdma_sysfs_collector.h"
#include "collectors/registry.h"

namespace fabricscope {

absl::Status RegisterAllCollectors(CollectorRegistry& registry) {
  // Each line: s.Update(registry.Register(name, description, factory));
  // Update keeps the first error (a duplicate name).
  absl::Status s;
  // One line per collector, however long.
  // clang-format off
  s.Update(registry.Register("rdma_sysfs", RdmaSysfsCollector::kDescription, RdmaSysfsCollector::Create));
  // After rdma_sysfs: netdev reads its ports (Store::Ports()) at discovery.
  s.Update(registry.Register("netdev", NetdevCollector::kDescription, NetdevCollector::Create));
  s.Update(registry.Register("ethtool", EthtoolCollector::kDescription, EthtoolCollector::Create));
  s.Update(registry.Register("dcb_config", DcbConfigCollector::kDescription, DcbConfigCollector::Create));
  // clang-format on
  return s;
}

}  // namespace fabricscope
