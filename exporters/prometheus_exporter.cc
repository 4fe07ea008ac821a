#include "exporters/prometheus_exporter.h"

#include <exception>
#include <map>

#include "absl/strings/str_cat.h"
#include "prometheus/metric_type.h"

namespace fabricscope {
namespace {

const MetricSpec& kCounterSaturated = DefineMetric(
    {.name = "fabricscope_counter_saturated",
     .type = MetricType::kGauge,
     .help = "1 while a saturating IB PMA counter sits at its maximum (no rate can be derived "
             "from it until it is cleared), else 0.",
     .labels = {"device", "port", "counter"},
     .component = "store"});
const MetricSpec& kCounterResets = DefineMetric(
    {.name = "fabricscope_counter_resets_total",
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

}  // namespace

std::vector<prometheus::MetricFamily> RenderStoreFamilies(const Store& store) {
  std::vector<prometheus::MetricFamily> out;
  std::vector<SeriesSnapshot> snap = store.Snapshot();

  // Families in catalog (name) order, for a stable exposition.
  std::map<std::string, prometheus::MetricFamily> families;
  prometheus::MetricFamily saturated = NewFamily(kCounterSaturated);
  prometheus::MetricFamily resets = NewFamily(kCounterResets);
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
  std::vector<PortInfo> ports = store.Ports();
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
                 {"rate", p.rate}},
                1.0);
    }
    if (!f.metric.empty()) families.emplace(spec.name, std::move(f));
  }
  if (!saturated.metric.empty()) families.emplace(saturated.name, std::move(saturated));
  if (!resets.metric.empty()) families.emplace(resets.name, std::move(resets));
  for (auto& [name, f] : families) out.push_back(std::move(f));

  StoreStats stats = store.Stats();
  AddScalar(&out, kStoreBytes, static_cast<double>(stats.bytes));
  AddScalar(&out, kStoreSamples, static_cast<double>(stats.samples));
  AddScalar(&out, kStoreSeries, static_cast<double>(stats.series));
  AddScalar(&out, kStoreRetention,
            stats.oldest_ts_ns == 0 ? 0.0 : std::max(0.0, (NowNs() - stats.oldest_ts_ns) / 1e9));
  AddScalar(&out, kStoreEvicted, static_cast<double>(stats.evicted_samples));
  return out;
}

absl::StatusOr<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Start(
    const std::string& listen, MetricsRegistry* metrics, const Store* store) {
  std::unique_ptr<PrometheusExporter> e(new PrometheusExporter());
  try {
    e->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& ex) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on metrics-listen ", listen, ": ", ex.what()));
  }
  e->store_collectable_ = std::make_shared<StoreCollectable>(store);
  e->exposer_->RegisterCollectable(metrics->registry());
  e->exposer_->RegisterCollectable(e->store_collectable_);
  std::vector<int> ports = e->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError("metrics server has no listening port");
  std::string host = listen.substr(0, listen.rfind(':'));
  e->address_ = absl::StrCat(host, ":", ports.front());
  return e;
}

PrometheusExporter::~PrometheusExporter() = default;

}  // namespace fabricscope
