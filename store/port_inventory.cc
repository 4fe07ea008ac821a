#include "store/port_inventory.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

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

void PortInventory::SetTopology(HostTopology topology) {
  std::lock_guard lock(mu_);
  topology_ = std::move(topology);
}

HostTopology PortInventory::Topology() const {
  std::lock_guard lock(mu_);
  return topology_;
}

void PortInventory::SetPods(PodTable pods) {
  auto table = std::make_shared<const PodTable>(std::move(pods));
  std::lock_guard lock(mu_);
  pods_ = std::move(table);
}

std::shared_ptr<const PodTable> PortInventory::Pods() const {
  std::lock_guard lock(mu_);
  return pods_;
}

void PortInventory::SetHwCountersClaim(const std::string& device, uint32_t port, bool claimed) {
  std::lock_guard lock(mu_);
  auto key = std::make_pair(device, port);
  auto it = std::find(hw_claims_.begin(), hw_claims_.end(), key);
  if ((it != hw_claims_.end()) == claimed) return;
  if (claimed) {
    hw_claims_.push_back(std::move(key));
  } else {
    hw_claims_.erase(it);
  }
  claims_generation_.fetch_add(1, std::memory_order_acq_rel);
}

bool PortInventory::HwCountersClaimed(const std::string& device, uint32_t port) const {
  std::lock_guard lock(mu_);
  return std::find(hw_claims_.begin(), hw_claims_.end(), std::make_pair(device, port)) !=
         hw_claims_.end();
}

const char* PciRelationName(PciRelation relation) {
  switch (relation) {
    case PciRelation::kPix:
      return "PIX";
    case PciRelation::kPxb:
      return "PXB";
    case PciRelation::kPhb:
      return "PHB";
    case PciRelation::kNode:
      return "NODE";
    case PciRelation::kSys:
      return "SYS";
  }
  return "SYS";
}

const LinkPartner* HostTopology::FindPartner(absl::string_view device, uint32_t port,
                                             absl::string_view netdev) const {
  if (!device.empty()) {
    for (const LinkPartner& p : partners) {
      if (p.device == device && p.port == port) return &p;
    }
  }
  if (!netdev.empty()) {
    for (const LinkPartner& p : partners) {
      if (p.netdev == netdev) return &p;
    }
  }
  return nullptr;
}

namespace {

// "0000:1B:00.0" and "1b:00.0" name the same function.
std::string NormalizeBusId(absl::string_view id) {
  std::string s = absl::AsciiStrToLower(id);
  // A domain is present when there are two colons.
  if (std::count(s.begin(), s.end(), ':') < 2) s = "0000:" + s;
  // nvidia-smi prints an 8-digit domain ("00000000:1B:00.0").
  if (s.size() > 12 && s.find(':') > 4) s = s.substr(s.find(':') - 4);
  return s;
}

}  // namespace

const GpuInfo* HostTopology::FindGpu(const std::string& gpu) const {
  int index = 0;
  if (absl::SimpleAtoi(gpu, &index)) {
    for (const GpuInfo& g : gpus) {
      if (g.index == index) return &g;
    }
    return nullptr;
  }
  const std::string want = NormalizeBusId(gpu);
  for (const GpuInfo& g : gpus) {
    if (NormalizeBusId(g.bus_id) == want) return &g;
  }
  return nullptr;
}

}  // namespace fabricscope
