#include "daemon/detect/detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fabricscope {
namespace {

// Shared by all detectors (their own metrics live with them).
const MetricSpec& kDetectorEvents =
    DefineMetric({.name = "fabricscope_detector_events_total",
                  .type = MetricType::kCounter,
                  .help = "Detector episodes started, by detector and kind.",
                  .labels = {"detector", "kind"},
                  .component = "detect"});

}  // namespace

// --- DetectorContext: event reporting, gauges, the port inventory -------------------

DetectorContext::DetectorContext(const DetectorOptions& options, const PortInventory* ports,
                                 EventLog* events, MetricsRegistry* metrics)
    : options_(options), ports_(ports), events_(events), metrics_(metrics) {}

void DetectorContext::DeclareKinds(absl::string_view detector,
                                   const std::vector<std::string>& kinds) {
  if (metrics_ == nullptr) return;
  for (const std::string& kind : kinds) {
    metrics_->Counter(kDetectorEvents).Add({{"detector", std::string(detector)}, {"kind", kind}});
  }
}

void DetectorContext::Learn(const SeriesKey& key) {
  if (key.device.empty() || key.netdev.empty()) return;
  if (by_netdev_.contains(key.netdev)) return;
  ++generation_;
  PortRef ref{key.device, key.port, key.netdev, 0};
  by_netdev_[key.netdev] = ref;
  by_device_[absl::StrCat(key.device, "/", key.port)] = ref;
}

PortRef DetectorContext::Resolve(const SeriesKey& key, int64_t now_ns) {
  bool stable = false;
  return ResolveImpl(key, now_ns, &stable);
}

const PortRef& DetectorContext::ResolveSeries(SeriesId id, const SeriesKey& key, int64_t now_ns) {
  ResolvedSeries* cached = resolved_.Get(id);
  if (cached != nullptr && cached->generation == generation_) return cached->ref;
  bool stable = false;
  PortRef ref = ResolveImpl(key, now_ns, &stable);
  if (cached == nullptr) {
    scratch_ = std::move(ref);
    return scratch_;
  }
  // ResolveImpl may have refreshed from the inventory: the generation read
  // after it is the one the result belongs to.
  cached->generation = stable ? generation_ : 0;
  cached->ref = std::move(ref);
  return cached->ref;
}

PortRef DetectorContext::ResolveImpl(const SeriesKey& key, int64_t now_ns, bool* stable) {
  PortRef ref{key.device, key.port, key.netdev, 0};
  const PortRef* known = nullptr;
  *stable = true;  // no lookup: the key says all that is known
  if (!key.device.empty()) {
    known = Find(by_device_, absl::StrCat(key.device, "/", key.port), now_ns, stable);
  } else if (!key.netdev.empty()) {
    known = Find(by_netdev_, key.netdev, now_ns, stable);
  }
  if (known != nullptr) {
    if (ref.device.empty()) {
      ref.device = known->device;
      ref.port = known->port;
    }
    if (ref.netdev.empty()) ref.netdev = known->netdev;
    ref.link_bps = known->link_bps;
  }
  return ref;
}

void DetectorContext::SetActive(const MetricSpec& spec,
                                const std::map<std::string, std::string>& labels, bool active) {
  if (metrics_ == nullptr) return;
  std::string key = spec.name;
  for (const auto& [k, v] : labels) absl::StrAppend(&key, "|", k, "=", v);
  int& count = active_[key];
  count = std::max(0, count + (active ? 1 : -1));
  metrics_->Gauge(spec).Add(labels).Set(count > 0 ? 1 : 0);
}

void DetectorContext::DeclareGauge(const MetricSpec& spec,
                                   const std::map<std::string, std::string>& labels) {
  if (metrics_ != nullptr) metrics_->Gauge(spec).Add(labels);
}

uint64_t DetectorContext::OpenEvent(DetectorEvent e) {
  if (metrics_ != nullptr) {
    metrics_->Counter(kDetectorEvents)
        .Add({{"detector", e.detector}, {"kind", e.kind}})
        .Increment();
  }
  return events_->Open(std::move(e));
}

const PortRef* DetectorContext::Find(absl::flat_hash_map<std::string, PortRef>& map,
                                     const std::string& key, int64_t now_ns, bool* stable) {
  auto it = map.find(key);
  *stable = it != map.end() && it->second.link_bps > 0;
  if (*stable) return &it->second;
  // Unknown or without a link rate: consult the port inventory, at most
  // once a second.
  if (ports_ != nullptr && now_ns - last_refresh_ns_ >= 1'000'000'000) {
    last_refresh_ns_ = now_ns;
    ++generation_;
    for (const PortInfo& p : ports_->List()) {
      if (p.device.empty()) continue;
      PortRef ref{p.device, p.port, p.netdev, ParseLinkRateBps(p.rate)};
      by_device_[absl::StrCat(p.device, "/", p.port)] = ref;
      if (!p.netdev.empty()) by_netdev_[p.netdev] = ref;
    }
    it = map.find(key);
  }
  return it == map.end() ? nullptr : &it->second;
}

// --- Episode --------------------------------------------------------------------------

bool Episode::Stale(int64_t now_ns) const {
  if (!deb.active() || fed_interval_ns <= 0) return false;
  const int64_t after = std::max(kStaleFloorNs, kStalePolls * fed_interval_ns);
  // Either way round: a realtime step backwards leaves last_fed_ns ahead.
  const int64_t gap = now_ns >= last_fed_ns ? now_ns - last_fed_ns : last_fed_ns - now_ns;
  return gap > after;
}

void Episode::Report(DetectorContext* ctx, int64_t now_ns, const std::string& summary) {
  if (!deb.active() || event_id != 0) return;
  DetectorEvent e = tmpl;
  e.start_unix_nano = deb.episode_start_ns();
  e.detected_unix_nano = now_ns;
  e.peak = run_peak;
  summary_text = summary;
  e.summary = summary;
  event_id = ctx->OpenEvent(std::move(e));
}

void Episode::Expire(DetectorContext* ctx) {
  if (event_id != 0)
    ctx->events()->Close(event_id, last_fed_ns, run_peak,
                         absl::StrCat(summary_text,
                                      "; ended when its counters stopped reporting (device "
                                      "removed, counters unreadable or collector stopped)"));
  if (gauge != nullptr) ctx->SetActive(*gauge, gauge_labels, false);
  deb.Reset();
  run_peak = 0;
  event_id = 0;
}

Debouncer::Transition Episode::Feed(DetectorContext* ctx, int64_t start_ns, int64_t end_ns,
                                    bool cond, double measure,
                                    const std::function<std::string(const Episode&)>& summary) {
  if (cond) {
    run_peak = std::max(run_peak, measure);
  } else if (!deb.active()) {
    run_peak = 0;
  }
  // Several inputs may judge one episode at one instant: only a later
  // instant tells the interval.
  if (last_fed_ns == INT64_MIN || end_ns > last_fed_ns) {
    fed_interval_ns =
        std::max<int64_t>(end_ns - start_ns, last_fed_ns == INT64_MIN ? 0 : end_ns - last_fed_ns);
  }
  last_fed_ns = end_ns;
  const Debouncer::Transition t = deb.Update(start_ns, end_ns, cond);
  if (t == Debouncer::Transition::kStarted) {
    event_id = 0;
    if (report) {
      DetectorEvent e = tmpl;
      e.start_unix_nano = deb.episode_start_ns();
      e.detected_unix_nano = end_ns;
      e.peak = run_peak;
      summary_text = summary(*this);
      e.summary = summary_text;
      event_id = ctx->OpenEvent(std::move(e));
    }
    if (gauge != nullptr) ctx->SetActive(*gauge, gauge_labels, true);
  } else if (t == Debouncer::Transition::kEnded) {
    if (event_id != 0)
      ctx->events()->Close(event_id, deb.episode_end_ns(), run_peak, summary(*this));
    event_id = 0;
    if (gauge != nullptr) ctx->SetActive(*gauge, gauge_labels, false);
    run_peak = 0;
  } else if (deb.active() && cond && event_id != 0) {
    // Cheap: only the peak and summary of an open event change.
    summary_text = summary(*this);
    ctx->events()->Update(event_id, run_peak, summary_text, end_ns);
  }
  return t;
}

// --- Detector -------------------------------------------------------------------------

size_t Detector::Active() {
  size_t n = 0;
  ForEachEpisode([&n](Episode& ep) { n += ep.deb.active() ? 1 : 0; });
  return n;
}

std::string SignalText(const Signal& signal) {
  std::string out = signal.name;
  for (absl::string_view label : {"counter", "reason", "direction"}) {
    const absl::string_view v = signal.Label(label);
    if (!v.empty()) absl::StrAppend(&out, " ", v);
  }
  const absl::string_view prio = signal.Label("priority");
  if (!prio.empty()) absl::StrAppend(&out, prio == "global" ? " " : " prio ", prio);
  if (signal.estimated) absl::StrAppend(&out, " (estimated)");
  return out;
}

DetectorEvent Detector::MakeEvent(std::string kind, std::string device, uint32_t port,
                                  std::string netdev, std::string priority, std::string direction,
                                  int merge_rank, std::string signal) const {
  DetectorEvent e;
  e.merge_rank = merge_rank;
  if (!signal.empty()) e.signals.push_back(std::move(signal));
  e.detector = name_;
  e.kind = std::move(kind);
  e.device = std::move(device);
  e.port = port;
  e.netdev = std::move(netdev);
  e.priority = std::move(priority);
  e.direction = std::move(direction);
  return e;
}

std::string Detector::PortLabel(uint32_t port) { return port == 0 ? "" : absl::StrCat(port); }

}  // namespace fabricscope
