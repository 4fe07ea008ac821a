#include "exporters/prometheus_exporter.h"

#include <CivetServer.h>
#include <civetweb.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "prometheus/metric_type.h"
#include "store/aggregates.h"

namespace fabricscope {
namespace {

const MetricSpec& kCounterSaturated = DefineMetric(
    {.name = "fabricscope_ib_pma_saturated",
     .type = MetricType::kGauge,
     .help = "1 while a saturating IB PMA counter sits at its maximum (no rate can be derived "
             "from it until it is cleared), else 0.",
     .labels = {"device", "port", "counter"},
     .component = "store"});
// The host topology (collectors/topology_collector.h fills it into the port
// inventory; rendered here so that a partner that changed or went leaves no
// stale series).
const MetricSpec& kLinkPartnerInfo = DefineMetric(
    {.name = "fabricscope_link_partner_info",
     .type = MetricType::kGauge,
     .help = "1 for each watched port with a known link partner: the other end of the cable as "
             "LLDP (source=lldp), InfiniBand SMPs (ib_mad) or the topology file (file) name it. "
             "For ib_mad, partner_chassis_id is the peer's NodeGUID, partner_system_name its "
             "NodeDescription and partner_port_id its port number.",
     .labels = {"device", "port", "netdev", "source", "partner_chassis_id", "partner_system_name",
                "partner_port_id", "partner_port_description"},
     .component = "topology"});
const MetricSpec& kPortPciInfo = DefineMetric(
    {.name = "fabricscope_port_pci_info",
     .type = MetricType::kGauge,
     .help = "1 for each RDMA port with a known PCI function: its PCI address and NUMA node "
             "(-1: unknown).",
     .labels = {"device", "port", "netdev", "pci_address", "numa_node"},
     .component = "topology"});
const MetricSpec& kGpuInfo = DefineMetric(
    {.name = "fabricscope_gpu_info",
     .type = MetricType::kGauge,
     .help = "1 for each GPU on the PCI tree; gpu_index is its position in PCI bus order "
             "(nvidia-smi's default order).",
     .labels = {"gpu_bus_id", "gpu_index", "vendor", "model", "numa_node"},
     .component = "topology"});
const MetricSpec& kGpuNicAffinity = DefineMetric(
    {.name = "fabricscope_gpu_nic_affinity",
     .type = MetricType::kGauge,
     .help = "1 for each GPU x RDMA device pair: relation is the PCI path class as nvidia-smi "
             "topo -m names it (PIX, PXB, PHB, NODE, SYS; closest first).",
     .labels = {"gpu_bus_id", "gpu_index", "device", "relation"},
     .component = "topology"});
const MetricSpec& kCounterResets = DefineMetric(
    {.name = "fabricscope_series_resets_total",
     .type = MetricType::kCounter,
     .help = "Times a raw counter went backwards other than by a 32-bit wrap (driver reload, "
             "counter clear). Present only for series that have reset.",
     .labels = {"source", "device", "port", "netdev", "counter"},
     .component = "store"});
const MetricSpec& kStoreBytes =
    DefineMetric({.name = "fabricscope_store_bytes",
                  .type = MetricType::kGauge,
                  .help = "Memory held by the sample store (within --store-memory).",
                  .labels = {},
                  .component = "store"});
const MetricSpec& kStoreSamples = DefineMetric({.name = "fabricscope_store_samples",
                                                .type = MetricType::kGauge,
                                                .help = "Samples held in the store now.",
                                                .labels = {},
                                                .component = "store"});
const MetricSpec& kStoreSeries = DefineMetric({.name = "fabricscope_store_series",
                                               .type = MetricType::kGauge,
                                               .help = "Series registered in the store.",
                                               .labels = {},
                                               .component = "store"});
const MetricSpec& kStoreRetention =
    DefineMetric({.name = "fabricscope_store_retention_seconds",
                  .type = MetricType::kGauge,
                  .help = "Age of the oldest sample still held in the store.",
                  .labels = {},
                  .component = "store"});
const MetricSpec& kStoreEvicted =
    DefineMetric({.name = "fabricscope_store_evicted_samples_total",
                  .type = MetricType::kCounter,
                  .help = "Samples evicted (oldest first) to stay within --store-memory.",
                  .labels = {},
                  .component = "store"});

// Sub-second aggregates (store/aggregates.h), computed by the store at
// append time; rendered here from the snapshot, never reset on scrape.
const MetricSpec& kPeakRate = DefineMetric(
    {.name = "fabricscope_peak_rate_per_second",
     .type = MetricType::kGauge,
     .help = "Highest per-poll-interval rate of a counter within the trailing --peak-window, in "
             "the counter family's unit per second. `signal` is the family name without "
             "fabricscope_ and _total, followed by :<value> for each family label other than "
             "device/port/netdev/priority/direction (e.g. rdma_errors:out_of_sequence), so "
             "every raw series keeps its own line.",
     .labels = {"signal", "device", "port", "netdev", "priority", "direction"},
     .component = "store"});
const MetricSpec& kPauseFractionPeak = DefineMetric(
    {.name = "fabricscope_pfc_pause_fraction_peak",
     .type = MetricType::kGauge,
     .help = "Highest fraction of one poll interval spent PFC-paused within the trailing "
             "--peak-window (the per-interval rate of fabricscope_pfc_pause_seconds_total, "
             "clamped to [0,1]; 1 = paused the whole interval).",
     .labels = {"netdev", "priority", "direction"},
     .component = "store"});
const MetricSpec& kMicrobursts = DefineMetric(
    {.name = "fabricscope_microbursts_total",
     .type = MetricType::kCounter,
     .help = "Poll intervals whose rate exceeded --burst-factor times the counter's trailing 1 s "
             "mean rate and the signal's absolute floor (per second, family unit: port_bytes "
             "and netdev_bytes 1e8; port_packets, port_unicast_packets, netdev_packets and "
             "rdma_requests 1e5; port_multicast_packets, ecn_marked_packets, cnp_sent, "
             "cnp_handled and pfc_pause_frames 1e3; cnp_ignored 100; pfc_pause_seconds 0.05; "
             "ib_port_xmit_wait_ticks 1e6; rdma_errors, ib_port_errors, discards, "
             "netdev_drops and netdev_errors 10; any other signal 100). Labels as "
             "fabricscope_peak_rate_per_second.",
     .labels = {"signal", "device", "port", "netdev", "priority", "direction"},
     .component = "store"});

prometheus::MetricType ToPromType(MetricType t) {
  switch (t) {
    case MetricType::kCounter:
      return prometheus::MetricType::Counter;
    case MetricType::kGauge:
      return prometheus::MetricType::Gauge;
    case MetricType::kHistogram:
      return prometheus::MetricType::Histogram;
    case MetricType::kSummary:
      return prometheus::MetricType::Summary;
  }
  return prometheus::MetricType::Untyped;
}

prometheus::MetricFamily NewFamily(const MetricSpec& spec) {
  prometheus::MetricFamily f;
  f.name = spec.name;
  f.help = spec.help;
  f.type = ToPromType(spec.type);
  return f;
}

void AddSample(prometheus::MetricFamily* f, std::vector<prometheus::ClientMetric::Label> labels,
               double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  if (f->type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

void AddScalar(std::vector<prometheus::MetricFamily>* out, const MetricSpec& spec, double v) {
  prometheus::MetricFamily f = NewFamily(spec);
  AddSample(&f, {}, v);
  out->push_back(std::move(f));
}

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

// The topology families (value 1 per item), from the inventory's current
// topology; an empty family is left out.
void AddTopology(const HostTopology& t, std::map<std::string, prometheus::MetricFamily>* families) {
  auto emit = [&](const MetricSpec& spec, prometheus::MetricFamily f) {
    if (!f.metric.empty()) families->emplace(spec.name, std::move(f));
  };
  auto port_label = [](uint32_t port) { return port == 0 ? std::string() : absl::StrCat(port); };
  prometheus::MetricFamily partners = NewFamily(kLinkPartnerInfo);
  for (const LinkPartner& p : t.partners) {
    AddSample(&partners,
              {{"device", p.device},
               {"port", port_label(p.port)},
               {"netdev", p.netdev},
               {"source", p.source},
               {"partner_chassis_id", p.chassis_id},
               {"partner_system_name", p.system_name},
               {"partner_port_id", p.port_id},
               {"partner_port_description", p.port_description}},
              1.0);
  }
  emit(kLinkPartnerInfo, std::move(partners));
  prometheus::MetricFamily pci = NewFamily(kPortPciInfo);
  for (const PortPci& p : t.ports) {
    AddSample(&pci,
              {{"device", p.device},
               {"port", port_label(p.port)},
               {"netdev", p.netdev},
               {"pci_address", p.pci_address},
               {"numa_node", absl::StrCat(p.numa_node)}},
              1.0);
  }
  emit(kPortPciInfo, std::move(pci));
  prometheus::MetricFamily gpus = NewFamily(kGpuInfo);
  for (const GpuInfo& g : t.gpus) {
    AddSample(&gpus,
              {{"gpu_bus_id", g.bus_id},
               {"gpu_index", absl::StrCat(g.index)},
               {"vendor", g.vendor},
               {"model", g.model},
               {"numa_node", absl::StrCat(g.numa_node)}},
              1.0);
  }
  emit(kGpuInfo, std::move(gpus));
  prometheus::MetricFamily affinity = NewFamily(kGpuNicAffinity);
  for (const GpuNicAffinity& a : t.affinity) {
    AddSample(&affinity,
              {{"gpu_bus_id", a.gpu_bus_id},
               {"gpu_index", absl::StrCat(a.gpu_index)},
               {"device", a.device},
               {"relation", PciRelationName(a.relation)}},
              1.0);
  }
  emit(kGpuNicAffinity, std::move(affinity));
}

bool IsPlacementLabel(absl::string_view l) {
  return l == "device" || l == "port" || l == "netdev" || l == "priority" || l == "direction";
}

// The `signal` label of the aggregate families: the signal name plus the
// values of the family's other labels (`counter`, `reason`, ...).
std::string AggregateSignalLabel(const Signal& sig) {
  std::string out = sig.name;
  if (sig.family == nullptr) return out;
  for (size_t i = 0; i < sig.family->labels.size() && i < sig.label_values.size(); ++i) {
    if (IsPlacementLabel(sig.family->labels[i]) || sig.label_values[i].empty()) continue;
    absl::StrAppend(&out, ":", sig.label_values[i]);
  }
  return out;
}

// Accumulates one family without duplicate label sets: duplicates merge with
// max (peaks) or sum (counters).
class DedupFamily {
 public:
  enum class Merge { kMax, kSum };
  DedupFamily(const MetricSpec& spec, Merge merge) : family_(NewFamily(spec)), merge_(merge) {}
  void Add(std::vector<prometheus::ClientMetric::Label> labels, double v) {
    uint64_t h = 0;
    for (const auto& l : labels) h = absl::HashOf(h, l.value);
    // Open addressing on the hash: a different label set with the same hash
    // moves on to the next slot.
    for (;; ++h) {
      auto [it, inserted] = index_.try_emplace(h, family_.metric.size());
      if (inserted) {
        AddSample(&family_, std::move(labels), v);
        return;
      }
      prometheus::ClientMetric& m = family_.metric[it->second];
      if (!SameValues(m.label, labels)) continue;
      double& cur =
          family_.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      cur = merge_ == Merge::kMax ? std::max(cur, v) : cur + v;
      return;
    }
  }
  bool empty() const { return family_.metric.empty(); }
  prometheus::MetricFamily Take() { return std::move(family_); }

 private:
  static bool SameValues(const std::vector<prometheus::ClientMetric::Label>& a,
                         const std::vector<prometheus::ClientMetric::Label>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].value != b[i].value) return false;
    }
    return true;
  }

  prometheus::MetricFamily family_;
  Merge merge_;
  absl::flat_hash_map<uint64_t, size_t> index_;
};

}  // namespace

std::vector<prometheus::MetricFamily> RenderStoreFamilies(const Store& store,
                                                          const PortInventory* port_inventory) {
  return RenderStoreFamilies(store, port_inventory, NowNs());
}

std::vector<prometheus::MetricFamily> RenderStoreFamilies(const Store& store,
                                                          const PortInventory* port_inventory,
                                                          int64_t now_ns) {
  std::vector<prometheus::MetricFamily> out;
  std::vector<SeriesSnapshot> snap = store.Snapshot();

  // Families in catalog (name) order, for a stable exposition.
  std::map<std::string, prometheus::MetricFamily> families;
  prometheus::MetricFamily saturated = NewFamily(kCounterSaturated);
  prometheus::MetricFamily resets = NewFamily(kCounterResets);
  DedupFamily peaks(kPeakRate, DedupFamily::Merge::kMax);
  DedupFamily pause_peaks(kPauseFractionPeak, DedupFamily::Merge::kMax);
  DedupFamily bursts(kMicrobursts, DedupFamily::Merge::kSum);
  // A peak is as of the series' last sample: stale once that is older than the
  // window (plus one peak bucket), e.g. a series no longer polled.
  const int64_t window_ns = absl::ToInt64Nanoseconds(store.options().peak_window);
  const int64_t stale_ns = window_ns + std::max<int64_t>(1'000'000'000, window_ns / 16);
  for (const SeriesSnapshot& s : snap) {
    if (!s.state.has_value || !s.state.present || s.signal->family == nullptr) continue;
    const MetricSpec& spec = *s.signal->family;
    auto it = families.find(spec.name);
    if (it == families.end()) it = families.emplace(spec.name, NewFamily(spec)).first;
    std::vector<prometheus::ClientMetric::Label> labels;
    labels.reserve(spec.labels.size());
    for (size_t i = 0; i < spec.labels.size(); ++i) {
      labels.push_back({spec.labels[i], s.signal->label_values[i]});
    }
    AddSample(&it->second, std::move(labels), s.state.total);

    if (s.signal->semantics.kind != CounterKind::kGauge) {
      const Signal& sig = *s.signal;
      std::vector<prometheus::ClientMetric::Label> agg_labels = {
          {"signal", AggregateSignalLabel(sig)},
          {"device", std::string(sig.Label("device"))},
          {"port", std::string(sig.Label("port"))},
          {"netdev", std::string(sig.Label("netdev"))},
          {"priority", std::string(sig.Label("priority"))},
          {"direction", std::string(sig.Label("direction"))}};
      const bool fresh = now_ns - s.state.last_ts_ns <= stale_ns;
      if (s.state.peak_valid && fresh) {
        if (sig.name == "pfc_pause_seconds") {
          pause_peaks.Add({agg_labels[3], agg_labels[4], agg_labels[5]},
                          std::clamp(s.state.peak_rate, 0.0, 1.0));
        }
        peaks.Add(agg_labels, s.state.peak_rate);
      }
      bursts.Add(std::move(agg_labels), static_cast<double>(s.state.microbursts));
    }

    const std::string port = s.key->port == 0 ? "" : absl::StrCat(s.key->port);
    if (s.signal->semantics.kind == CounterKind::kSaturating) {
      AddSample(&saturated, {{"device", s.key->device}, {"port", port}, {"counter", s.key->name}},
                s.state.saturated ? 1.0 : 0.0);
    }
    if (s.state.resets > 0) {
      AddSample(&resets,
                {{"source", s.key->source},
                 {"device", s.key->device},
                 {"port", port},
                 {"netdev", s.key->netdev},
                 {"counter", s.key->name}},
                static_cast<double>(s.state.resets));
    }
  }
  std::vector<PortInfo> ports =
      port_inventory != nullptr ? port_inventory->List() : std::vector<PortInfo>{};
  if (!ports.empty()) {
    const MetricSpec& spec = *FindMetric("fabricscope_port_info");
    prometheus::MetricFamily f = NewFamily(spec);
    for (const PortInfo& p : ports) {
      if (!p.present) continue;
      AddSample(&f,
                {{"device", p.device},
                 {"port", absl::StrCat(p.port)},
                 {"netdev", p.netdev},
                 {"link_layer", p.link_layer},
                 {"state", p.state},
                 {"rate", p.rate},
                 {"driver", p.driver},
                 {"fw_ver", p.fw_ver}},
                1.0);
    }
    if (!f.metric.empty()) families.emplace(spec.name, std::move(f));
  }
  if (port_inventory != nullptr) AddTopology(port_inventory->Topology(), &families);
  if (!saturated.metric.empty()) families.emplace(saturated.name, std::move(saturated));
  if (!resets.metric.empty()) families.emplace(resets.name, std::move(resets));
  for (DedupFamily* f : {&peaks, &pause_peaks, &bursts}) {
    if (f->empty()) continue;
    prometheus::MetricFamily fam = f->Take();
    std::string name = fam.name;
    families.emplace(std::move(name), std::move(fam));
  }
  for (auto& [name, f] : families) out.push_back(std::move(f));

  StoreStats stats = store.Stats();
  AddScalar(&out, kStoreBytes, static_cast<double>(stats.bytes));
  AddScalar(&out, kStoreSamples, static_cast<double>(stats.samples));
  AddScalar(&out, kStoreSeries, static_cast<double>(stats.series));
  AddScalar(&out, kStoreRetention,
            stats.oldest_ts_ns == 0 ? 0.0 : std::max(0.0, (now_ns - stats.oldest_ts_ns) / 1e9));
  AddScalar(&out, kStoreEvicted, static_cast<double>(stats.evicted_samples));
  return out;
}

namespace {

// The health function of this process (see PrometheusExporter::Start).
std::mutex g_health_mu;
HealthFn* g_health = nullptr;  // guarded by g_health_mu; owned by an exporter

// civetweb's begin_request hook: answers the probe paths, leaves every other
// request to prometheus-cpp (return 0).
int HandleProbe(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr) return 0;
  const absl::string_view uri = info->local_uri;
  if (uri != "/healthz" && uri != "/readyz") return 0;
  HealthStatus h;
  {
    std::lock_guard lock(g_health_mu);
    if (g_health != nullptr && *g_health) h = (*g_health)();
  }
  const bool ok = uri == "/healthz" ? h.live : h.ready;
  const std::string body =
      ok ? "ok\n" : absl::StrCat(h.detail.empty() ? "unhealthy" : h.detail, "\n");
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            ok ? 200 : 503, ok ? "OK" : "Service Unavailable", body.size());
  if (std::string_view(info->request_method ? info->request_method : "") != "HEAD") {
    mg_write(conn, body.data(), body.size());
  }
  return ok ? 200 : 503;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(
    const std::string& listen, MetricsRegistry* metrics, const Store* store,
    const PortInventory* ports, HealthFn health) {
  return Start(listen, Security{}, metrics, store, ports, std::move(health));
}

namespace {

// "user:password" lines; '#' starts a comment line.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadAuthFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat("metrics-auth-file: cannot read '", path, "'"));
  std::vector<std::pair<std::string, std::string>> users;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#') continue;
    const size_t colon = l.find(':');
    if (colon == absl::string_view::npos || colon == 0 || colon + 1 == l.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics-auth-file: ", path, ":", n, ": expected user:password"));
    }
    users.emplace_back(std::string(l.substr(0, colon)), std::string(l.substr(colon + 1)));
  }
  if (users.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics-auth-file: ", path, ": no user"));
  }
  return users;
}

// Compares without an early exit on the first differing byte.
bool SameSecret(absl::string_view a, absl::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(
    const std::string& listen, const Security& security, MetricsRegistry* metrics,
    const Store* store, const PortInventory* ports, HealthFn health, MetricsProfile profile) {
  std::unique_ptr<PrometheusExporter> e(new PrometheusExporter());
  std::vector<std::pair<std::string, std::string>> users;
  if (!security.auth_file.empty()) {
    auto u = ReadAuthFile(security.auth_file);
    if (!u.ok()) return u.status();
    users = *std::move(u);
  }
  if (health) {
    e->health_ = std::make_unique<HealthFn>(std::move(health));
    std::lock_guard lock(g_health_mu);
    g_health = e->health_.get();
  }
  CivetCallbacks callbacks;  // zero-initialised by its constructor
  callbacks.begin_request = HandleProbe;
  // Idle or never-reading clients hold a civetweb worker until the request
  // timeout: more workers than the default 2 and a short timeout keep a few
  // such peers from blocking scrapes and the probes.
  std::vector<std::string> options = {"listening_ports",    listen,
                                      "num_threads",        absl::StrCat(kHttpThreads),
                                      "request_timeout_ms", absl::StrCat(kHttpRequestTimeoutMs),
                                      "linger_timeout_ms",  "500"};
  try {
    e->exposer_ = std::make_unique<prometheus::Exposer>(options, &callbacks);
  } catch (const std::exception& ex) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on metrics-listen ", listen, ": ", ex.what()));
  }
  e->store_collectable_ = std::make_shared<StoreCollectable>(store, ports);
  e->metrics_collectable_ = metrics->registry();
  if (profile != MetricsProfile::kFull) {
    e->store_collectable_ = std::make_shared<ProfiledCollectable>(e->store_collectable_, profile);
    e->metrics_collectable_ =
        std::make_shared<ProfiledCollectable>(e->metrics_collectable_, profile);
  }
  e->exposer_->RegisterCollectable(e->metrics_collectable_);
  e->exposer_->RegisterCollectable(e->store_collectable_);
  if (!users.empty()) {
    e->exposer_->RegisterAuth(
        [users](const std::string& user, const std::string& password) {
          bool ok = false;
          for (const auto& [u, p] : users) ok |= u == user && SameSecret(p, password);
          return ok;
        },
        "fabricscope", "/metrics");
  }
  std::vector<int> listening = e->exposer_->GetListeningPorts();
  if (listening.empty()) return absl::UnavailableError("metrics server has no listening port");
  std::string host = listen.substr(0, listen.rfind(':'));
  e->address_ = absl::StrCat(host, ":", listening.front());
  return e;
}

namespace {

// Opens and closes one TCP connection to `address` (HOST:PORT; a wildcard
// host means loopback). Used to wake civetweb's accept loop.
void Poke(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return;
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) return;
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    (void)connect(fd, res->ai_addr, res->ai_addrlen);
    close(fd);
  }
  freeaddrinfo(res);
}

}  // namespace

PrometheusExporter::~PrometheusExporter() {
  // civetweb's stop waits for its accept loop, which only looks at the stop
  // flag between polls of up to 2 s; a connection wakes the poll, so keep
  // poking (every 20 ms) until the server has stopped: SIGTERM stays well
  // within its bound.
  std::atomic<bool> stopped{false};
  std::thread waker;
  if (exposer_ != nullptr && !address_.empty()) {
    waker = std::thread([this, &stopped] {
      while (!stopped.load()) {
        Poke(address_);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  exposer_.reset();  // no request runs after this
  stopped.store(true);
  if (waker.joinable()) waker.join();
  std::lock_guard lock(g_health_mu);
  if (g_health == health_.get()) g_health = nullptr;
}

}  // namespace fabricscope
