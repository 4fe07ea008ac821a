#include "daemon/detect/detectors.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/signals.h"
#include "daemon/detect/episode.h"

namespace fabricscope {
namespace {

const MetricSpec& kPfcStormActive = DefineMetric(
    {.name = "fabricscope_pfc_storm_active",
     .type = MetricType::kGauge,
     .help =
         "1 while a PFC storm is detected on the priority and direction (pause fraction >= "
         "--pfc-storm-fraction for --pfc-storm-detection-time; priority \"\" with direction tx: "
         "the NIC's own pause-storm events), else 0.",
     .labels = {"netdev", "priority", "direction"},
     .component = "detect"});
const MetricSpec& kPfcStorms =
    DefineMetric({.name = "fabricscope_pfc_storms_total",
                  .type = MetricType::kCounter,
                  .help = "PFC storms detected (episodes started), by priority and direction.",
                  .labels = {"netdev", "priority", "direction"},
                  .component = "detect"});
const MetricSpec& kEcnMistuningActive = DefineMetric(
    {.name = "fabricscope_ecn_mistuning_active",
     .type = MetricType::kGauge,
     .help = "1 while ECN mistuning of the kind is detected on the RDMA port: marking_too_late, "
             "too_aggressive, cnp_ignored, ecn_disabled_on_pfc_priority.",
     .labels = {"device", "port", "kind"},
     .component = "detect"});
const MetricSpec& kMicroburstActive = DefineMetric(
    {.name = "fabricscope_microburst_active",
     .type = MetricType::kGauge,
     .help = "1 during a microburst episode of the signal (poll intervals judged microbursts no "
             "further apart than --microburst-gap).",
     .labels = {"signal", "device", "port", "netdev", "priority", "direction"},
     .component = "detect"});
const MetricSpec& kRetransmitSpikeActive = DefineMetric(
    {.name = "fabricscope_retransmit_spike_active",
     .type = MetricType::kGauge,
     .help = "1 while the retransmission counter spikes on the port (rate over "
             "--retransmit-window >= --retransmit-floor and >= --retransmit-factor x baseline).",
     .labels = {"device", "port", "kind"},
     .component = "detect"});
const MetricSpec& kLinkDegradedActive =
    DefineMetric({.name = "fabricscope_link_degraded_active",
                  .type = MetricType::kGauge,
                  .help = "1 while the link shows degradation of the kind: fec_corrected_rising, "
                          "fec_uncorrectable, symbol_errors, link_downed, link_error_recovery.",
                  .labels = {"device", "port", "netdev", "kind"},
                  .component = "detect"});
const MetricSpec& kDetectorEvents =
    DefineMetric({.name = "fabricscope_detector_events_total",
                  .type = MetricType::kCounter,
                  .help = "Detector episodes started, by detector and kind.",
                  .labels = {"detector", "kind"},
                  .component = "detect"});

struct KnownKind {
  const char* detector;
  const char* kind;
};
constexpr KnownKind kKnownKinds[] = {
    {"pfc_storm", "storm"},
    {"pfc_storm", "nic_pause_storm"},
    {"ecn_mistuning", "marking_too_late"},
    {"ecn_mistuning", "too_aggressive"},
    {"ecn_mistuning", "cnp_ignored"},
    {"ecn_mistuning", "ecn_disabled_on_pfc_priority"},
    {"microburst", "burst"},
    {"retransmit_spike", "out_of_sequence"},
    {"retransmit_spike", "packet_seq_err"},
    {"retransmit_spike", "local_ack_timeout_err"},
    {"link_degradation", "fec_corrected_rising"},
    {"link_degradation", "fec_uncorrectable"},
    {"link_degradation", "symbol_errors"},
    {"link_degradation", "link_downed"},
    {"link_degradation", "link_error_recovery"},
};

DetectorEvent MakeEvent(std::string detector, std::string kind, std::string device, uint32_t port,
                        std::string netdev, std::string priority, std::string direction) {
  DetectorEvent e;
  e.detector = std::move(detector);
  e.kind = std::move(kind);
  e.device = std::move(device);
  e.port = port;
  e.netdev = std::move(netdev);
  e.priority = std::move(priority);
  e.direction = std::move(direction);
  return e;
}

int64_t Ns(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }
std::string PortLabel(uint32_t port) { return port == 0 ? "" : absl::StrCat(port); }
double Seconds(const AppendEvent& ev) {
  return static_cast<double>(ev.end_ns - ev.start_ns) * 1e-9;
}

// "100 Gb/sec (4X EDR)" -> 1e11 bits per second; 0 when it does not parse.
double ParseLinkRate(absl::string_view rate) {
  size_t i = 0;
  while (i < rate.size() && (std::isdigit(static_cast<unsigned char>(rate[i])) || rate[i] == '.')) {
    ++i;
  }
  double gbps = 0;
  if (i == 0 || !absl::SimpleAtod(rate.substr(0, i), &gbps)) return 0;
  return gbps * 1e9;
}

}  // namespace

// --- Context: event reporting, gauges, the port inventory ---------------------------

struct PortRef {
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  double link_bps = 0;
};

class DetectorEngine::Context {
 public:
  Context(const DetectorOptions& options, const Store* store, EventLog* events,
          MetricsRegistry* metrics)
      : options_(options), store_(store), events_(events), metrics_(metrics) {
    if (metrics_ != nullptr) {
      for (const KnownKind& k : kKnownKinds) {
        if (!options.Enabled(k.detector)) continue;
        metrics_->Counter(kDetectorEvents).Add({{"detector", k.detector}, {"kind", k.kind}});
      }
      metrics_->Gauge(kPfcStormActive);
      metrics_->Counter(kPfcStorms);
      metrics_->Gauge(kEcnMistuningActive);
      metrics_->Gauge(kMicroburstActive);
      metrics_->Gauge(kRetransmitSpikeActive);
      metrics_->Gauge(kLinkDegradedActive);
    }
  }

  const DetectorOptions& options() const { return options_; }

  // Learns the device/port <-> netdev pairing from series that carry both.
  void Learn(const SeriesKey& key) {
    if (key.device.empty() || key.netdev.empty()) return;
    if (by_netdev_.contains(key.netdev)) return;
    PortRef ref{key.device, key.port, key.netdev, 0};
    by_netdev_[key.netdev] = ref;
    by_device_[absl::StrCat(key.device, "/", key.port)] = ref;
  }

  // The port a series belongs to, as completely as known.
  PortRef Resolve(const SeriesKey& key, int64_t now_ns) {
    PortRef ref{key.device, key.port, key.netdev, 0};
    const PortRef* known = nullptr;
    if (!key.device.empty()) {
      known = Find(by_device_, absl::StrCat(key.device, "/", key.port), now_ns);
    } else if (!key.netdev.empty()) {
      known = Find(by_netdev_, key.netdev, now_ns);
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

  // Sets a state gauge; several holders of one label set are reference
  // counted (the gauge is 1 while any of them is active).
  void SetActive(const MetricSpec& spec, const std::map<std::string, std::string>& labels,
                 bool active) {
    if (metrics_ == nullptr) return;
    std::string key = spec.name;
    for (const auto& [k, v] : labels) absl::StrAppend(&key, "|", k, "=", v);
    int& count = active_[key];
    count = std::max(0, count + (active ? 1 : -1));
    metrics_->Gauge(spec).Add(labels).Set(count > 0 ? 1 : 0);
  }
  // Makes the gauge series exist (0) before the first episode.
  void DeclareGauge(const MetricSpec& spec, const std::map<std::string, std::string>& labels) {
    if (metrics_ != nullptr) metrics_->Gauge(spec).Add(labels);
  }

  uint64_t OpenEvent(DetectorEvent e) {
    if (metrics_ != nullptr) {
      metrics_->Counter(kDetectorEvents)
          .Add({{"detector", e.detector}, {"kind", e.kind}})
          .Increment();
      if (e.detector == "pfc_storm") {
        metrics_->Counter(kPfcStorms)
            .Add({{"netdev", e.netdev}, {"priority", e.priority}, {"direction", e.direction}})
            .Increment();
      }
    }
    return events_->Open(std::move(e));
  }
  EventLog* events() { return events_; }

 private:
  const PortRef* Find(absl::flat_hash_map<std::string, PortRef>& map, const std::string& key,
                      int64_t now_ns) {
    auto it = map.find(key);
    if (it != map.end() && it->second.link_bps > 0) return &it->second;
    // Unknown or without a link rate: consult the store's inventory, at most
    // once a second.
    if (store_ != nullptr && now_ns - last_refresh_ns_ >= 1'000'000'000) {
      last_refresh_ns_ = now_ns;
      for (const PortInfo& p : store_->Ports()) {
        if (p.device.empty()) continue;
        PortRef ref{p.device, p.port, p.netdev, ParseLinkRate(p.rate)};
        by_device_[absl::StrCat(p.device, "/", p.port)] = ref;
        if (!p.netdev.empty()) by_netdev_[p.netdev] = ref;
      }
      it = map.find(key);
    }
    return it == map.end() ? nullptr : &it->second;
  }

  const DetectorOptions& options_;
  const Store* const store_;
  EventLog* const events_;
  MetricsRegistry* const metrics_;
  absl::flat_hash_map<std::string, PortRef> by_netdev_;
  absl::flat_hash_map<std::string, PortRef> by_device_;  // "mlx5_0/1"
  int64_t last_refresh_ns_ = INT64_MIN / 2;
  absl::flat_hash_map<std::string, int> active_;
};

using Context = DetectorEngine::Context;
using Labels = std::map<std::string, std::string>;

// One episode of one detector at one place: its debouncer, its event and gauge.
struct Episode {
  Episode(int64_t on_ns, int64_t off_ns) : deb(on_ns, off_ns) {}
  Debouncer deb;
  uint64_t event_id = 0;
  double run_peak = 0;  // peak of the current run (pending or active)
  DetectorEvent tmpl;   // detector, kind and place of the events
  const MetricSpec* gauge = nullptr;
  Labels gauge_labels;
  std::string summary_text;         // of the open event
  int64_t last_fed_ns = INT64_MIN;  // end of the last interval judged
  int64_t fed_interval_ns = 0;      // how often it is judged; 0: not known yet

  // Raises the judging interval to the input's poll interval where the
  // intervals fed do not show it (a configuration state judged at instants).
  void NoteInterval(int64_t ns) { fed_interval_ns = std::max(fed_interval_ns, ns); }

  // An active episode whose input stopped: no interval judged for
  // max(kStaleFloorNs, kStalePolls x its judging interval) before `now_ns`.
  // Not before the judging interval is known (one instant judged so far).
  static constexpr int64_t kStaleFloorNs = 5'000'000'000;
  static constexpr int64_t kStalePolls = 5;
  bool Stale(int64_t now_ns) const {
    if (!deb.active() || fed_interval_ns <= 0) return false;
    const int64_t after = std::max(kStaleFloorNs, kStalePolls * fed_interval_ns);
    // Either way round: a realtime step backwards leaves last_fed_ns ahead.
    const int64_t gap = now_ns >= last_fed_ns ? now_ns - last_fed_ns : last_fed_ns - now_ns;
    return gap > after;
  }
  // Ends a stale episode at the end of the last interval it judged.
  void Expire(Context* ctx) {
    ctx->events()->Close(event_id, last_fed_ns, run_peak,
                         absl::StrCat(summary_text,
                                      "; ended when its counters stopped reporting (device "
                                      "removed, counters unreadable or collector stopped)"));
    if (gauge != nullptr) ctx->SetActive(*gauge, gauge_labels, false);
    deb.Reset();
    run_peak = 0;
  }

  // Feeds one judged interval; `measure` is the value whose peak is reported.
  // Returns the transition.
  Debouncer::Transition Feed(Context* ctx, int64_t start_ns, int64_t end_ns, bool cond,
                             double measure,
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
      DetectorEvent e = tmpl;
      e.start_unix_nano = deb.episode_start_ns();
      e.detected_unix_nano = end_ns;
      e.peak = run_peak;
      summary_text = summary(*this);
      e.summary = summary_text;
      event_id = ctx->OpenEvent(std::move(e));
      if (gauge != nullptr) ctx->SetActive(*gauge, gauge_labels, true);
    } else if (t == Debouncer::Transition::kEnded) {
      ctx->events()->Close(event_id, deb.episode_end_ns(), run_peak, summary(*this));
      if (gauge != nullptr) ctx->SetActive(*gauge, gauge_labels, false);
      run_peak = 0;
    } else if (deb.active() && cond) {
      // Cheap: only the peak and summary of an open event change.
      summary_text = summary(*this);
      ctx->events()->Update(event_id, run_peak, summary_text);
    }
    return t;
  }
};

class Detector {
 public:
  explicit Detector(Context* ctx) : ctx_(ctx) {}
  virtual ~Detector() = default;
  virtual absl::string_view name() const = 0;
  virtual std::vector<const MetricSpec*> Families() const = 0;
  // Called with the engine's lock held.
  virtual void Observe(const AppendEvent& ev) = 0;
  // Calls `fn` for every episode this detector holds.
  virtual void ForEachEpisode(const std::function<void(Episode&)>& fn) = 0;
  // Active episodes.
  size_t Active() {
    size_t n = 0;
    ForEachEpisode([&n](Episode& ep) { n += ep.deb.active() ? 1 : 0; });
    return n;
  }

 protected:
  Context* ctx_;
};

namespace {

// --- pfc_storm ------------------------------------------------------------------------

class PfcStormDetector final : public Detector {
 public:
  using Detector::Detector;
  absl::string_view name() const override { return "pfc_storm"; }
  std::vector<const MetricSpec*> Families() const override {
    return {&families::kPfcPauseSeconds, &families::kPauseStormEvents};
  }
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override {
    for (auto& [k, ep] : states_) fn(ep);
  }

  void Observe(const AppendEvent& ev) override {
    const DetectorOptions& o = ctx_->options();
    const bool nic = ev.signal->family == &families::kPauseStormEvents;
    auto it = states_.find(ev.id);
    if (it == states_.end()) {
      const int64_t off = Ns(o.pfc_storm_restoration);
      it = states_.try_emplace(ev.id, nic ? 0 : Ns(o.pfc_storm_detection), off).first;
      Episode& ep = it->second;
      const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
      ep.tmpl = MakeEvent("pfc_storm", nic ? "nic_pause_storm" : "storm", ref.device, ref.port,
                          ev.key->netdev, nic ? "" : std::string(ev.signal->Label("priority")),
                          nic ? "tx" : std::string(ev.signal->Label("direction")));
      ep.gauge = &kPfcStormActive;
      ep.gauge_labels = {{"netdev", ep.tmpl.netdev},
                         {"priority", ep.tmpl.priority},
                         {"direction", ep.tmpl.direction}};
      ctx_->DeclareGauge(kPfcStormActive, ep.gauge_labels);
    }
    if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
    Episode& ep = it->second;
    if (nic) {
      ep.Feed(ctx_, ev.start_ns, ev.end_ns, ev.delta > 0, ev.rate, [](const Episode& e) {
        return absl::StrFormat(
            "%s: the NIC reports pause-storm events (its storm prevention is acting)",
            e.tmpl.netdev);
      });
      return;
    }
    const double fraction = std::min(1.0, ev.delta / Seconds(ev));
    ep.Feed(ctx_, ev.start_ns, ev.end_ns, fraction >= o.pfc_storm_fraction, fraction,
            [](const Episode& e) {
              return absl::StrFormat("%s priority %s %s: paused up to %.0f%% of each poll interval",
                                     e.tmpl.netdev, e.tmpl.priority,
                                     e.tmpl.direction == "rx" ? "rx (the peer pauses this port)"
                                                              : "tx (this port pauses the peer)",
                                     e.run_peak * 100);
            });
  }

 private:
  absl::flat_hash_map<SeriesId, Episode> states_;
};

// --- microburst -----------------------------------------------------------------------

class MicroburstDetector final : public Detector {
 public:
  MicroburstDetector(Context* ctx) : Detector(ctx) {
    for (const std::string& s : ctx->options().microburst_signals) {
      const MetricSpec* spec = FindMetric(absl::StrCat("fabricscope_", s, "_total"));
      if (spec != nullptr) families_.push_back(spec);
    }
  }
  absl::string_view name() const override { return "microburst"; }
  std::vector<const MetricSpec*> Families() const override { return families_; }
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override {
    for (auto& [k, ep] : states_) fn(ep);
  }

  void Observe(const AppendEvent& ev) override {
    if (!ev.rate_valid) return;
    auto it = states_.find(ev.id);
    if (it == states_.end()) {
      if (!ev.microburst) return;  // state only for series that burst
      it = states_.try_emplace(ev.id, 0, Ns(ctx_->options().microburst_gap)).first;
      Episode& ep = it->second;
      const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
      ep.tmpl = MakeEvent("microburst", "burst", ref.device, ref.port, ref.netdev,
                          std::string(ev.signal->Label("priority")),
                          std::string(ev.signal->Label("direction")));
      signal_[ev.id] = ev.signal->name;
      ep.gauge = &kMicroburstActive;
      ep.gauge_labels = {{"signal", ev.signal->name},       {"device", ev.key->device},
                         {"port", PortLabel(ev.key->port)}, {"netdev", ev.key->netdev},
                         {"priority", ep.tmpl.priority},    {"direction", ep.tmpl.direction}};
    }
    const std::string& signal = signal_[ev.id];
    it->second.Feed(
        ctx_, ev.start_ns, ev.end_ns, ev.microburst, ev.rate, [&signal](const Episode& e) {
          const std::string where = !e.tmpl.device.empty()
                                        ? absl::StrCat(e.tmpl.device, "/", e.tmpl.port)
                                        : e.tmpl.netdev;
          return absl::StrFormat("%s %s%s%s: burst up to %.3g/s", where, signal,
                                 e.tmpl.direction.empty() ? "" : " ", e.tmpl.direction, e.run_peak);
        });
  }

 private:
  std::vector<const MetricSpec*> families_;
  absl::flat_hash_map<SeriesId, Episode> states_;
  absl::flat_hash_map<SeriesId, std::string> signal_;
};

// A rate over a short window judged against its own baseline (retransmit
// spikes, FEC corrected rate): the baseline is the rate over the long window
// before the short one, and it stops learning while an episode is active.
class RisingRate {
 public:
  RisingRate(int64_t window_ns, int64_t baseline_ns)
      : window_ns_(window_ns), baseline_ns_(baseline_ns), short_(window_ns), long_(baseline_ns) {}

  // Adds an interval and returns {short rate, baseline rate}. Until the
  // baseline has at least one short window of history of its own, the
  // baseline is +inf (nothing can rise against an unknown baseline).
  std::pair<double, double> Add(const AppendEvent& ev, bool learning) {
    if (first_ns_ == INT64_MIN) first_ns_ = ev.start_ns;
    const int64_t dt = ev.end_ns - ev.start_ns;
    short_.Add(ev.end_ns, dt, ev.delta);
    if (learning) long_.Add(ev.end_ns, dt, ev.delta);
    const double elapsed = static_cast<double>(ev.end_ns - first_ns_) * 1e-9;
    const double short_s = std::min(elapsed, static_cast<double>(window_ns_) * 1e-9);
    const double long_s = std::min(elapsed, static_cast<double>(baseline_ns_) * 1e-9);
    double sv = 0, ss = 0, lv = 0, ls = 0;
    short_.Sum(ev.end_ns, &sv, &ss);
    long_.Sum(ev.end_ns, &lv, &ls);
    const double rate = short_s > 0 ? sv / short_s : 0;
    if (learning) {
      baseline_ = long_s >= 2 * short_s && long_s > 0 ? std::max(0.0, lv - sv) / (long_s - short_s)
                                                      : std::numeric_limits<double>::infinity();
    }
    return {rate, baseline_};
  }

 private:
  int64_t window_ns_, baseline_ns_;
  WindowSum short_, long_;
  int64_t first_ns_ = INT64_MIN;
  double baseline_ = 0;
};

// --- retransmit_spike -----------------------------------------------------------------

class RetransmitDetector final : public Detector {
 public:
  using Detector::Detector;
  absl::string_view name() const override { return "retransmit_spike"; }
  std::vector<const MetricSpec*> Families() const override { return {&families::kRdmaErrors}; }
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override {
    for (auto& [k, s] : states_) fn(s.ep);
  }

  void Observe(const AppendEvent& ev) override {
    const absl::string_view counter = ev.signal->Label("counter");
    if (counter != "out_of_sequence" && counter != "packet_seq_err" &&
        counter != "local_ack_timeout_err") {
      return;
    }
    const DetectorOptions& o = ctx_->options();
    auto it = states_.find(ev.id);
    if (it == states_.end()) {
      it = states_
               .try_emplace(ev.id, Ns(o.retransmit_window), Ns(o.retransmit_baseline),
                            Ns(o.retransmit_restoration))
               .first;
      State& st = it->second;
      const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
      st.ep.tmpl = MakeEvent("retransmit_spike", std::string(counter), ev.key->device, ev.key->port,
                             ref.netdev, "", "");
      st.ep.gauge = &kRetransmitSpikeActive;
      st.ep.gauge_labels = {
          {"device", ev.key->device}, {"port", PortLabel(ev.key->port)}, {"kind", st.ep.tmpl.kind}};
      ctx_->DeclareGauge(kRetransmitSpikeActive, st.ep.gauge_labels);
    }
    if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
    State& st = it->second;
    const auto [rate, baseline] = st.rate.Add(ev, !st.ep.deb.active());
    const bool cond = rate >= o.retransmit_floor && rate >= o.retransmit_factor * baseline;
    st.ep.Feed(ctx_, ev.start_ns, ev.end_ns, cond, rate, [baseline = baseline](const Episode& e) {
      return absl::StrFormat("%s/%u: %s at up to %.0f/s (baseline %.1f/s)", e.tmpl.device,
                             e.tmpl.port, e.tmpl.kind, e.run_peak, baseline);
    });
  }

 private:
  struct State {
    State(int64_t window, int64_t baseline, int64_t off) : ep(0, off), rate(window, baseline) {}
    Episode ep;
    RisingRate rate;
  };
  absl::flat_hash_map<SeriesId, State> states_;
};

// --- link_degradation -----------------------------------------------------------------

class LinkDetector final : public Detector {
 public:
  using Detector::Detector;
  absl::string_view name() const override { return "link_degradation"; }
  std::vector<const MetricSpec*> Families() const override {
    return {&families::kFecCorrectedBlocks,     &families::kPhyCorrectedBits,
            &families::kFecUncorrectableBlocks, &families::kPhySymbolErrors,
            &families::kLinkDownEvents,         &families::kIbPortErrors};
  }
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override {
    for (auto& [k, s] : states_) fn(s.ep);
  }

  void Observe(const AppendEvent& ev) override {
    const MetricSpec* f = ev.signal->family;
    const bool corrected = f == &families::kFecCorrectedBlocks || f == &families::kPhyCorrectedBits;
    absl::string_view kind;
    if (corrected) {
      kind = "fec_corrected_rising";
    } else if (f == &families::kFecUncorrectableBlocks) {
      kind = "fec_uncorrectable";
    } else if (f == &families::kPhySymbolErrors) {
      kind = "symbol_errors";
    } else if (f == &families::kLinkDownEvents) {
      kind = "link_downed";
    } else {  // IB PMA port errors
      const absl::string_view c = ev.signal->Label("counter");
      if (c == "symbol_error") {
        kind = "symbol_errors";
      } else if (c == "link_downed") {
        kind = "link_downed";
      } else if (c == "link_error_recovery") {
        kind = "link_error_recovery";
      } else {
        return;
      }
    }
    if (!ev.signal->Label("lane").empty()) return;  // per-lane FEC: the total is enough
    const DetectorOptions& o = ctx_->options();
    // A corrected-rate state per series (each has its own baseline); error
    // increases per port and kind, whichever counter reports them (the
    // ethtool link-down counter and the IB PMA link_downed are one event).
    std::string key;
    PortRef ref;
    if (corrected) {
      key = absl::StrCat("series:", ev.id);
    } else {
      ref = ctx_->Resolve(*ev.key, ev.end_ns);
      key = absl::StrCat(ref.device, "/", ref.port, "|", ref.netdev, "|", kind);
    }
    auto it = states_.find(key);
    if (it == states_.end()) {
      const int64_t on = corrected ? 300'000'000 : 0;
      it = states_.try_emplace(key, on, Ns(o.link_hold), Ns(o.fec_baseline)).first;
      State& st = it->second;
      st.corrected = corrected;
      st.floor = f == &families::kPhyCorrectedBits ? o.fec_bit_floor : o.fec_block_floor;
      if (corrected) ref = ctx_->Resolve(*ev.key, ev.end_ns);
      st.ep.tmpl = MakeEvent("link_degradation", std::string(kind), ref.device, ref.port,
                             ref.netdev, "", "");
      st.ep.gauge = &kLinkDegradedActive;
      st.ep.gauge_labels = {{"device", ref.device},
                            {"port", PortLabel(ref.port)},
                            {"netdev", ref.netdev},
                            {"kind", st.ep.tmpl.kind}};
      ctx_->DeclareGauge(kLinkDegradedActive, st.ep.gauge_labels);
    }
    if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
    State& st = it->second;
    if (st.corrected) {
      const auto [rate, baseline] = st.rate.Add(ev, !st.ep.deb.active());
      const bool cond = rate >= st.floor && rate >= o.fec_corrected_factor * baseline;
      st.ep.Feed(ctx_, ev.start_ns, ev.end_ns, cond, rate, [baseline = baseline](const Episode& e) {
        return absl::StrFormat("%s: FEC corrected rate up to %.3g/s (baseline %.3g/s)",
                               e.tmpl.netdev.empty() ? e.tmpl.device : e.tmpl.netdev, e.run_peak,
                               baseline);
      });
      return;
    }
    // Several counters feed one state: only a series' own increase or its
    // quiet interval counts, and a quiet interval of one counter does not end
    // what another one reports within the hold time (the debouncer's off time).
    st.total += ev.delta;
    st.ep.Feed(ctx_, ev.start_ns, ev.end_ns, ev.delta > 0, st.total, [](const Episode& e) {
      return absl::StrFormat(
          "%s%s%s: %s (%.0f since the daemon started watching)",
          e.tmpl.device.empty() ? "" : absl::StrCat(e.tmpl.device, "/", e.tmpl.port),
          e.tmpl.device.empty() || e.tmpl.netdev.empty() ? "" : " ", e.tmpl.netdev, e.tmpl.kind,
          e.run_peak);
    });
  }

 private:
  struct State {
    State(int64_t on, int64_t off, int64_t baseline) : ep(on, off), rate(1'000'000'000, baseline) {}
    Episode ep;
    RisingRate rate;
    bool corrected = false;
    double floor = 0;
    double total = 0;
  };
  absl::flat_hash_map<std::string, State> states_;
};

// --- ecn_mistuning --------------------------------------------------------------------

class EcnDetector final : public Detector {
 public:
  using Detector::Detector;
  absl::string_view name() const override { return "ecn_mistuning"; }
  std::vector<const MetricSpec*> Families() const override {
    return {&families::kDiscards,    &families::kEcnMarked,  &families::kCnpSent,
            &families::kCnpHandled,  &families::kCnpIgnored, &families::kPortBytes,
            &families::kNetdevBytes, &families::kPfcEnabled, &families::kEcnEnabled};
  }
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override {
    for (auto& [k, p] : ports_) {
      fn(p.too_late);
      fn(p.aggressive);
      fn(p.cnp_ignored);
    }
    for (auto& [k, ep] : config_) fn(ep);
  }

  void Observe(const AppendEvent& ev) override {
    const MetricSpec* f = ev.signal->family;
    if (f == &families::kPfcEnabled || f == &families::kEcnEnabled) {
      ObserveConfig(ev);
      return;
    }
    if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
    const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
    if (ref.device.empty()) return;  // a netdev that is not an RDMA port
    PortState& p = Port(ref);
    const int64_t dt = ev.end_ns - ev.start_ns;
    if (p.first_ns == INT64_MIN) p.first_ns = ev.start_ns;
    if (f == &families::kDiscards) {
      p.drops.Add(ev.end_ns, dt, ev.delta);
    } else if (f == &families::kEcnMarked || f == &families::kCnpSent) {
      p.marks.Add(ev.end_ns, dt, ev.delta);
      if (f == &families::kCnpSent) p.cnps.Add(ev.end_ns, dt, ev.delta);
    } else if (f == &families::kCnpHandled) {
      p.cnps.Add(ev.end_ns, dt, ev.delta);
    } else if (f == &families::kCnpIgnored) {
      p.ignored.Add(ev.end_ns, dt, ev.delta);
    } else {  // bytes: utilization is the busiest direction of either source
      const bool rx = ev.signal->Label("direction") == "rx";
      const bool port_src = f == &families::kPortBytes;
      (port_src ? (rx ? p.port_rx : p.port_tx) : (rx ? p.net_rx : p.net_tx))
          .Add(ev.end_ns, dt, ev.delta);
    }
    if (ev.end_ns < p.next_eval_ns) return;
    const int64_t from = p.last_eval_ns == INT64_MIN ? ev.start_ns : p.last_eval_ns;
    p.last_eval_ns = ev.end_ns;
    p.next_eval_ns = ev.end_ns + 100'000'000;
    Evaluate(&p, ref, from, ev.end_ns);
  }

 private:
  struct Sums {
    explicit Sums(int64_t w)
        : drops(w), marks(w), cnps(w), ignored(w), port_rx(w), port_tx(w), net_rx(w), net_tx(w) {}
    WindowSum drops, marks, cnps, ignored, port_rx, port_tx, net_rx, net_tx;
  };
  struct PortState : Sums {
    PortState(int64_t w, int64_t on, int64_t off)
        : Sums(w), too_late(on, off), aggressive(on, off), cnp_ignored(0, off) {}
    Episode too_late, aggressive, cnp_ignored;
    int64_t first_ns = INT64_MIN;
    int64_t last_eval_ns = INT64_MIN;
    int64_t next_eval_ns = INT64_MIN;
    double link_bps = 0;
  };

  PortState& Port(const PortRef& ref) {
    const std::string key = absl::StrCat(ref.device, "/", ref.port);
    auto it = ports_.find(key);
    if (it == ports_.end()) {
      const DetectorOptions& o = ctx_->options();
      it = ports_.try_emplace(key, Ns(o.ecn_window), Ns(o.ecn_detection), Ns(o.ecn_restoration))
               .first;
      PortState& p = it->second;
      Init(&p.too_late, ref, "marking_too_late");
      Init(&p.aggressive, ref, "too_aggressive");
      Init(&p.cnp_ignored, ref, "cnp_ignored");
    }
    if (ref.link_bps > 0) it->second.link_bps = ref.link_bps;
    return it->second;
  }

  void Init(Episode* ep, const PortRef& ref, absl::string_view kind) {
    ep->tmpl =
        MakeEvent("ecn_mistuning", std::string(kind), ref.device, ref.port, ref.netdev, "", "");
    ep->gauge = &kEcnMistuningActive;
    ep->gauge_labels = {
        {"device", ref.device}, {"port", PortLabel(ref.port)}, {"kind", std::string(kind)}};
    ctx_->DeclareGauge(kEcnMistuningActive, ep->gauge_labels);
  }

  void Evaluate(PortState* p, const PortRef& ref, int64_t from, int64_t now) {
    const DetectorOptions& o = ctx_->options();
    const double elapsed = std::clamp(static_cast<double>(now - p->first_ns) * 1e-9, 0.1,
                                      absl::ToDoubleSeconds(o.ecn_window));
    auto rate = [&](const WindowSum& w) {
      double v = 0, s = 0;
      w.Sum(now, &v, &s);
      return v / elapsed;
    };
    const double drops = rate(p->drops);
    const double marks = rate(p->marks);
    const double cnps = rate(p->cnps);
    const double ignored = rate(p->ignored);
    const double bytes =
        std::max({rate(p->port_rx), rate(p->port_tx), rate(p->net_rx), rate(p->net_tx)});
    const double link = p->link_bps > 0 ? p->link_bps : o.default_link_gbps * 1e9;
    const double util = bytes * 8 / link;
    const std::string where = absl::StrCat(ref.device, "/", ref.port);
    p->too_late.Feed(ctx_, from, now, drops >= o.ecn_drop_floor && marks < o.ecn_mark_ratio * drops,
                     drops, [&](const Episode& e) {
                       return absl::StrFormat(
                           "%s: discards at up to %.0f/s while ECN marks + CNPs stay at %.0f/s: "
                           "ECN marks too late (Kmin/Kmax above the buffer?)",
                           where, e.run_peak, marks);
                     });
    p->aggressive.Feed(ctx_, from, now,
                       cnps >= o.ecn_cnp_floor && util < o.ecn_low_utilization && drops == 0, cnps,
                       [&](const Episode& e) {
                         return absl::StrFormat(
                             "%s: CNPs at up to %.0f/s at %.0f%% utilization without drops: ECN "
                             "marks too aggressively (Kmin too low / Pmax too high?)",
                             where, e.run_peak, util * 100);
                       });
    p->cnp_ignored.Feed(ctx_, from, now, ignored > 0, ignored, [&](const Episode& e) {
      return absl::StrFormat(
          "%s: CNPs ignored at up to %.1f/s (congestion control not enabled for the QPs?)", where,
          e.run_peak);
    });
  }

  // PFC enabled on a priority whose ECN is disabled for either role.
  void ObserveConfig(const AppendEvent& ev) {
    const std::string priority(ev.signal->Label("priority"));
    const std::string key = absl::StrCat(ev.key->netdev, "|", priority);
    PrioConfig& c = prio_[key];
    const int v = ev.value != 0 ? 1 : 0;
    if (ev.signal->family == &families::kPfcEnabled) {
      c.pfc = v;
    } else if (ev.signal->Label("role") == "np") {
      c.ecn_np = v;
    } else {
      c.ecn_rp = v;
    }
    if (c.pfc < 0 || (c.ecn_np < 0 && c.ecn_rp < 0)) return;  // not known yet
    const bool cond = c.pfc == 1 && (c.ecn_np == 0 || c.ecn_rp == 0);
    auto it = config_.find(key);
    if (it == config_.end()) {
      it = config_.try_emplace(key, 0, 0).first;
      const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
      Init(&it->second, ref, "ecn_disabled_on_pfc_priority");
      it->second.tmpl.netdev = ev.key->netdev;
      it->second.tmpl.priority = priority;
    }
    it->second.NoteInterval(ev.end_ns - ev.start_ns);
    it->second.Feed(ctx_, ev.end_ns, ev.end_ns, cond, 1, [&c](const Episode& e) {
      return absl::StrFormat("%s priority %s: PFC is enabled but ECN is disabled (np %s, rp %s)",
                             e.tmpl.netdev, e.tmpl.priority,
                             c.ecn_np < 0 ? "?" : (c.ecn_np ? "on" : "off"),
                             c.ecn_rp < 0 ? "?" : (c.ecn_rp ? "on" : "off"));
    });
  }

  struct PrioConfig {
    int pfc = -1, ecn_np = -1, ecn_rp = -1;
  };
  absl::flat_hash_map<std::string, PortState> ports_;
  absl::flat_hash_map<std::string, PrioConfig> prio_;
  absl::flat_hash_map<std::string, Episode> config_;
};

}  // namespace

// --- options and engine ---------------------------------------------------------------

bool DetectorOptions::Enabled(absl::string_view detector) const {
  return std::find(enabled.begin(), enabled.end(), detector) != enabled.end();
}

absl::Status DetectorOptions::Validate() const {
  for (const std::string& d : enabled) {
    if (std::find(std::begin(kDetectorNames), std::end(kDetectorNames), d) ==
        std::end(kDetectorNames)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "detectors: unknown detector '", d, "'; one of ", absl::StrJoin(kDetectorNames, ", ")));
    }
  }
  for (const std::string& s : microburst_signals) {
    if (FindMetric(absl::StrCat("fabricscope_", s, "_total")) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("microburst-signals: unknown signal '", s, "' (a counter family without ",
                       "the fabricscope_ prefix and _total suffix, e.g. port_bytes)"));
    }
  }
  if (!(pfc_storm_fraction > 0 && pfc_storm_fraction <= 1)) {
    return absl::InvalidArgumentError("pfc-storm-fraction: must be in (0, 1]");
  }
  if (!(ecn_mark_ratio >= 0) || !(ecn_drop_floor > 0) || !(ecn_cnp_floor > 0) ||
      !(ecn_low_utilization > 0 && ecn_low_utilization <= 1)) {
    return absl::InvalidArgumentError(
        "ecn thresholds: floors must be > 0, ecn-mark-ratio >= 0, ecn-low-utilization in (0, 1]");
  }
  if (!(retransmit_floor > 0) || !(retransmit_factor >= 1) || !(fec_corrected_factor >= 1)) {
    return absl::InvalidArgumentError(
        "retransmit-floor must be > 0; retransmit-factor and fec-corrected-factor >= 1");
  }
  if (max_events == 0) return absl::InvalidArgumentError("max-events: must be at least 1");
  return absl::OkStatus();
}

DetectorEngine::DetectorEngine(DetectorOptions options, const Store* store, EventLog* events,
                               MetricsRegistry* metrics)
    : options_(std::move(options)),
      context_(std::make_unique<Context>(options_, store, events, metrics)) {
  Context* ctx = context_.get();
  if (options_.Enabled("pfc_storm")) detectors_.push_back(std::make_unique<PfcStormDetector>(ctx));
  if (options_.Enabled("ecn_mistuning")) detectors_.push_back(std::make_unique<EcnDetector>(ctx));
  if (options_.Enabled("microburst")) {
    detectors_.push_back(std::make_unique<MicroburstDetector>(ctx));
  }
  if (options_.Enabled("retransmit_spike")) {
    detectors_.push_back(std::make_unique<RetransmitDetector>(ctx));
  }
  if (options_.Enabled("link_degradation")) {
    detectors_.push_back(std::make_unique<LinkDetector>(ctx));
  }
  for (auto& d : detectors_) {
    for (const MetricSpec* f : d->Families()) by_family_[f].push_back(d.get());
  }
}

DetectorEngine::~DetectorEngine() = default;

void DetectorEngine::OnAppend(const AppendEvent& ev) {
  if (ev.signal == nullptr || ev.key == nullptr) return;
  auto it = by_family_.find(ev.signal->family);
  if (it == by_family_.end()) return;
  std::lock_guard lock(mu_);
  context_->Learn(*ev.key);
  for (Detector* d : it->second) d->Observe(ev);
  SweepLocked(ev.end_ns);
}

void DetectorEngine::Sweep(int64_t now_ns) {
  std::lock_guard lock(mu_);
  SweepLocked(now_ns);
}

void DetectorEngine::SweepLocked(int64_t now_ns) {
  // At most once a second of sample time (or at once after a step backwards).
  if (now_ns < next_sweep_ns_ && now_ns >= last_sweep_ns_) return;
  last_sweep_ns_ = now_ns;
  next_sweep_ns_ = now_ns + kSweepIntervalNs;
  for (auto& d : detectors_) {
    d->ForEachEpisode([&](Episode& ep) {
      if (ep.Stale(now_ns)) ep.Expire(context_.get());
    });
  }
}

size_t DetectorEngine::ActiveCount(absl::string_view detector) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& d : detectors_) {
    if (detector.empty() || d->name() == detector) n += d->Active();
  }
  return n;
}

}  // namespace fabricscope
