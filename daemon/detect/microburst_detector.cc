#include "daemon/detect/microburst_detector.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/signals.h"

namespace fabricscope {
namespace {

const MetricSpec& kMicroburstActive = DefineMetric(
    {.name = "fabricscope_microburst_active",
     .type = MetricType::kGauge,
     .help = "1 during a microburst episode of the signal (poll intervals judged microbursts no "
             "further apart than --microburst-gap).",
     .labels = {"signal", "device", "port", "netdev", "priority", "direction"},
     .component = "detect"});

const OptionKey<std::vector<std::string>> kSignals{
    "microburst-signals",
    {"port_bytes", "netdev_bytes", "pfc_pause_frames", "ecn_marked_packets", "cnp_sent",
     "discards"}};
const OptionKey<absl::Duration> kGap{"microburst-gap", absl::Milliseconds(200)};

absl::Status CheckSignals(const std::vector<std::string>& signals) {
  for (const std::string& s : signals) {
    if (FindMetric(absl::StrCat("fabricscope_", s, "_total")) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown signal '", s, "' (a counter family without ",
                       "the fabricscope_ prefix and _total suffix, e.g. port_bytes)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

DetectorClass MicroburstDetector::Class() {
  return {
      .description =
          "microbursts: episodes of poll intervals the store judged bursts, per "
          "series of --microburst-signals, one event per port episode; ECN-mark/CNP "
          "bursts only when pause frames or discards show DCQCN did not contain them",
      .kinds = {"burst"},
      .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kMicroburstActive); },
      .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
        return std::make_unique<MicroburstDetector>(std::move(name), ctx);
      },
      .options =
          {
              option::List(kSignals,
                           "Signals whose microbursts (see --burst-factor) the microburst "
                           "detector reports as episodes (counter families without fabricscope_ "
                           "and _total); one port's simultaneous bursts are one event. "
                           "ECN-mark/CNP bursts (ecn_marked_packets, cnp_sent, cnp_handled) are "
                           "DCQCN reacting: events only when the port's pause frames or discards "
                           "rose with them.",
                           CheckSignals),
              option::Duration(kGap,
                               "Microbursts of one series closer than this belong to one episode."),
          }};
}

MicroburstDetector::MicroburstDetector(std::string name, DetectorContext* ctx)
    : Detector(std::move(name), ctx), gap_ns_(Ns(ctx->options().values.Get(kGap))) {
  for (const std::string& s : ctx->options().values.Get(kSignals)) {
    const MetricSpec* spec = FindMetric(absl::StrCat("fabricscope_", s, "_total"));
    if (spec != nullptr && burst_families_.insert(spec).second) families_.push_back(spec);
  }
  for (const MetricSpec* evidence : {&families::kPfcPauseFrames, &families::kDiscards}) {
    if (!burst_families_.contains(evidence)) families_.push_back(evidence);
  }
}

void MicroburstDetector::ForEachEpisode(const std::function<void(Episode&)>& fn) {
  for (auto& [k, st] : states_) {
    if (st.bursts) fn(st.ep);
  }
}

void MicroburstDetector::Observe(const AppendEvent& ev) {
  if (!ev.rate_valid) return;
  const MetricSpec* f = ev.signal->family;
  const bool evidence = f == &families::kPfcPauseFrames || f == &families::kDiscards;
  Cached* cached = cache_.Get(ev.id);
  SeriesState* state = nullptr;
  if (cached != nullptr && cached->version == inserts_ + 1) {
    state = cached->state;
  } else {
    auto it = states_.find(ev.id);
    state = it == states_.end() ? nullptr : &it->second;
    if (cached != nullptr) *cached = {inserts_ + 1, state};
  }
  if (state == nullptr) {
    // State only for series that burst, and for the evidence.
    if (!evidence && !ev.microburst) return;
    ++inserts_;
    state = &states_.try_emplace(ev.id, gap_ns_).first->second;
    if (cached != nullptr) *cached = {inserts_ + 1, state};
    SeriesState& st = *state;
    const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
    st.signal = SignalText(*ev.signal);
    st.bursts = burst_families_.contains(f);
    st.evidence = evidence;
    st.feedback =
        f == &families::kEcnMarked || f == &families::kCnpSent || f == &families::kCnpHandled;
    st.port = &ports_[!ref.device.empty() ? absl::StrCat(ref.device, "/", ref.port) : ref.netdev];
    Episode& ep = st.ep;
    ep.report = !st.feedback;
    ep.tmpl = MakeEvent("burst", ref.device, ref.port, ref.netdev,
                        std::string(ev.signal->Label("priority")),
                        std::string(ev.signal->Label("direction")), kRankBurst, st.signal);
    ep.gauge = &kMicroburstActive;
    ep.gauge_labels = {{"signal", ev.signal->name},       {"device", ev.key->device},
                       {"port", PortLabel(ev.key->port)}, {"netdev", ev.key->netdev},
                       {"priority", ep.tmpl.priority},    {"direction", ep.tmpl.direction}};
  }
  SeriesState& st = *state;
  if (st.evidence) {
    const double mean = st.recent.Rate(ev.start_ns);
    st.recent.Add(ev.end_ns, ev.end_ns - ev.start_ns, ev.delta);
    if (ev.delta > 0 && ev.rate > 2 * mean) {
      st.port->rise_start_ns = ev.start_ns;
      st.port->rise_end_ns = ev.end_ns;
      st.port->rise_signal = st.signal;
    }
  }
  if (!st.bursts || (!st.ep.deb.active() && !ev.microburst && st.ep.last_fed_ns == INT64_MIN)) {
    return;  // an evidence series that never burst
  }
  auto summary = [&st](const Episode& e) {
    const std::string where =
        !e.tmpl.device.empty() ? absl::StrCat(e.tmpl.device, "/", e.tmpl.port) : e.tmpl.netdev;
    return absl::StrCat(absl::StrFormat("%s %s: burst up to %.3g/s", where, st.signal, e.run_peak),
                        st.note);
  };
  if (!st.ep.deb.active()) st.note.clear();
  st.ep.Feed(ctx_, ev.start_ns, ev.end_ns, ev.microburst, ev.rate, summary);
  // ECN marks / CNPs: an event only once pause frames or discards show that
  // DCQCN did not contain the burst.
  if (st.feedback && st.ep.deb.active() && st.ep.event_id == 0 &&
      st.port->rise_end_ns > st.ep.deb.episode_start_ns() - 100'000'000 &&
      st.port->rise_start_ns <= ev.end_ns) {
    st.note = absl::StrCat("; not contained by DCQCN: ", st.port->rise_signal, " rose");
    st.ep.Report(ctx_, ev.end_ns, summary(st.ep));
  }
}

}  // namespace fabricscope
