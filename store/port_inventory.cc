#include "store/port_inventory.h"

namespace fabricscope {

void PortInventory::Upsert(const PortInfo& port) {
  std::lock_guard lock(mu_);
  for (PortInfo& p : ports_) {
    if (p.device == port.device && p.port == port.port) {
      p = port;
      return;
    }
  }
  ports_.push_back(port);
}

std::vector<PortInfo> PortInventory::List() const {
  std::lock_guard lock(mu_);
  return ports_;
}

}  // namespace fabricscope
