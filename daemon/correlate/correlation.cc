#include "daemon/correlate/correlation.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>

#include "absl/algorithm/container.h"
#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/parse.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

// ---------------------------------------------------------------------------
// Options.

std::array<double, kNumSignalClasses> CorrelationOptions::DefaultFloors() {
  std::array<double, kNumSignalClasses> f{};
  auto set = [&f](SignalClass c, double v) { f[static_cast<int>(c)] = v; };
  // The pause class is judged by the pause fraction; its floor only matters
  // as a guard (seconds of pause per second).
  set(SignalClass::kPause, 0.001);
  set(SignalClass::kPauseFrames, 100);   // PFC frames/s: a storm sends thousands
  set(SignalClass::kPauseStorm, 0.001);  // any NIC pause-storm event
  set(SignalClass::kEcn, 1000);          // CE-marked packets/s: DCQCN marks routinely
  set(SignalClass::kCnp, 1000);          // CNPs/s
  set(SignalClass::kDiscards, 1);        // packets/s
  set(SignalClass::kDrops, 1);           // packets/s
  set(SignalClass::kRetransmits, 1);     // events/s
  set(SignalClass::kPortErrors, 1);      // events/s
  set(SignalClass::kXmitWait, 100000);   // credit-wait ticks/s
  set(SignalClass::kFec, 0.001);         // any uncorrectable block
  set(SignalClass::kContext, 1);
  set(SignalClass::kIgnored, 1);
  return f;
}

absl::Status ParseFloors(absl::string_view text, std::array<double, kNumSignalClasses>* floors) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    auto cls = ParseSignalClass(absl::StripAsciiWhitespace(kv.first));
    if (!cls.has_value() || !IsCongestionClass(*cls)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown signal class \"", kv.first,
                       "\" (expected pause, pause_frames, pause_storm, ecn, cnp, discards, drops, "
                       "retransmits, port_errors, xmit_wait, fec)"));
    }
    double v;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &v) || !(v > 0) ||
        !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("floor of \"", kv.first, "\" must be a number > 0 (events per second)"));
    }
    (*floors)[static_cast<int>(*cls)] = v;
  }
  return absl::OkStatus();
}

std::string FormatFloors(const std::array<double, kNumSignalClasses>& floors) {
  std::vector<std::string> parts;
  for (int i = 0; i < kNumSignalClasses; ++i) {
    auto c = static_cast<SignalClass>(i);
    if (!IsCongestionClass(c)) continue;
    parts.push_back(absl::StrCat(SignalClassName(c), "=", floors[i]));
  }
  return absl::StrJoin(parts, ",");
}

StallPolicy::StallPolicy(std::vector<std::pair<std::string, absl::Duration>> thresholds) {
  for (auto& [name, d] : thresholds) threshold_ns_[name] = absl::ToInt64Nanoseconds(d);
}

bool StallPolicy::IsStall(const Span& span) const {
  if (span.stall_flag) return true;
  auto it = threshold_ns_.find(span.name);
  if (it == threshold_ns_.end()) return false;
  return span.end_unix_nano - span.start_unix_nano >= it->second;
}

absl::StatusOr<std::vector<std::pair<std::string, absl::Duration>>> StallPolicy::Parse(
    absl::string_view text) {
  std::vector<std::pair<std::string, absl::Duration>> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    size_t eq = part.rfind('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected NAME=DURATION pairs such as decode_step=200ms, got \"", part, "\""));
    }
    absl::string_view name = absl::StripAsciiWhitespace(part.substr(0, eq));
    auto d = ParsePositiveDuration(part.substr(eq + 1));
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("threshold of \"", name, "\": ", d.status().message()));
    }
    out.emplace_back(std::string(name), *d);
  }
  return out;
}

std::string StallPolicy::Format(
    const std::vector<std::pair<std::string, absl::Duration>>& thresholds) {
  return absl::StrJoin(thresholds, ",", [](std::string* out, const auto& p) {
    absl::StrAppend(out, p.first, "=", absl::FormatDuration(p.second));
  });
}

absl::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kClean:
      return "clean";
    case Verdict::kFabric:
      return "fabric";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------
// Scope.

std::string PortName(absl::string_view device, uint32_t port) {
  return port == 0 ? std::string(device) : absl::StrCat(device, "/", port);
}

bool SpanScope::UsesGpuHint(const Span& span) {
  return !span.gpu.empty() && span.rdma_device.empty() && span.netdev.empty();
}

void SpanScope::CoverEveryPort(const std::vector<PortInfo>& ports) {
  if (ports.empty()) {
    all_ = true;
    return;
  }
  for (const PortInfo& p : ports) {
    ports_.emplace_back(p.device, p.port);
    if (!p.netdev.empty()) netdevs_.push_back(p.netdev);
  }
}

std::optional<PciRelation> SpanScope::AddNicsNearest(const GpuInfo& gpu, uint32_t rdma_port,
                                                     const std::vector<PortInfo>& ports,
                                                     const HostTopology& topology,
                                                     std::vector<std::string>* names) {
  std::optional<PciRelation> nearest;
  for (const GpuNicAffinity& a : topology.affinity) {
    if (a.gpu_bus_id != gpu.bus_id) continue;
    if (!nearest.has_value() || a.relation < *nearest) nearest = a.relation;
  }
  if (!nearest.has_value()) return nearest;
  for (const GpuNicAffinity& a : topology.affinity) {
    if (a.gpu_bus_id == gpu.bus_id && a.relation == *nearest) {
      AddDevice(a.device, rdma_port, ports, names);
    }
  }
  return nearest;
}

void SpanScope::AddDevice(const std::string& device, uint32_t rdma_port,
                          const std::vector<PortInfo>& ports, std::vector<std::string>* names) {
  bool listed = false;  // the device's ports as the inventory has them
  for (const PortInfo& p : ports) {
    if (p.device != device || (rdma_port != 0 && p.port != rdma_port)) continue;
    listed = true;
    ports_.emplace_back(p.device, p.port);
    names->push_back(PortName(p.device, p.port));
    if (!p.netdev.empty()) netdevs_.push_back(p.netdev);
  }
  if (!listed) {  // not in the inventory (yet): the device's series by name
    ports_.emplace_back(device, rdma_port);
    names->push_back(PortName(device, rdma_port));
  }
}

bool SpanScope::ScopeToGpu(const Span& span, const std::vector<PortInfo>& ports,
                           const HostTopology* topology) {
  const GpuInfo* gpu = topology != nullptr ? topology->FindGpu(span.gpu) : nullptr;
  if (gpu == nullptr) {
    description_ = absl::StrCat("GPU ", span.gpu, " unknown to the topology: every port");
    return false;
  }
  // The topology's bus id, whichever form the span named the GPU by.
  const std::string gpu_name = absl::StrCat("GPU ", gpu->bus_id);
  std::vector<std::string> names;
  const std::optional<PciRelation> nearest =
      AddNicsNearest(*gpu, span.rdma_port, ports, *topology, &names);
  if (!nearest.has_value()) {
    description_ = absl::StrCat("no NIC placement known for ", gpu_name, ": every port");
    return false;
  }
  description_ = absl::StrCat("NICs nearest ", gpu_name, " (", PciRelationName(*nearest),
                              "): ", absl::StrJoin(names, ", "));
  return true;
}

bool SpanScope::ScopeToPod(const Span& span, const SpanPod& pod, const std::vector<PortInfo>& ports,
                           const HostTopology* topology) {
  std::vector<std::string> names;
  if (!pod.rdma_devices.empty()) {
    for (const std::string& device : pod.rdma_devices) {
      AddDevice(device, span.rdma_port, ports, &names);
    }
    description_ = absl::StrCat("pod ", pod.pod.Name(), " devices: ", absl::StrJoin(names, ", "));
    return true;
  }
  std::vector<std::string> gpus;
  for (const std::string& bus : pod.gpus) {
    const GpuInfo* gpu = topology != nullptr ? topology->FindGpu(bus) : nullptr;
    if (gpu != nullptr && AddNicsNearest(*gpu, span.rdma_port, ports, *topology, &names)) {
      gpus.push_back(gpu->bus_id);
    }
  }
  if (gpus.empty()) {
    description_ = absl::StrCat("pod ", pod.pod.Name(),
                                pod.gpus.empty() ? ": no RDMA device or GPU allocated"
                                                 : ": no NIC placement known for its GPUs",
                                ": every port");
    return false;
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  description_ = absl::StrCat("pod ", pod.pod.Name(), " NICs nearest its GPUs ",
                              absl::StrJoin(gpus, ", "), ": ", absl::StrJoin(names, ", "));
  return true;
}

namespace {
// The span's host.name (a container's hostname: its pod's name by default).
absl::string_view SpanHostName(const Span& span) {
  for (const auto& [key, value] : span.attributes) {
    if (key == "host.name") return value;
  }
  return {};
}
}  // namespace

SpanPod ResolveSpanPod(const Span& span, const PodTable& pods) {
  SpanPod out;
  out.pod = PodFromAttributes(span.attributes);
  if (out.pod.named() || !out.pod.uid.empty()) {
    out.via = "span attributes";
  } else if (const PodProcess* p = pods.FindSpanProcess(span.pid, SpanHostName(span));
             p != nullptr) {
    out.pod = p->owner;
    out.host_pid = p->pid;
    out.via = p->pid == span.pid ? absl::StrCat("process ", span.pid, " (", p->via, ")")
                                 : absl::StrCat("process ", span.pid, " in its container, ", p->pid,
                                                " on the host (", p->via, ")");
  } else {
    return out;
  }
  if (!out.pod.named()) {
    if (const PodRef* named = pods.FindUid(out.pod.uid); named != nullptr) {
      out.pod.ns = named->ns;
      out.pod.pod = named->pod;
    }
  }
  std::vector<std::string> parents;
  for (const PodDevice* d : pods.DevicesOf(out.pod)) {
    if (d->kind == PodDeviceKind::kRdma) {
      if (!absl::c_linear_search(out.rdma_devices, d->device))
        out.rdma_devices.push_back(d->device);
      if (!d->parent_device.empty() && !absl::c_linear_search(parents, d->parent_device)) {
        parents.push_back(d->parent_device);
      }
    } else if (d->kind == PodDeviceKind::kGpu && !absl::c_linear_search(out.gpus, d->bus_id)) {
      out.gpus.push_back(d->bus_id);
    }
  }
  for (std::string& p : parents) {
    if (!absl::c_linear_search(out.rdma_devices, p)) out.rdma_devices.push_back(std::move(p));
  }
  return out;
}

bool SpanScope::NeedsTopology(const Span& span, const SpanPod* pod) {
  if (UsesGpuHint(span)) return true;
  return pod != nullptr && span.gpu.empty() && span.rdma_device.empty() && span.netdev.empty() &&
         pod->rdma_devices.empty() && !pod->gpus.empty();
}

SpanScope::SpanScope(const Span& span, const std::vector<PortInfo>& ports,
                     const HostTopology* topology, const SpanPod* pod) {
  const bool hinted = !span.rdma_device.empty() || !span.netdev.empty();
  if (!hinted) {
    if (!span.gpu.empty() && ScopeToGpu(span, ports, topology)) return;
    if (span.gpu.empty() && pod != nullptr && (pod->pod.named() || !pod->pod.uid.empty()) &&
        ScopeToPod(span, *pod, ports, topology)) {
      return;
    }
    CoverEveryPort(ports);
    if (description_.empty()) description_ = ports.empty() ? "every series" : "every port";
    return;
  }
  std::vector<std::string> names;
  if (!span.rdma_device.empty()) {
    ports_.emplace_back(span.rdma_device, span.rdma_port);
    names.push_back(PortName(span.rdma_device, span.rdma_port));
    for (const PortInfo& p : ports) {
      if (p.device == span.rdma_device && (span.rdma_port == 0 || p.port == span.rdma_port) &&
          !p.netdev.empty()) {
        netdevs_.push_back(p.netdev);
      }
    }
  }
  if (!span.netdev.empty()) {
    netdevs_.push_back(span.netdev);
    names.push_back(span.netdev);
    for (const PortInfo& p : ports) {
      if (p.netdev == span.netdev) ports_.emplace_back(p.device, p.port);
    }
  }
  description_ = absl::StrCat("span hint: ", absl::StrJoin(names, ", "));
  if (!span.gpu.empty()) {
    absl::StrAppend(&description_, " (fabricscope.gpu ", span.gpu,
                    " not used: an explicit NIC hint wins)");
  }
}

bool SpanScope::Contains(const SeriesKey& key) const {
  if (all_) return true;
  if (!key.device.empty()) {
    for (const auto& [device, port] : ports_) {
      if (device == key.device && (port == 0 || key.port == 0 || port == key.port)) return true;
    }
  }
  if (!key.netdev.empty()) {
    for (const std::string& n : netdevs_) {
      if (n == key.netdev) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// Results.

absl::Span<const SeriesCorrelation> SpanCorrelation::Anomalous() const {
  size_t n = 0;
  while (n < series.size() && series[n].anomalous) ++n;
  return absl::MakeConstSpan(series.data(), n);
}

SeriesCorrelation SeriesCorrelationOf(const SeriesSnapshot& snap, SignalClass cls) {
  SeriesCorrelation sc;
  sc.id = snap.id;
  sc.signal = snap.signal->name;
  sc.signal_class = cls;
  sc.source = snap.key->source;
  sc.raw_name = snap.key->name;
  sc.device = snap.key->device;
  sc.port = snap.key->port;
  sc.netdev = snap.key->netdev;
  sc.priority = snap.signal->Label("priority");
  sc.direction = snap.signal->Label("direction");
  sc.counter = snap.signal->Label("counter");
  if (sc.counter.empty()) sc.counter = snap.signal->Label("reason");
  return sc;
}

}  // namespace fabricscope
