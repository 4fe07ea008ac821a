#include "exporters/prometheus_exporter.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
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

// The /metrics server (PrometheusExporter).
const MetricSpec& kHttpRequests = DefineMetric(
    {.name = "fabricscope_http_requests_total",
     .type = MetricType::kCounter,
     .help = "Requests answered by the /metrics server, by handler (metrics, healthz, readyz, "
             "other) and HTTP status code (401: missing or wrong credentials). Requests closed "
             "without an answer (TLS handshake failures, timeouts) are not counted.",
     .labels = {"handler", "code"},
     .component = "exporter"});
const MetricSpec& kWebConfigReloads = DefineMetric(
    {.name = "fabricscope_web_config_reloads_total",
     .type = MetricType::kCounter,
     .help = "SIGHUP reloads of --web.config.file by result (success; failure: the running "
             "settings stay).",
     .labels = {"result"},
     .component = "exporter"});

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
  void Reserve(size_t n) {
    family_.metric.reserve(n);
    index_.reserve(n);
  }
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
  // Sizes first: growing vectors of ~150-byte ClientMetrics sample by sample
  // was most of the render's time at 50k series (reallocation, page faults).
  absl::flat_hash_map<const MetricSpec*, size_t> family_sizes;
  size_t counter_series = 0;
  for (const SeriesSnapshot& s : snap) {
    if (!s.state.has_value || !s.state.present || s.signal->family == nullptr) continue;
    ++family_sizes[s.signal->family];
    if (s.signal->semantics.kind != CounterKind::kGauge) ++counter_series;
  }
  peaks.Reserve(counter_series);
  bursts.Reserve(counter_series);
  for (const SeriesSnapshot& s : snap) {
    if (!s.state.has_value || !s.state.present || s.signal->family == nullptr) continue;
    const MetricSpec& spec = *s.signal->family;
    auto it = families.find(spec.name);
    if (it == families.end()) {
      it = families.emplace(spec.name, NewFamily(spec)).first;
      it->second.metric.reserve(family_sizes[&spec]);
    }
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

HttpResponse Reply(int status, std::string body,
                   std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

HttpResponse Probe(const HealthFn& health, const std::string& path) {
  HealthStatus h;
  if (health) h = health();
  const bool ok = path == "/healthz" ? h.live : h.ready;
  HttpResponse r;
  r.status = ok ? 200 : 503;
  r.headers.emplace_back("Cache-Control", "no-store");
  r.body = ok ? "ok\n" : absl::StrCat(h.detail.empty() ? "unhealthy" : h.detail, "\n");
  return r;
}

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

// The user and password of an "Authorization: Basic ..." header.
bool ParseBasicAuth(absl::string_view header, std::string* user, std::string* password) {
  constexpr absl::string_view kBasic = "basic ";
  if (header.size() <= kBasic.size() ||
      !absl::EqualsIgnoreCase(header.substr(0, kBasic.size()), kBasic)) {
    return false;
  }
  std::string decoded;
  if (!absl::Base64Unescape(absl::StripAsciiWhitespace(header.substr(kBasic.size())), &decoded)) {
    return false;
  }
  const size_t colon = decoded.find(':');
  if (colon == std::string::npos) return false;
  *user = decoded.substr(0, colon);
  *password = decoded.substr(colon + 1);
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(
    const std::string& listen, MetricsRegistry* metrics, const Store* store,
    const PortInventory* ports, HealthFn health) {
  return Start(listen, Security{}, metrics, store, ports, std::move(health));
}

absl::StatusOr<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(
    const std::string& listen, const Security& security, MetricsRegistry* metrics,
    const Store* store, const PortInventory* ports, HealthFn health, MetricsProfile profile) {
  std::unique_ptr<PrometheusExporter> e(new PrometheusExporter());
  if (!security.auth_file.empty() && !security.web_config_file.empty()) {
    return absl::InvalidArgumentError(
        "metrics-auth-file (deprecated) and web.config.file cannot be combined: move the users "
        "to the web config's basic_auth_users (bcrypt hashes)");
  }
  auto access = std::make_shared<Access>();
  if (!security.auth_file.empty()) {
    auto u = ReadAuthFile(security.auth_file);
    if (!u.ok()) return u.status();
    access->plain_users = *std::move(u);
  }
  if (!security.web_config_file.empty()) {
    auto config = LoadWebConfig(security.web_config_file);
    if (!config.ok()) return config.status();
    if (config->has_tls) {
      auto tls = LoadTlsOptions(*config);
      if (!tls.ok()) return tls.status();
      e->tls_ = *std::move(tls);
    }
    if (!config->users.empty()) {
      access->bcrypt_users = std::make_unique<BasicAuthenticator>(std::move(config->users));
    }
    access->headers = std::move(config->headers);
  }
  e->web_config_file_ = security.web_config_file;
  e->access_ = std::move(access);
  e->metrics_ = metrics;
  metrics->Counter(kWebConfigReloads).Add({{"result", "success"}});
  metrics->Counter(kWebConfigReloads).Add({{"result", "failure"}});
  e->health_ = std::move(health);
  e->store_collectable_ = std::make_shared<StoreCollectable>(store, ports);
  e->metrics_collectable_ = metrics->registry();
  if (profile != MetricsProfile::kFull) {
    e->store_collectable_ = std::make_shared<ProfiledCollectable>(e->store_collectable_, profile);
    e->metrics_collectable_ =
        std::make_shared<ProfiledCollectable>(e->metrics_collectable_, profile);
  }
  const PrometheusExporter* self = e.get();
  auto server = HttpServer::Start(
      listen, [self](const HttpRequest& req) { return self->Serve(req); },
      e->tls_.has_value() ? &*e->tls_ : nullptr);
  if (!server.ok()) {
    return absl::UnavailableError(
        absl::StrCat("metrics-listen ", listen, ": ", server.status().message()));
  }
  e->server_ = *std::move(server);
  return e;
}

PrometheusExporter::~PrometheusExporter() {
  server_.reset();  // no request runs after this
}

absl::Status PrometheusExporter::ReloadWebConfig() {
  if (web_config_file_.empty()) return absl::OkStatus();
  auto fail = [this](absl::Status s) {
    metrics_->Counter(kWebConfigReloads).Add({{"result", "failure"}}).Increment();
    return s;
  };
  auto config = LoadWebConfig(web_config_file_);
  if (!config.ok()) return fail(config.status());
  std::optional<TlsOptions> tls;
  if (config->has_tls) {
    auto t = LoadTlsOptions(*config);
    if (!t.ok()) return fail(t.status());
    tls = *std::move(t);
  }
  auto access = std::make_shared<Access>();
  if (!config->users.empty()) {
    access->bcrypt_users = std::make_unique<BasicAuthenticator>(std::move(config->users));
  }
  access->headers = std::move(config->headers);
  if (tls != tls_) {
    auto next = server_->Successor(tls.has_value() ? &*tls : nullptr);
    if (!next.ok()) return fail(next.status());
    // The new server takes over the socket once the old one is gone.
    std::unique_ptr<HttpServer> old = std::exchange(server_, *std::move(next));
    {
      std::lock_guard lock(access_mu_);
      access_ = access;
    }
    old.reset();
    tls_ = std::move(tls);
  } else {
    std::lock_guard lock(access_mu_);
    access_ = std::move(access);
  }
  metrics_->Counter(kWebConfigReloads).Add({{"result", "success"}}).Increment();
  return absl::OkStatus();
}

std::shared_ptr<const PrometheusExporter::Access> PrometheusExporter::CurrentAccess() const {
  std::lock_guard lock(access_mu_);
  return access_;
}

bool PrometheusExporter::Authorized(const HttpRequest& req, const Access& access) {
  if (access.open()) return true;
  std::string user, password;
  if (!ParseBasicAuth(req.Header("authorization"), &user, &password)) return false;
  if (access.bcrypt_users != nullptr) return access.bcrypt_users->Check(user, password);
  bool ok = false;
  for (const auto& [u, p] : access.plain_users) ok |= u == user && SameSecret(p, password);
  return ok;
}

HttpResponse PrometheusExporter::Serve(const HttpRequest& req) const {
  const std::shared_ptr<const Access> access = CurrentAccess();
  HttpResponse r = Route(req, *access);
  r.headers.insert(r.headers.end(), access->headers.begin(), access->headers.end());
  const absl::string_view handler = req.path == "/metrics"   ? "metrics"
                                    : req.path == "/healthz" ? "healthz"
                                    : req.path == "/readyz"  ? "readyz"
                                                             : "other";
  metrics_->Counter(kHttpRequests)
      .Add({{"handler", std::string(handler)}, {"code", absl::StrCat(r.status)}})
      .Increment();
  return r;
}

HttpResponse PrometheusExporter::Route(const HttpRequest& req, const Access& access) const {
  if (req.method != "GET" && req.method != "HEAD") {
    return Reply(405, "method not allowed\n", {{"Allow", "GET, HEAD"}});
  }
  if (req.path == "/healthz" || req.path == "/readyz") return Probe(health_, req.path);
  if (req.path != "/metrics") return Reply(404, "not found; see /metrics\n");
  if (!Authorized(req, access)) {
    return Reply(401, "unauthorized\n", {{"WWW-Authenticate", "Basic realm=\"fabricscope\""}});
  }
  return ServeMetrics(req);
}

void PrometheusExporter::SetExemplarSource(ExemplarFn fn) {
  auto shared = fn ? std::make_shared<const ExemplarFn>(std::move(fn)) : nullptr;
  std::lock_guard lock(exemplars_mu_);
  exemplars_ = std::move(shared);
}

HttpResponse PrometheusExporter::ServeMetrics(const HttpRequest& req) const {
  const std::string& accept = req.Header("accept");
  const std::optional<ExpositionFormat> format = NegotiateFormat(accept);
  std::vector<prometheus::MetricFamily> families;
  std::vector<SeriesExemplar> exemplars;
  if (format.has_value()) {  // a 406 renders nothing
    families = metrics_collectable_->Collect();
    std::vector<prometheus::MetricFamily> store = store_collectable_->Collect();
    std::move(store.begin(), store.end(), std::back_inserter(families));
    if (*format == ExpositionFormat::kOpenMetrics) {
      std::shared_ptr<const ExemplarFn> fn;
      {
        std::lock_guard lock(exemplars_mu_);
        fn = exemplars_;
      }
      if (fn != nullptr) exemplars = (*fn)();
    }
  }
  ScrapeOutput out = RenderScrape(families, exemplars, accept, req.Header("accept-encoding"));
  HttpResponse r;
  r.status = out.status;
  r.content_type = std::move(out.content_type);
  r.body = std::move(out.body);
  if (!out.content_encoding.empty())
    r.headers.emplace_back("Content-Encoding", out.content_encoding);
  r.headers.emplace_back("Vary", "Accept, Accept-Encoding");
  return r;
}

}  // namespace fabricscope
