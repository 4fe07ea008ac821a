#include "store/pod_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fabricscope {

std::string PodRef::Name(bool with_container) const {
  std::string out = absl::StrCat(ns, "/", pod.empty() ? absl::StrCat("uid:", uid) : pod);
  if (with_container && !container.empty()) absl::StrAppend(&out, "/", container);
  return out;
}

bool PodRef::SamePod(const PodRef& other) const {
  if (named() && other.named()) return ns == other.ns && pod == other.pod;
  return !uid.empty() && uid == other.uid;
}

const char* PodDeviceKindName(PodDeviceKind kind) {
  switch (kind) {
    case PodDeviceKind::kGpu:
      return "gpu";
    case PodDeviceKind::kRdma:
      return "rdma";
    case PodDeviceKind::kPci:
      return "pci";
    case PodDeviceKind::kUnresolved:
      break;
  }
  return "unresolved";
}

const PodProcess* PodTable::FindProcess(uint32_t pid) const {
  auto it = std::lower_bound(processes.begin(), processes.end(), pid,
                             [](const PodProcess& p, uint32_t v) { return p.pid < v; });
  return it != processes.end() && it->pid == pid ? &*it : nullptr;
}

const PodProcess* PodTable::FindSpanProcess(uint32_t pid, absl::string_view host_name) const {
  if (pid == 0) return nullptr;
  const PodProcess* inner = nullptr;
  size_t inner_count = 0;
  for (const PodProcess& p : processes) {
    if (p.ns_pid != pid) continue;
    if (!host_name.empty() && p.owner.pod == host_name) return &p;
    inner = &p;
    ++inner_count;
  }
  const PodProcess* host = FindProcess(pid);
  if (host != nullptr && !host_name.empty() && host->owner.pod == host_name) return host;
  if (host != nullptr) return inner_count == 0 ? host : nullptr;
  return inner_count == 1 ? inner : nullptr;
}

const PodRef* PodTable::FindUid(absl::string_view uid) const {
  if (uid.empty()) return nullptr;
  for (const PodProcess& p : processes) {
    if (p.owner.uid == uid && p.owner.named()) return &p.owner;
  }
  for (const PodDevice& d : devices) {
    if (d.owner.uid == uid && d.owner.named()) return &d.owner;
  }
  return nullptr;
}

std::vector<const PodDevice*> PodTable::DevicesOf(const PodRef& pod) const {
  std::vector<const PodDevice*> pod_devices;
  std::vector<const PodDevice*> container_devices;
  for (const PodDevice& d : devices) {
    if (!d.owner.SamePod(pod)) continue;
    pod_devices.push_back(&d);
    if (!pod.container.empty() && d.owner.container == pod.container) {
      container_devices.push_back(&d);
    }
  }
  return container_devices.empty() ? pod_devices : container_devices;
}

PodRef PodFromAttributes(const std::vector<std::pair<std::string, std::string>>& attributes) {
  PodRef pod;
  for (const auto& [key, value] : attributes) {
    if (key == "k8s.namespace.name") {
      pod.ns = value;
    } else if (key == "k8s.pod.name") {
      pod.pod = value;
    } else if (key == "k8s.container.name") {
      pod.container = value;
    } else if (key == "k8s.pod.uid") {
      pod.uid = value;
    }
  }
  if (pod.pod.empty() && pod.uid.empty()) return PodRef{};
  return pod;
}

}  // namespace fabricscope
