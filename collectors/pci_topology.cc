#include "collectors/pci_topology.h"

#include <hwloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

// The bridge units of a path, top-down, each named by its first bridge (the
// root port, or a switch's upstream port). See the header.
std::vector<std::string> BridgeUnits(const std::vector<std::string>& bridges) {
  std::vector<std::string> units;
  if (bridges.empty()) return units;
  units.push_back(bridges[0]);
  for (size_t i = 1; i < bridges.size(); i += 2) units.push_back(bridges[i]);
  return units;
}

}  // namespace

PciRelation ClassifyPciPair(const PciPath& a, const PciPath& b) {
  if (a.host_bridge != b.host_bridge) {
    return a.numa_node >= 0 && a.numa_node == b.numa_node ? PciRelation::kNode : PciRelation::kSys;
  }
  const std::vector<std::string> ua = BridgeUnits(a.bridges);
  const std::vector<std::string> ub = BridgeUnits(b.bridges);
  size_t common = 0;
  while (common < ua.size() && common < ub.size() && ua[common] == ub[common]) ++common;
  if (common == 0) return PciRelation::kPhb;
  // Units below the lowest common one on each side, plus the common one.
  const size_t crossed = (ua.size() - common) + (ub.size() - common) + 1;
  return crossed <= 1 ? PciRelation::kPix : PciRelation::kPxb;
}

const char* GpuVendorLabel(uint16_t vendor_id) {
  switch (vendor_id) {
    case 0x10de:
      return "nvidia";
    case 0x1002:
      return "amd";
    case 0x8086:
      return "intel";
    default:
      return "";
  }
}

bool IsGpuPciFunction(uint16_t vendor_id, uint16_t device_id, uint16_t class_id) {
  if (GpuVendorLabel(vendor_id)[0] == '\0') return false;
  switch (class_id) {
    case 0x0300:  // VGA compatible controller
    case 0x0302:  // 3D controller
    case 0x0380:  // display controller
    case 0x1200:  // processing accelerator
      break;
    default:
      return false;
  }
  // On-board server display chips (BMC consoles), not GPUs.
  if (vendor_id == 0x1002 && (device_id == 0x515e || device_id == 0x5159)) return false;
  return true;
}

absl::StatusOr<std::string> HwlocFsrootForSysfsRoot(const std::string& sysfs_root) {
  std::string root = sysfs_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root == "/sys") return std::string("/");
  constexpr absl::string_view kSuffix = "/sys";
  if (root.size() > kSuffix.size() && absl::string_view(root).substr(root.size() - 4) == kSuffix) {
    return root.substr(0, root.size() - kSuffix.size());
  }
  return absl::UnimplementedError(
      absl::StrCat("hwloc PCI discovery needs a sysfs root named .../sys (hwloc reads "
                   "<fsroot>/sys); --sysfs-root is ",
                   sysfs_root));
}

namespace {

std::string BusId(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  return absl::StrFormat("%04x:%02x:%02x.%01x", domain, bus, dev, func);
}

std::string PciBusId(hwloc_obj_t obj) {
  const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = obj->attr->pcidev;
  return BusId(p.domain, p.bus, p.dev, p.func);
}

// Owns one hwloc topology.
struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// Serialises the HWLOC_FSROOT swap across sources.
std::mutex& FsrootMutex() {
  static std::mutex mu;
  return mu;
}

// Sets HWLOC_FSROOT for its lifetime (when `fsroot` is not "/") and restores
// the previous value. Caller holds FsrootMutex().
class ScopedFsroot {
 public:
  explicit ScopedFsroot(const std::string& fsroot) : active_(fsroot != "/") {
    if (!active_) return;
    if (const char* old = std::getenv("HWLOC_FSROOT")) old_ = old;
    setenv("HWLOC_FSROOT", fsroot.c_str(), 1);
  }
  ~ScopedFsroot() {
    if (!active_) return;
    if (old_.has_value()) {
      setenv("HWLOC_FSROOT", old_->c_str(), 1);
    } else {
      unsetenv("HWLOC_FSROOT");
    }
  }
  ScopedFsroot(const ScopedFsroot&) = delete;
  ScopedFsroot& operator=(const ScopedFsroot&) = delete;

 private:
  bool active_;
  std::optional<std::string> old_;
};

// A new topology configured for PCI placement: every bridge, PCI device and
// OS device kept; no distances, memory attributes or CPU kinds; no GPU
// runtime plugins.
absl::StatusOr<TopologyPtr> NewTopology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    return ErrnoToStatus(errno, "hwloc_topology_init");
  }
  TopologyPtr topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_NO_DISTANCES | HWLOC_TOPOLOGY_FLAG_NO_MEMATTRS |
                                    HWLOC_TOPOLOGY_FLAG_NO_CPUKINDS);
  for (const char* name : {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"}) {
    // A component that is not installed is simply not used; ignore errors.
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, name);
  }
  return topo;
}

// The NUMA node local to an I/O object: the single NUMA node of its nearest
// non-I/O ancestor, else -1.
int LocalNumaNode(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, obj);
  if (anc == nullptr || anc->nodeset == nullptr) return -1;
  if (hwloc_bitmap_weight(anc->nodeset) != 1) return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

PciPath PathOf(hwloc_topology_t topo, hwloc_obj_t pcidev) {
  PciPath path;
  path.numa_node = LocalNumaNode(topo, pcidev);
  for (hwloc_obj_t p = pcidev->parent; p != nullptr && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
    const hwloc_obj_attr_u::hwloc_bridge_attr_s& b = p->attr->bridge;
    if (b.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      path.host_bridge =
          absl::StrFormat("%04x:%02x", b.downstream.pci.domain, b.downstream.pci.secondary_bus);
      break;
    }
    path.bridges.push_back(PciBusId(p));
  }
  std::reverse(path.bridges.begin(), path.bridges.end());
  if (path.host_bridge.empty()) {
    // No host bridge object (an export without bridges): the attachment point
    // stands for it.
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pcidev);
    path.host_bridge = absl::StrCat("nonio:", anc != nullptr ? anc->gp_index : 0);
  }
  return path;
}

struct Gpu {
  GpuInfo info;
  PciPath path;
};

class HwlocPciSource final : public PciTopologySource {
 public:
  explicit HwlocPciSource(HwlocPciSourceOptions options) : options_(std::move(options)) {}

  absl::StatusOr<PciPlacement> Placement(const std::vector<PortInfo>& ports) override {
    if (absl::Status s = EnsureLoaded(); !s.ok()) return s;
    if (options_.hwloc_xml.empty() && MissesDevice(ports) &&
        Clock::now() - loaded_at_ >= absl::ToChronoNanoseconds(options_.rediscover_interval)) {
      if (absl::Status s = Load(); !s.ok()) return s;
    }
    return Compute(ports);
  }

 private:
  using Clock = std::chrono::steady_clock;

  // The file's identity for change detection: (mtime ns, size).
  using FileStamp = std::pair<int64_t, int64_t>;

  absl::StatusOr<FileStamp> StatXml() const {
    struct stat st {};
    if (stat(options_.hwloc_xml.c_str(), &st) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("hwloc XML ", options_.hwloc_xml));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("hwloc XML ", options_.hwloc_xml, " is not a regular file"));
    }
    return FileStamp(int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
                     int64_t{st.st_size});
  }

  absl::Status EnsureLoaded() {
    if (!options_.hwloc_xml.empty()) {
      absl::StatusOr<FileStamp> stamp = StatXml();
      if (!stamp.ok()) {
        Drop();
        return stamp.status();
      }
      if (loaded_ && stamp_ == *stamp) return absl::OkStatus();
      return Load();
    }
    if (loaded_) return absl::OkStatus();
    return Load();
  }

  void Drop() {
    loaded_ = false;
    gpus_.clear();
    rdma_.clear();
  }

  absl::Status Load() {
    Drop();
    absl::StatusOr<TopologyPtr> topo = NewTopology();
    if (!topo.ok()) return topo.status();
    if (!options_.hwloc_xml.empty()) {
      absl::StatusOr<FileStamp> stamp = StatXml();
      if (!stamp.ok()) return stamp.status();
      if (hwloc_topology_set_xml(topo->get(), options_.hwloc_xml.c_str()) != 0 ||
          hwloc_topology_load(topo->get()) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("hwloc cannot load XML ", options_.hwloc_xml,
                         " (not an hwloc topology export, or unreadable)"));
      }
      stamp_ = *stamp;
    } else {
      absl::StatusOr<std::string> fsroot = HwlocFsrootForSysfsRoot(options_.sysfs_root);
      if (!fsroot.ok()) return fsroot.status();
      if (*fsroot != "/") {
        // The x86 backend reads this CPU's CPUID, which does not describe a
        // tree under another root.
        hwloc_topology_set_components(topo->get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
      }
      std::lock_guard<std::mutex> lock(FsrootMutex());
      ScopedFsroot scoped(*fsroot);
      if (hwloc_topology_load(topo->get()) != 0) {
        return absl::InternalError(absl::StrCat("hwloc discovery failed (fsroot ", *fsroot, ")"));
      }
    }
    // Everything Placement needs is indexed; the hwloc topology is not kept.
    Index(topo->get());
    loaded_ = true;
    loaded_at_ = Clock::now();
    return absl::OkStatus();
  }

  // Indexes the loaded topology: GPUs in bus order, RDMA devices by name.
  void Index(hwloc_topology_t t) {
    std::vector<std::pair<std::tuple<unsigned, unsigned, unsigned, unsigned>, Gpu>> found;
    for (hwloc_obj_t obj = hwloc_get_next_pcidev(t, nullptr); obj != nullptr;
         obj = hwloc_get_next_pcidev(t, obj)) {
      const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p = obj->attr->pcidev;
      if (!IsGpuPciFunction(p.vendor_id, p.device_id, p.class_id)) continue;
      Gpu gpu;
      gpu.info.bus_id = PciBusId(obj);
      gpu.info.vendor = GpuVendorLabel(p.vendor_id);
      const char* name = hwloc_obj_get_info_by_name(obj, "PCIDevice");
      gpu.info.model = name != nullptr && name[0] != '\0' ? std::string(name)
                                                          : absl::StrFormat("0x%04x", p.device_id);
      gpu.path = PathOf(t, obj);
      gpu.info.numa_node = gpu.path.numa_node;
      found.emplace_back(std::make_tuple(p.domain, p.bus, p.dev, p.func), std::move(gpu));
    }
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < found.size(); ++i) {
      found[i].second.info.index = static_cast<int>(i);
      gpus_.push_back(std::move(found[i].second));
    }
    for (hwloc_obj_t obj = hwloc_get_next_osdev(t, nullptr); obj != nullptr;
         obj = hwloc_get_next_osdev(t, obj)) {
      if (obj->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || obj->name == nullptr) continue;
      hwloc_obj_t parent = obj->parent;
      if (parent == nullptr || parent->type != HWLOC_OBJ_PCI_DEVICE) continue;
      rdma_.emplace(obj->name, Rdma{PciBusId(parent), PathOf(t, parent)});
    }
  }

  bool MissesDevice(const std::vector<PortInfo>& ports) const {
    for (const PortInfo& port : ports) {
      if (port.present && !rdma_.contains(port.device)) return true;
    }
    return false;
  }

  PciPlacement Compute(const std::vector<PortInfo>& ports) const {
    PciPlacement out;
    std::vector<std::string> devices;  // placed RDMA devices, first-appearance order
    std::set<std::string> seen;
    for (const PortInfo& port : ports) {
      if (!port.present) continue;
      auto it = rdma_.find(port.device);
      if (it == rdma_.end()) continue;
      out.ports.push_back(PortPci{.device = port.device,
                                  .port = port.port,
                                  .netdev = port.netdev,
                                  .pci_address = it->second.bus_id,
                                  .numa_node = it->second.path.numa_node});
      if (seen.insert(port.device).second) devices.push_back(port.device);
    }
    for (const Gpu& gpu : gpus_) {
      out.gpus.push_back(gpu.info);
      for (const std::string& device : devices) {
        out.affinity.push_back(
            GpuNicAffinity{.gpu_bus_id = gpu.info.bus_id,
                           .gpu_index = gpu.info.index,
                           .device = device,
                           .relation = ClassifyPciPair(gpu.path, rdma_.at(device).path)});
      }
    }
    return out;
  }

  struct Rdma {
    std::string bus_id;
    PciPath path;
  };

  const HwlocPciSourceOptions options_;
  bool loaded_ = false;
  FileStamp stamp_{-1, -1};
  Clock::time_point loaded_at_{};
  std::vector<Gpu> gpus_;
  std::map<std::string, Rdma> rdma_;
};

}  // namespace

std::unique_ptr<PciTopologySource> MakeHwlocPciSource(HwlocPciSourceOptions options) {
  return std::make_unique<HwlocPciSource>(std::move(options));
}

std::unique_ptr<PciTopologySource> MakeHwlocPciSource(std::string sysfs_root,
                                                      std::string hwloc_xml) {
  HwlocPciSourceOptions options;
  options.sysfs_root = std::move(sysfs_root);
  options.hwloc_xml = std::move(hwloc_xml);
  return MakeHwlocPciSource(std::move(options));
}

}  // namespace fabricscope
