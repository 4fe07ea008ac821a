#include "daemon/recording/recording_header.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/json.h"
#include "core/parse.h"
#include "daemon/recording/recording.h"
#include "daemon/spans/span_kind.h"

namespace fabricscope {
namespace {

// --- writing -----------------------------------------------------------------

std::string Num(double v) { return std::isfinite(v) ? absl::StrCat(v) : "0"; }

// ,"key":"value" for each pair.
void Strings(std::string* out,
             std::initializer_list<std::pair<const char*, const std::string*>> kv) {
  for (const auto& [k, v] : kv) {
    absl::StrAppend(out, ",\"", k, "\":");
    AppendJsonString(out, *v);
  }
}

template <typename T, typename Fn>
void Array(std::string* out, const char* name, const std::vector<T>& items, Fn item) {
  absl::StrAppend(out, ",\"", name, "\":[");
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out->push_back(',');
    item(items[i]);
  }
  out->push_back(']');
}

// --- reading -----------------------------------------------------------------

std::string Str(const JsonValue& obj, absl::string_view key) {
  const JsonValue* v = obj.Get(key);
  return v != nullptr && v->type == JsonValue::kString ? v->str : std::string();
}

absl::Status Number(const JsonValue& obj, absl::string_view key, double* out) {
  const JsonValue* v = obj.Get(key);
  if (v == nullptr || v->type == JsonValue::kNull) return absl::OkStatus();
  if (v->type != JsonValue::kNumber || !absl::SimpleAtod(v->raw, out)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a number"));
  }
  return absl::OkStatus();
}

template <typename Int>
absl::Status Integer(const JsonValue& obj, absl::string_view key, Int* out) {
  const JsonValue* v = obj.Get(key);
  if (v == nullptr || v->type == JsonValue::kNull) return absl::OkStatus();
  Int n{};
  if (v->type != JsonValue::kNumber || !absl::SimpleAtoi(v->raw, &n)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be an integer"));
  }
  *out = n;
  return absl::OkStatus();
}

// Calls `item` on each element of the array `key` (absent: none).
absl::Status Each(const JsonValue& obj, absl::string_view key,
                  const std::function<absl::Status(const JsonValue&)>& item) {
  const JsonValue* v = obj.Get(key);
  if (v == nullptr || v->type == JsonValue::kNull) return absl::OkStatus();
  if (v->type != JsonValue::kArray) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be an array"));
  }
  for (const JsonValue& e : v->items) {
    if (e.type != JsonValue::kObject) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" holds a non-object"));
    }
    if (absl::Status s = item(e); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::optional<PodDeviceKind> ParsePodDeviceKind(absl::string_view name) {
  for (PodDeviceKind k : {PodDeviceKind::kGpu, PodDeviceKind::kRdma, PodDeviceKind::kPci,
                          PodDeviceKind::kUnresolved}) {
    if (name == PodDeviceKindName(k)) return k;
  }
  return std::nullopt;
}

std::optional<PciRelation> ParsePciRelation(absl::string_view name) {
  for (PciRelation r : {PciRelation::kPix, PciRelation::kPxb, PciRelation::kPhb, PciRelation::kNode,
                        PciRelation::kSys}) {
    if (name == PciRelationName(r)) return r;
  }
  return std::nullopt;
}

// --- options -----------------------------------------------------------------

absl::Status Bad(absl::string_view name, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("recorded option ", name, "=\"", value, "\": ", want));
}

}  // namespace

std::string FormatRecordingHeaderLine(const RecordingHeader& h) {
  std::string out = "{\"recording\":{\"version\":";
  AppendJsonString(&out, h.version);
  absl::StrAppend(&out, ",\"from_unix_nano\":", h.from_unix_nano,
                  ",\"to_unix_nano\":", h.to_unix_nano);
  Array(&out, "ports", h.ports, [&](const PortInfo& p) {
    absl::StrAppend(&out, "{\"device\":");
    AppendJsonString(&out, p.device);
    absl::StrAppend(&out, ",\"port\":", p.port);
    Strings(&out, {{"netdev", &p.netdev},
                   {"link_layer", &p.link_layer},
                   {"state", &p.state},
                   {"rate", &p.rate},
                   {"driver", &p.driver},
                   {"fw_ver", &p.fw_ver}});
    out.push_back('}');
  });
  Array(&out, "partners", h.topology.partners, [&](const LinkPartner& p) {
    absl::StrAppend(&out, "{\"device\":");
    AppendJsonString(&out, p.device);
    absl::StrAppend(&out, ",\"port\":", p.port);
    Strings(&out, {{"netdev", &p.netdev},
                   {"source", &p.source},
                   {"chassis_id", &p.chassis_id},
                   {"system_name", &p.system_name},
                   {"port_id", &p.port_id},
                   {"port_description", &p.port_description}});
    out.push_back('}');
  });
  Array(&out, "port_pci", h.topology.ports, [&](const PortPci& p) {
    absl::StrAppend(&out, "{\"device\":");
    AppendJsonString(&out, p.device);
    absl::StrAppend(&out, ",\"port\":", p.port);
    Strings(&out, {{"netdev", &p.netdev}, {"pci_address", &p.pci_address}});
    absl::StrAppend(&out, ",\"numa_node\":", p.numa_node, "}");
  });
  Array(&out, "gpus", h.topology.gpus, [&](const GpuInfo& g) {
    absl::StrAppend(&out, "{\"bus_id\":");
    AppendJsonString(&out, g.bus_id);
    absl::StrAppend(&out, ",\"index\":", g.index);
    Strings(&out, {{"vendor", &g.vendor}, {"model", &g.model}});
    absl::StrAppend(&out, ",\"numa_node\":", g.numa_node, "}");
  });
  Array(&out, "affinity", h.topology.affinity, [&](const GpuNicAffinity& a) {
    absl::StrAppend(&out, "{\"gpu_bus_id\":");
    AppendJsonString(&out, a.gpu_bus_id);
    absl::StrAppend(&out, ",\"gpu_index\":", a.gpu_index, ",\"device\":");
    AppendJsonString(&out, a.device);
    absl::StrAppend(&out, ",\"relation\":\"", PciRelationName(a.relation), "\"}");
  });
  auto pod = [&](const PodRef& r) {
    absl::StrAppend(&out, "\"namespace\":");
    AppendJsonString(&out, r.ns);
    Strings(&out, {{"pod", &r.pod}, {"container", &r.container}, {"uid", &r.uid}});
  };
  Array(&out, "pod_devices", h.pods.devices, [&](const PodDevice& d) {
    out.push_back('{');
    pod(d.owner);
    Strings(&out, {{"resource", &d.resource},
                   {"device_id", &d.device_id},
                   {"device", &d.device},
                   {"parent_device", &d.parent_device},
                   {"bus_id", &d.bus_id}});
    absl::StrAppend(&out, ",\"kind\":\"", PodDeviceKindName(d.kind), "\"}");
  });
  Array(&out, "pod_processes", h.pods.processes, [&](const PodProcess& p) {
    out.push_back('{');
    pod(p.owner);
    Strings(&out, {{"via", &p.via}});
    absl::StrAppend(&out, ",\"pid\":", p.pid, ",\"ns_pid\":", p.ns_pid, "}");
  });
  out.append(",\"options\":{");
  for (size_t i = 0; i < h.options.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendJsonString(&out, h.options[i].first);
    out.push_back(':');
    AppendJsonString(&out, h.options[i].second);
  }
  out.push_back('}');
  Array(&out, "stall_bounds", h.stall_bounds, [&](const LearnedBound& b) {
    absl::StrAppend(&out, "{\"key\":");
    AppendJsonString(&out, b.key);
    absl::StrAppend(&out, ",\"kind\":\"", SpanKindName(b.kind), "\",\"cost\":\"",
                    StallCostName(b.cost), "\",\"samples\":", b.samples, ",\"p50\":", Num(b.p50),
                    ",\"p75\":", Num(b.p75), ",\"p99\":", Num(b.p99), ",\"bound\":", Num(b.bound),
                    "}");
  });
  out.append("}}");
  return out;
}

absl::StatusOr<RecordingHeader> RecordingHeaderFromJson(const JsonValue& obj) {
  if (obj.type != JsonValue::kObject) {
    return absl::InvalidArgumentError("\"recording\" must be an object");
  }
  RecordingHeader h;
  h.version = Str(obj, "version");
  if (auto s = Integer(obj, "from_unix_nano", &h.from_unix_nano); !s.ok()) return s;
  if (auto s = Integer(obj, "to_unix_nano", &h.to_unix_nano); !s.ok()) return s;
  auto s = Each(obj, "ports", [&](const JsonValue& e) {
    PortInfo p;
    p.device = Str(e, "device");
    p.netdev = Str(e, "netdev");
    p.link_layer = Str(e, "link_layer");
    p.state = Str(e, "state");
    p.rate = Str(e, "rate");
    p.driver = Str(e, "driver");
    p.fw_ver = Str(e, "fw_ver");
    if (auto st = Integer(e, "port", &p.port); !st.ok()) return st;
    h.ports.push_back(std::move(p));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  s = Each(obj, "partners", [&](const JsonValue& e) {
    LinkPartner p;
    p.device = Str(e, "device");
    p.netdev = Str(e, "netdev");
    p.source = Str(e, "source");
    p.chassis_id = Str(e, "chassis_id");
    p.system_name = Str(e, "system_name");
    p.port_id = Str(e, "port_id");
    p.port_description = Str(e, "port_description");
    if (auto st = Integer(e, "port", &p.port); !st.ok()) return st;
    h.topology.partners.push_back(std::move(p));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  s = Each(obj, "port_pci", [&](const JsonValue& e) {
    PortPci p;
    p.device = Str(e, "device");
    p.netdev = Str(e, "netdev");
    p.pci_address = Str(e, "pci_address");
    if (auto st = Integer(e, "port", &p.port); !st.ok()) return st;
    if (auto st = Integer(e, "numa_node", &p.numa_node); !st.ok()) return st;
    h.topology.ports.push_back(std::move(p));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  s = Each(obj, "gpus", [&](const JsonValue& e) {
    GpuInfo g;
    g.bus_id = Str(e, "bus_id");
    g.vendor = Str(e, "vendor");
    g.model = Str(e, "model");
    if (auto st = Integer(e, "index", &g.index); !st.ok()) return st;
    if (auto st = Integer(e, "numa_node", &g.numa_node); !st.ok()) return st;
    h.topology.gpus.push_back(std::move(g));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  s = Each(obj, "affinity", [&](const JsonValue& e) {
    GpuNicAffinity a;
    a.gpu_bus_id = Str(e, "gpu_bus_id");
    a.device = Str(e, "device");
    if (auto st = Integer(e, "gpu_index", &a.gpu_index); !st.ok()) return st;
    const std::optional<PciRelation> r = ParsePciRelation(Str(e, "relation"));
    if (!r.has_value()) return absl::InvalidArgumentError("\"relation\" is not a PCI relation");
    a.relation = *r;
    h.topology.affinity.push_back(std::move(a));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  auto pod = [](const JsonValue& e) {
    return PodRef{Str(e, "namespace"), Str(e, "pod"), Str(e, "container"), Str(e, "uid")};
  };
  s = Each(obj, "pod_devices", [&](const JsonValue& e) {
    PodDevice d;
    d.owner = pod(e);
    d.resource = Str(e, "resource");
    d.device_id = Str(e, "device_id");
    d.device = Str(e, "device");
    d.parent_device = Str(e, "parent_device");
    d.bus_id = Str(e, "bus_id");
    const std::optional<PodDeviceKind> kind = ParsePodDeviceKind(Str(e, "kind"));
    if (!kind.has_value()) return absl::InvalidArgumentError("\"kind\" is not a pod device kind");
    d.kind = *kind;
    if (h.pods.devices.size() < kMaxPodDevices) h.pods.devices.push_back(std::move(d));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  s = Each(obj, "pod_processes", [&](const JsonValue& e) {
    PodProcess p;
    p.owner = pod(e);
    p.via = Str(e, "via");
    if (auto st = Integer(e, "pid", &p.pid); !st.ok()) return st;
    if (auto st = Integer(e, "ns_pid", &p.ns_pid); !st.ok()) return st;
    if (h.pods.processes.size() < kMaxPodProcesses) h.pods.processes.push_back(std::move(p));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  // FindProcess searches by pid.
  std::sort(h.pods.processes.begin(), h.pods.processes.end(),
            [](const PodProcess& a, const PodProcess& b) { return a.pid < b.pid; });
  if (const JsonValue* o = obj.Get("options"); o != nullptr) {
    if (o->type != JsonValue::kObject) {
      return absl::InvalidArgumentError("\"options\" must be an object");
    }
    for (const auto& [name, value] : o->fields) {
      if (value.type != JsonValue::kString) {
        return absl::InvalidArgumentError(absl::StrCat("option \"", name, "\" is not a string"));
      }
      h.options.emplace_back(name, value.str);
    }
  }
  s = Each(obj, "stall_bounds", [&](const JsonValue& e) {
    LearnedBound b;
    b.key = Str(e, "key");
    b.kind = ParseSpanKindName(Str(e, "kind")).value_or(SpanKind::kOther);
    b.cost = ParseStallCostName(Str(e, "cost")).value_or(StallCost::kDuration);
    for (auto [key, field] : {std::pair{"p50", &b.p50}, std::pair{"p75", &b.p75},
                              std::pair{"p99", &b.p99}, std::pair{"bound", &b.bound}}) {
      if (auto st = Number(e, key, field); !st.ok()) return st;
    }
    if (auto st = Integer(e, "samples", &b.samples); !st.ok()) return st;
    h.stall_bounds.push_back(std::move(b));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return h;
}

absl::Status ApplyRecordedOptions(const std::vector<std::pair<std::string, std::string>>& options,
                                  AnalysisSettings* settings) {
  AnalysisSettings next = *settings;
  CorrelationOptions& c = next.correlation;
  StallLearnerOptions& l = next.learn;
  auto fraction = [](absl::string_view v, double* out) {
    return absl::SimpleAtod(v, out) && *out >= 0 && *out <= 1;
  };
  auto positive = [](absl::string_view v, double* out) {
    return absl::SimpleAtod(v, out) && std::isfinite(*out) && *out > 0;
  };
  absl::Duration tiers[3] = {absl::ZeroDuration(), absl::ZeroDuration(), absl::ZeroDuration()};
  for (const auto& [name, value] : options) {
    bool ok = true;
    const char* want = "";
    if (name == "baseline-window" || name == "hot-interval" || name == "medium-interval" ||
        name == "slow-interval") {
      auto d = ParsePositiveDuration(value);
      if (!d.ok()) return Bad(name, value, d.status().message());
      if (name == "baseline-window") c.baseline_window = *d;
      if (name == "hot-interval") tiers[0] = *d;
      if (name == "medium-interval") tiers[1] = *d;
      if (name == "slow-interval") tiers[2] = *d;
    } else if (name == "correlate-rate-factor") {
      ok = positive(value, &c.rate_factor), want = "want a number > 0";
    } else if (name == "correlate-pause-fraction") {
      ok = fraction(value, &c.pause_fraction_threshold), want = "want a fraction";
    } else if (name == "correlate-min-coverage") {
      ok = fraction(value, &c.min_coverage), want = "want a fraction";
    } else if (name == "correlate-floors") {
      if (auto st = ParseFloors(value, &c.floors); !st.ok()) return Bad(name, value, st.message());
    } else if (name == "stall-thresholds") {
      auto t = StallPolicy::Parse(value);
      if (!t.ok()) return Bad(name, value, t.status().message());
      l.thresholds = *std::move(t);
    } else if (name == "stall-learning") {
      ok = value == "true" || value == "false", want = "want true or false";
      l.enabled = value == "true";
    } else if (name == "stall-warmup" || name == "stall-window" || name == "stall-max-keys" ||
               name == "max-events") {
      uint64_t n = 0;
      ok = absl::SimpleAtoi(value, &n), want = "want a whole number";
      if (name == "stall-warmup") l.warmup = n;
      if (name == "stall-window") l.window = n;
      if (name == "stall-max-keys") l.max_keys = n;
      if (name == "max-events") next.detect.max_events = n;
    } else if (name == "stall-median-factor") {
      ok = absl::SimpleAtod(value, &l.median_factor), want = "want a number";
    } else if (name == "stall-spread-factor") {
      ok = absl::SimpleAtod(value, &l.spread_factor), want = "want a number";
    } else if (name == "detectors") {
      next.detect.enabled = absl::StrSplit(value, ',', absl::SkipWhitespace());
    } else if (absl::Status st = next.detect.Set(name, value); !absl::IsNotFound(st) && !st.ok()) {
      return Bad(name, value, st.message());
    }
    if (!ok) return Bad(name, value, want);
  }
  // The correlator's gap bound, as the daemon derives it from its tiers.
  const absl::Duration slowest = std::max({tiers[0], tiers[1], tiers[2]});
  if (slowest > absl::ZeroDuration()) c.max_sample_gap = 2 * slowest + absl::Seconds(1);
  if (absl::Status st = next.detect.Validate(); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("recorded detector options: ", st.message()));
  }
  *settings = std::move(next);
  return absl::OkStatus();
}

}  // namespace fabricscope
