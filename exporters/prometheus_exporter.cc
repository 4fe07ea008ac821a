#include "exporters/prometheus_exporter.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>

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
// The pods holding this host's devices (store/pod_table.h; the kubernetes
// source fills it into the port inventory).
const MetricSpec& kPodDeviceInfo = DefineMetric(
    {.name = "fabricscope_pod_device_info",
     .type = MetricType::kGauge,
     .help =
         "1 for each device the kubelet's PodResources API allocated to a container on this "
         "host: kind gpu (bus_id the GPU's PCI address), rdma (an RDMA device, a PF or an "
         "SR-IOV VF: device as on the port series, bus_id its PCI address, parent_device a VF's "
         "PF), pci (a PCI address that is no RDMA device) or unresolved (an id that names no "
         "device here: the RDMA shared device plugin's, a MIG instance, a device gone). "
         "gpu_bus_id repeats a GPU's bus_id under the name fabricscope_gpu_info and "
         "fabricscope_gpu_nic_affinity use, for joins.",
     .labels = {"namespace", "pod", "container", "resource", "device_id", "kind", "device",
                "parent_device", "bus_id", "gpu_bus_id"},
     .component = "kubernetes"});
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
const MetricSpec& kStoreSeekIndexBytes = DefineMetric(
    {.name = "fabricscope_store_seek_index_bytes",
     .type = MetricType::kGauge,
     .help = "Memory held by the seek indexes that reads of the store (span correlation, "
             "queries) keep per reading thread to decode only part of a chunk: outside "
             "--store-memory, bounded at 16 MiB per thread and 48 MiB in all.",
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
const MetricSpec& kHttpDeadlineClosed = DefineMetric(
    {.name = "fabricscope_http_request_deadline_closed_total",
     .type = MetricType::kCounter,
     .help = "Connections to the /metrics server closed because their request (TLS handshake, "
             "headers, body) did not arrive whole within 10 s of the connection's start or of "
             "the previous answer: slow or stalled clients.",
     .labels = {},
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

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

// ---- The store's families, rendered family by family into a sink ----
//
// VisitStoreFamilies walks one store snapshot and hands every family to a
// sink, in exposition order, one sample at a time, as label views into the
// snapshot (the store's keys and signals) and a few scratch buffers: no
// allocation per sample. A sink has
//   void Reserve(size_t samples);  // a hint, before the first family
//   void Begin(const MetricSpec& spec, size_t expected_samples);
//   void Sample(const LabelView* labels, size_t n_labels, double value);
//   void End();                    // a family without samples is left out
// FamiliesSink builds prometheus-cpp families (RenderStoreFamilies),
// WriterSink writes the exposition (WriteStoreFamilies, what /metrics runs).

// Formats integers into a buffer of its own, for label values.
class IntText {
 public:
  absl::string_view Format(int64_t v) {
    auto r = std::to_chars(buf_, buf_ + sizeof(buf_), v);
    return absl::string_view(buf_, static_cast<size_t>(r.ptr - buf_));
  }
  // The `port` label of a key or partner: empty for port 0.
  absl::string_view Port(uint32_t port) { return port == 0 ? absl::string_view() : Format(port); }

 private:
  char buf_[24];
};

bool IsPlacementLabel(absl::string_view l) {
  return l == "device" || l == "port" || l == "netdev" || l == "priority" || l == "direction";
}

// Where a signal family keeps the labels the aggregate families use.
struct SpecLayout {
  static constexpr size_t kPlacement = 5;  // device, port, netdev, priority, direction
  int placement[kPlacement] = {-1, -1, -1, -1, -1};
  // Label indexes other than the placement ones, in order: the `signal`
  // label of the aggregate families is the signal's name followed by
  // ":<value>" for each of them that is not empty (`counter`, `reason`, ...).
  std::vector<int> extra;

  explicit SpecLayout(const MetricSpec& spec) {
    static constexpr absl::string_view kNames[kPlacement] = {"device", "port", "netdev", "priority",
                                                             "direction"};
    for (size_t i = 0; i < spec.labels.size(); ++i) {
      for (size_t p = 0; p < kPlacement; ++p) {
        if (placement[p] < 0 && spec.labels[i] == kNames[p]) placement[p] = static_cast<int>(i);
      }
      if (!IsPlacementLabel(spec.labels[i])) extra.push_back(static_cast<int>(i));
    }
  }
  // Signal::Label of placement label `p` (0..4).
  absl::string_view Placement(const Signal& sig, size_t p) const {
    const int i = placement[p];
    return i >= 0 && static_cast<size_t>(i) < sig.label_values.size()
               ? absl::string_view(sig.label_values[i])
               : absl::string_view();
  }
};

// One aggregate family without duplicate label sets: duplicates (the same
// signal from two sources) merge with max (peaks) or sum (counters); samples
// in the order of their label set's first appearance.
template <size_t N>
class DedupFamily {
 public:
  using Key = std::array<absl::string_view, N>;
  enum class Merge { kMax, kSum };
  explicit DedupFamily(Merge merge) : merge_(merge) {}
  void Reserve(size_t n) {
    entries_.reserve(n);
    index_.reserve(n);
  }
  void Add(const Key& key, double v) {
    auto [it, inserted] = index_.try_emplace(key, entries_.size());
    if (inserted) {
      entries_.push_back({key, v});
      return;
    }
    double& cur = entries_[it->second].second;
    cur = merge_ == Merge::kMax ? std::max(cur, v) : cur + v;
  }
  const std::vector<std::pair<Key, double>>& entries() const { return entries_; }

 private:
  Merge merge_;
  std::vector<std::pair<Key, double>> entries_;
  absl::flat_hash_map<Key, uint32_t> index_;
};

// The render is bound by memory latency: every series' signal (and its
// label values, which the lines are written from) is its own heap object. A
// loop over series asks for the signal `kPrefetchAhead` * 2 series ahead and
// for its label values `kPrefetchAhead` ahead (by then the signal is in
// cache); the aggregate families' loops ask for their label values ahead.
constexpr size_t kPrefetchAhead = 8;
inline void PrefetchSignal(const Signal* sig) {
  __builtin_prefetch(sig);
  __builtin_prefetch(reinterpret_cast<const char*>(sig) + 64);
}
// The label values an aggregate sample is written from (the signal label
// and the placement labels live in the signal's label values).
inline void PrefetchKey(const std::array<absl::string_view, 6>& key) {
  __builtin_prefetch(key[0].data());
  __builtin_prefetch(key[1].data());
  __builtin_prefetch(key[5].data());
}
inline void PrefetchLabelValues(const Signal* sig) {
  const char* values = reinterpret_cast<const char*>(sig->label_values.data());
  __builtin_prefetch(values);
  __builtin_prefetch(values + 64);
  __builtin_prefetch(values + 128);
}

// Bytes that stay where they are written until the arena goes (string_views
// into it stay valid while it grows), in blocks of 64 KiB.
class TextArena {
 public:
  // Room for `n` bytes.
  char* Allocate(size_t n) {
    if (blocks_.empty() || used_ + n > size_) {
      size_ = std::max<size_t>(64 * 1024, n);
      blocks_.push_back(std::unique_ptr<char[]>(new char[size_]));  // not zeroed
      used_ = 0;
    }
    char* p = blocks_.back().get() + used_;
    used_ += n;
    return p;
  }

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t size_ = 0, used_ = 0;
};

// The series of fabricscope_peak_rate_per_second and
// fabricscope_microbursts_total, which share their label set: one entry per
// label set (the same signal from two sources merges: peaks with max,
// microbursts summed), found through one hash lookup per counter series. The
// microburst samples are in the order of their label set's first
// appearance, the peaks in the order of their first valid peak (what
// DedupFamily gives each family on its own).
class AggregateSeries {
 public:
  using Key = std::array<absl::string_view, 6>;
  struct Entry {
    Key key;
    double microbursts;
    double peak;
    bool has_peak;
  };
  void Reserve(size_t n) {
    entries_.reserve(n);
    index_.reserve(n);
  }
  void Add(const Key& key, double microbursts, bool has_peak, double peak) {
    // Open addressing on the hash: a different label set with the same hash
    // moves on to the next slot.
    for (uint64_t h = absl::HashOf(key);; ++h) {
      auto [it, inserted] = index_.try_emplace(h, static_cast<uint32_t>(entries_.size()));
      if (inserted) {
        if (has_peak) peak_order_.push_back(it->second);
        entries_.push_back({key, microbursts, peak, has_peak});
        return;
      }
      Entry& e = entries_[it->second];
      if (e.key != key) continue;
      e.microbursts = e.microbursts + microbursts;
      if (has_peak && !e.has_peak) {
        e.has_peak = true;
        e.peak = peak;
        peak_order_.push_back(it->second);
      } else if (has_peak) {
        e.peak = std::max(e.peak, peak);
      }
      return;
    }
  }
  const std::vector<Entry>& entries() const { return entries_; }
  const std::vector<uint32_t>& peak_order() const { return peak_order_; }

 private:
  std::vector<Entry> entries_;
  std::vector<uint32_t> peak_order_;
  absl::flat_hash_map<uint64_t, uint32_t> index_;
};

// Passes on what `profile` exports (the rules of ApplyMetricsProfile, from
// the same ProfileRuleFor / ProfileKeepsSample, applied per sample: the
// result is the same as filtering the rendered families).
template <typename Sink>
class ProfiledSink {
 public:
  ProfiledSink(MetricsProfile profile, Sink* sink) : profile_(profile), sink_(sink) {}
  void Reserve(size_t samples) { sink_->Reserve(samples); }
  void Begin(const MetricSpec& spec, size_t expected) {
    rule_ = ProfileRuleFor(profile_, spec.name);
    if (rule_ != SampleRule::kDrop) sink_->Begin(spec, expected);
  }
  void Sample(const LabelView* labels, size_t n, double value) {
    if (rule_ == SampleRule::kAll ||
        (rule_ != SampleRule::kDrop &&
         ProfileKeepsSample(rule_, Find(labels, n, "signal"), Find(labels, n, "lane"), value))) {
      sink_->Sample(labels, n, value);
    }
  }
  void End() {
    if (rule_ != SampleRule::kDrop) sink_->End();
  }

 private:
  static const absl::string_view* Find(const LabelView* labels, size_t n, absl::string_view name) {
    for (size_t i = 0; i < n; ++i) {
      if (labels[i].name == name) return &labels[i].value;
    }
    return nullptr;
  }
  const MetricsProfile profile_;
  Sink* const sink_;
  SampleRule rule_ = SampleRule::kAll;
};

// Builds prometheus-cpp families.
class FamiliesSink {
 public:
  explicit FamiliesSink(std::vector<prometheus::MetricFamily>* out) : out_(out) {}
  void Reserve(size_t) {}
  void Begin(const MetricSpec& spec, size_t expected) {
    out_->push_back(NewFamily(spec));
    out_->back().metric.reserve(expected);
  }
  void Sample(const LabelView* labels, size_t n, double value) {
    prometheus::MetricFamily& f = out_->back();
    prometheus::ClientMetric m;
    m.label.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      m.label.push_back({std::string(labels[i].name), std::string(labels[i].value)});
    }
    if (f.type == prometheus::MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    f.metric.push_back(std::move(m));
  }
  void End() {
    if (out_->back().metric.empty()) out_->pop_back();
  }

 private:
  std::vector<prometheus::MetricFamily>* out_;
};

// Writes the exposition.
class WriterSink {
 public:
  explicit WriterSink(ExpositionWriter* writer) : writer_(writer) {}
  // ~115 bytes per sample line at 50k series (the 18 MB scrape): one
  // reservation for the whole body instead of doubling and copying it.
  void Reserve(size_t samples) { writer_->Reserve(samples * 128 + 64 * 1024); }
  void Begin(const MetricSpec& spec, size_t) {
    writer_->BeginFamily(spec.name, spec.help, ToPromType(spec.type));
  }
  void Sample(const LabelView* labels, size_t n, double value) {
    writer_->AddSample(labels, n, value);
  }
  void End() { writer_->EndFamily(); }

 private:
  ExpositionWriter* writer_;
};

// The pod of a per-process series (its pid label) as its namespace, pod and
// container labels; a process in no known pod (or known by UID alone) keeps
// them empty.
void AddPodLabels(const PodTable& pods, std::vector<LabelView>* labels) {
  if (pods.processes.empty()) return;
  uint32_t pid = 0;
  for (const LabelView& l : *labels) {
    if (l.name == "pid" && !absl::SimpleAtoi(l.value, &pid)) return;
  }
  const PodProcess* p = pid != 0 ? pods.FindProcess(pid) : nullptr;
  if (p == nullptr || !p->owner.named()) return;
  for (LabelView& l : *labels) {
    if (l.name == "namespace") {
      l.value = p->owner.ns;
    } else if (l.name == "pod") {
      l.value = p->owner.pod;
    } else if (l.name == "container") {
      l.value = p->owner.container;
    }
  }
}

template <typename Sink>
void VisitStoreFamilies(const Store& store, const PortInventory* port_inventory, int64_t now_ns,
                        Sink* sink) {
  const std::vector<SeriesSnapshot> snap = store.Snapshot();

  // One pass over the snapshot (each series' key and signal live in their
  // own heap objects: a pass that touches them all is cache misses, so
  // everything is gathered here): the signal families' series, the aggregate
  // families, and which series the saturation and reset families list.
  struct Group {
    const MetricSpec* spec;
    size_t n = 0;                              // its series
    std::unique_ptr<const SpecLayout> layout;  // made for the first counter series
  };
  std::vector<Group> groups;
  absl::flat_hash_map<const MetricSpec*, uint32_t> group_of;
  constexpr uint32_t kNotExported = ~uint32_t{0};
  std::vector<uint32_t> group_index(snap.size(), kNotExported);
  std::vector<uint32_t> saturating, with_resets;  // snapshot indexes
  // A peak is as of the series' last sample: stale once that is older than
  // the window (plus one peak bucket), e.g. a series no longer polled.
  const int64_t window_ns = absl::ToInt64Nanoseconds(store.options().peak_window);
  const int64_t stale_ns = window_ns + std::max<int64_t>(1'000'000'000, window_ns / 16);
  AggregateSeries aggregates;
  aggregates.Reserve(snap.size());
  DedupFamily<3> pause_peaks(DedupFamily<3>::Merge::kMax);
  TextArena signal_text;  // `signal` labels longer than the signal's name
  const MetricSpec* last_spec = nullptr;
  uint32_t last_group = 0;
  for (uint32_t i = 0; i < snap.size(); ++i) {
    if (i + 2 * kPrefetchAhead < snap.size()) PrefetchSignal(snap[i + 2 * kPrefetchAhead].signal);
    if (i + kPrefetchAhead < snap.size()) PrefetchLabelValues(snap[i + kPrefetchAhead].signal);
    const SeriesSnapshot& s = snap[i];
    if (!s.state.has_value || !s.state.present) continue;
    const Signal& sig = *s.signal;
    const MetricSpec* spec = sig.family;
    if (spec == nullptr) continue;
    if (spec != last_spec) {  // series of one family are often registered together
      auto [it, added] = group_of.try_emplace(spec, static_cast<uint32_t>(groups.size()));
      if (added) groups.push_back({spec, 0, nullptr});
      last_spec = spec;
      last_group = it->second;
    }
    Group& group = groups[last_group];
    group_index[i] = last_group;
    ++group.n;
    if (sig.semantics.kind == CounterKind::kSaturating) saturating.push_back(i);
    if (s.state.resets > 0) with_resets.push_back(i);
    if (sig.semantics.kind == CounterKind::kGauge) continue;

    // A counter: its peak and microburst series.
    if (group.layout == nullptr) group.layout = std::make_unique<const SpecLayout>(*spec);
    const SpecLayout& layout = *group.layout;
    size_t text_len = sig.name.size();
    for (int l : layout.extra) {
      if (static_cast<size_t>(l) >= sig.label_values.size()) break;
      if (!sig.label_values[l].empty()) text_len += 1 + sig.label_values[l].size();
    }
    absl::string_view signal_label = sig.name;
    if (text_len > sig.name.size()) {
      char* p = signal_text.Allocate(text_len);
      signal_label = absl::string_view(p, text_len);
      std::memcpy(p, sig.name.data(), sig.name.size());
      p += sig.name.size();
      for (int l : layout.extra) {
        if (static_cast<size_t>(l) >= sig.label_values.size()) break;
        const std::string& v = sig.label_values[l];
        if (v.empty()) continue;
        *p++ = ':';
        std::memcpy(p, v.data(), v.size());
        p += v.size();
      }
    }
    const AggregateSeries::Key key = {signal_label,
                                      layout.Placement(sig, 0),
                                      layout.Placement(sig, 1),
                                      layout.Placement(sig, 2),
                                      layout.Placement(sig, 3),
                                      layout.Placement(sig, 4)};
    const bool peak = s.state.peak_valid && now_ns - s.state.last_ts_ns <= stale_ns;
    if (peak && sig.name == "pfc_pause_seconds") {
      pause_peaks.Add({key[3], key[4], key[5]}, std::clamp(s.state.peak_rate, 0.0, 1.0));
    }
    aggregates.Add(key, static_cast<double>(s.state.microbursts), peak, s.state.peak_rate);
  }
  // The series of each signal family in snapshot order, all in one array
  // (group g at members[begin[g]..begin[g+1])).
  std::vector<uint32_t> begin(groups.size() + 1, 0);
  for (size_t g = 0; g < groups.size(); ++g) begin[g + 1] = begin[g] + groups[g].n;
  std::vector<uint32_t> members(begin.back());
  {
    std::vector<uint32_t> next(begin.begin(), begin.end() - 1);
    for (uint32_t i = 0; i < snap.size(); ++i) {
      if (group_index[i] != kNotExported) members[next[group_index[i]]++] = i;
    }
  }

  // Families in catalog (name) order, for a stable exposition; then the
  // store's own scalars.
  enum class Kind {
    kSignal,
    kPortInfo,
    kPartners,
    kPci,
    kGpus,
    kAffinity,
    kPods,
    kSaturated,
    kResets,
    kPeaks,
    kPausePeaks,
    kBursts
  };
  struct Entry {
    const MetricSpec* spec;
    Kind kind;
    uint32_t group = 0;
  };
  std::vector<Entry> order;
  for (uint32_t g = 0; g < groups.size(); ++g) order.push_back({groups[g].spec, Kind::kSignal, g});
  const std::vector<PortInfo> ports =
      port_inventory != nullptr ? port_inventory->List() : std::vector<PortInfo>{};
  if (!ports.empty()) order.push_back({FindMetric("fabricscope_port_info"), Kind::kPortInfo});
  HostTopology topology;
  std::shared_ptr<const PodTable> pods = std::make_shared<PodTable>();
  if (port_inventory != nullptr) {
    topology = port_inventory->Topology();
    order.push_back({&kLinkPartnerInfo, Kind::kPartners});
    order.push_back({&kPortPciInfo, Kind::kPci});
    order.push_back({&kGpuInfo, Kind::kGpus});
    order.push_back({&kGpuNicAffinity, Kind::kAffinity});
    pods = port_inventory->Pods();
    if (!pods->devices.empty()) order.push_back({&kPodDeviceInfo, Kind::kPods});
  }
  order.push_back({&kCounterSaturated, Kind::kSaturated});
  order.push_back({&kCounterResets, Kind::kResets});
  order.push_back({&kPeakRate, Kind::kPeaks});
  order.push_back({&kPauseFractionPeak, Kind::kPausePeaks});
  order.push_back({&kMicrobursts, Kind::kBursts});
  // Names are unique (the catalog aborts on a duplicate).
  std::sort(order.begin(), order.end(),
            [](const Entry& a, const Entry& b) { return a.spec->name < b.spec->name; });

  sink->Reserve(members.size() + aggregates.entries().size() + aggregates.peak_order().size() +
                pause_peaks.entries().size() + saturating.size() + with_resets.size() +
                ports.size() + topology.partners.size() + topology.ports.size() +
                topology.gpus.size() + topology.affinity.size() + 5);
  std::vector<LabelView> labels;  // scratch for the signal families
  IntText port_text, num_text, num_text2;
  static constexpr absl::string_view kAggLabels[6] = {"signal", "device",   "port",
                                                      "netdev", "priority", "direction"};
  auto aggregate_sample = [&](const AggregateSeries::Key& key, double value) {
    LabelView l[6];
    for (size_t i = 0; i < 6; ++i) l[i] = {kAggLabels[i], key[i]};
    sink->Sample(l, 6, value);
  };
  for (const Entry& e : order) {
    switch (e.kind) {
      case Kind::kSignal: {
        const MetricSpec& spec = *groups[e.group].spec;
        const bool process_family = &spec == &families::kProcessQpCounter;
        sink->Begin(spec, groups[e.group].n);
        const uint32_t end = begin[e.group + 1];
        for (uint32_t m = begin[e.group]; m < end; ++m) {
          if (m + 2 * kPrefetchAhead < end)
            PrefetchSignal(snap[members[m + 2 * kPrefetchAhead]].signal);
          if (m + kPrefetchAhead < end)
            PrefetchLabelValues(snap[members[m + kPrefetchAhead]].signal);
          const uint32_t i = members[m];
          const SeriesSnapshot& s = snap[i];
          labels.clear();
          for (size_t l = 0; l < spec.labels.size(); ++l) {
            labels.push_back({spec.labels[l], s.signal->label_values[l]});
          }
          if (process_family) AddPodLabels(*pods, &labels);
          sink->Sample(labels.data(), labels.size(), s.state.total);
        }
        sink->End();
        break;
      }
      case Kind::kPortInfo:
        sink->Begin(*e.spec, ports.size());
        for (const PortInfo& p : ports) {
          if (!p.present) continue;
          const LabelView l[] = {{"device", p.device}, {"port", num_text.Format(p.port)},
                                 {"netdev", p.netdev}, {"link_layer", p.link_layer},
                                 {"state", p.state},   {"rate", p.rate},
                                 {"driver", p.driver}, {"fw_ver", p.fw_ver}};
          sink->Sample(l, std::size(l), 1.0);
        }
        sink->End();
        break;
      case Kind::kPartners:
        sink->Begin(*e.spec, topology.partners.size());
        for (const LinkPartner& p : topology.partners) {
          const LabelView l[] = {{"device", p.device},
                                 {"port", port_text.Port(p.port)},
                                 {"netdev", p.netdev},
                                 {"source", p.source},
                                 {"partner_chassis_id", p.chassis_id},
                                 {"partner_system_name", p.system_name},
                                 {"partner_port_id", p.port_id},
                                 {"partner_port_description", p.port_description}};
          sink->Sample(l, std::size(l), 1.0);
        }
        sink->End();
        break;
      case Kind::kPci:
        sink->Begin(*e.spec, topology.ports.size());
        for (const PortPci& p : topology.ports) {
          const LabelView l[] = {{"device", p.device},
                                 {"port", port_text.Port(p.port)},
                                 {"netdev", p.netdev},
                                 {"pci_address", p.pci_address},
                                 {"numa_node", num_text.Format(p.numa_node)}};
          sink->Sample(l, std::size(l), 1.0);
        }
        sink->End();
        break;
      case Kind::kGpus:
        sink->Begin(*e.spec, topology.gpus.size());
        for (const GpuInfo& g : topology.gpus) {
          const LabelView l[] = {{"gpu_bus_id", g.bus_id},
                                 {"gpu_index", num_text.Format(g.index)},
                                 {"vendor", g.vendor},
                                 {"model", g.model},
                                 {"numa_node", num_text2.Format(g.numa_node)}};
          sink->Sample(l, std::size(l), 1.0);
        }
        sink->End();
        break;
      case Kind::kAffinity:
        sink->Begin(*e.spec, topology.affinity.size());
        for (const GpuNicAffinity& a : topology.affinity) {
          const LabelView l[] = {{"gpu_bus_id", a.gpu_bus_id},
                                 {"gpu_index", num_text.Format(a.gpu_index)},
                                 {"device", a.device},
                                 {"relation", PciRelationName(a.relation)}};
          sink->Sample(l, std::size(l), 1.0);
        }
        sink->End();
        break;
      case Kind::kPods:
        sink->Begin(*e.spec, pods->devices.size());
        for (const PodDevice& d : pods->devices) {
          const LabelView l[] = {
              {"namespace", d.owner.ns},
              {"pod", d.owner.pod},
              {"container", d.owner.container},
              {"resource", d.resource},
              {"device_id", d.device_id},
              {"kind", PodDeviceKindName(d.kind)},
              {"device", d.device},
              {"parent_device", d.parent_device},
              {"bus_id", d.bus_id},
              {"gpu_bus_id",
               d.kind == PodDeviceKind::kGpu ? absl::string_view(d.bus_id) : absl::string_view()}};
          sink->Sample(l, std::size(l), 1.0);
        }
        sink->End();
        break;
      case Kind::kSaturated:
        sink->Begin(*e.spec, saturating.size());
        for (uint32_t i : saturating) {
          const SeriesSnapshot& s = snap[i];
          const LabelView l[] = {{"device", s.key->device},
                                 {"port", port_text.Port(s.key->port)},
                                 {"counter", s.key->name}};
          sink->Sample(l, std::size(l), s.state.saturated ? 1.0 : 0.0);
        }
        sink->End();
        break;
      case Kind::kResets:
        sink->Begin(*e.spec, with_resets.size());
        for (uint32_t i : with_resets) {
          const SeriesSnapshot& s = snap[i];
          const LabelView l[] = {{"source", s.key->source},
                                 {"device", s.key->device},
                                 {"port", port_text.Port(s.key->port)},
                                 {"netdev", s.key->netdev},
                                 {"counter", s.key->name}};
          sink->Sample(l, std::size(l), static_cast<double>(s.state.resets));
        }
        sink->End();
        break;
      case Kind::kPeaks:
        sink->Begin(*e.spec, aggregates.peak_order().size());
        for (size_t n = 0; n < aggregates.peak_order().size(); ++n) {
          if (n + kPrefetchAhead < aggregates.peak_order().size()) {
            PrefetchKey(aggregates.entries()[aggregates.peak_order()[n + kPrefetchAhead]].key);
          }
          const AggregateSeries::Entry& a = aggregates.entries()[aggregates.peak_order()[n]];
          aggregate_sample(a.key, a.peak);
        }
        sink->End();
        break;
      case Kind::kPausePeaks:
        sink->Begin(*e.spec, pause_peaks.entries().size());
        for (const auto& [key, value] : pause_peaks.entries()) {
          const LabelView l[] = {{"netdev", key[0]}, {"priority", key[1]}, {"direction", key[2]}};
          sink->Sample(l, std::size(l), value);
        }
        sink->End();
        break;
      case Kind::kBursts:
        sink->Begin(*e.spec, aggregates.entries().size());
        for (size_t n = 0; n < aggregates.entries().size(); ++n) {
          if (n + kPrefetchAhead < aggregates.entries().size()) {
            PrefetchKey(aggregates.entries()[n + kPrefetchAhead].key);
          }
          const AggregateSeries::Entry& a = aggregates.entries()[n];
          aggregate_sample(a.key, a.microbursts);
        }
        sink->End();
        break;
    }
  }

  const StoreStats stats = store.Stats();
  auto scalar = [&](const MetricSpec& spec, double v) {
    sink->Begin(spec, 1);
    sink->Sample(nullptr, 0, v);
    sink->End();
  };
  scalar(kStoreBytes, static_cast<double>(stats.bytes));
  scalar(kStoreSeekIndexBytes, static_cast<double>(stats.seek_index_bytes));
  scalar(kStoreSamples, static_cast<double>(stats.samples));
  scalar(kStoreSeries, static_cast<double>(stats.series));
  scalar(kStoreRetention,
         stats.oldest_ts_ns == 0 ? 0.0 : std::max(0.0, (now_ns - stats.oldest_ts_ns) / 1e9));
  scalar(kStoreEvicted, static_cast<double>(stats.evicted_samples));
}

}  // namespace

std::vector<prometheus::MetricFamily> RenderStoreFamilies(const Store& store,
                                                          const PortInventory* port_inventory) {
  return RenderStoreFamilies(store, port_inventory, NowNs());
}

std::vector<prometheus::MetricFamily> RenderStoreFamilies(const Store& store,
                                                          const PortInventory* port_inventory,
                                                          int64_t now_ns) {
  std::vector<prometheus::MetricFamily> out;
  FamiliesSink sink(&out);
  VisitStoreFamilies(store, port_inventory, now_ns, &sink);
  return out;
}

void WriteStoreFamilies(const Store& store, const PortInventory* ports, int64_t now_ns,
                        MetricsProfile profile, ExpositionWriter* writer) {
  WriterSink writer_sink(writer);
  if (profile == MetricsProfile::kFull) {
    VisitStoreFamilies(store, ports, now_ns, &writer_sink);
  } else {
    ProfiledSink<WriterSink> sink(profile, &writer_sink);
    VisitStoreFamilies(store, ports, now_ns, &sink);
  }
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
  e->store_ = store;
  e->ports_ = ports;
  e->profile_ = profile;
  e->metrics_collectable_ = metrics->registry();
  if (profile != MetricsProfile::kFull) {
    e->metrics_collectable_ =
        std::make_shared<ProfiledCollectable>(e->metrics_collectable_, profile);
  }
  const PrometheusExporter* self = e.get();
  HttpServerOptions limits;
  limits.on_request_deadline = [c = &metrics->Counter(kHttpDeadlineClosed).Add({})] {
    c->Increment();
  };
  auto server = HttpServer::Start(
      listen, [self](const HttpRequest& req) { return self->Serve(req); },
      e->tls_.has_value() ? &*e->tls_ : nullptr, std::move(limits));
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
  // The body: the self-metrics, then the store's families straight from its
  // snapshot (not rendered at all for a 406).
  auto write_body = [this](ExpositionFormat format, std::string* body) {
    std::vector<SeriesExemplar> exemplars;
    if (format == ExpositionFormat::kOpenMetrics) {
      std::shared_ptr<const ExemplarFn> fn;
      {
        std::lock_guard lock(exemplars_mu_);
        fn = exemplars_;
      }
      if (fn != nullptr) exemplars = (*fn)();
    }
    ExpositionWriter writer(format, exemplars, body);
    writer.WriteFamilies(metrics_collectable_->Collect());
    WriteStoreFamilies(*store_, ports_, NowNs(), profile_, &writer);
    writer.Finish();
  };
  ScrapeOutput out = RenderScrape(accept, req.Header("accept-encoding"), write_body);
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
