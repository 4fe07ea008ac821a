#include "daemon/detect/pfc_storm_detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/signals.h"

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

const OptionKey<double> kFraction{"pfc-storm-fraction", 0.8};
const OptionKey<absl::Duration> kDetection{"pfc-storm-detection-time", absl::Milliseconds(200)};
const OptionKey<absl::Duration> kRestoration{"pfc-storm-restoration-time", absl::Milliseconds(200)};

}  // namespace

PfcStormDetector::PfcStormDetector(std::string name, DetectorContext* ctx)
    : Detector(std::move(name), ctx),
      fraction_(ctx->options().values.Get(kFraction)),
      detection_ns_(Ns(ctx->options().values.Get(kDetection))),
      restoration_ns_(Ns(ctx->options().values.Get(kRestoration))) {}

DetectorClass PfcStormDetector::Class() {
  return {
      .description =
          "PFC storms: a priority paused for most of each poll interval, or the "
          "NIC's own pause-storm events",
      .kinds = {"storm", "nic_pause_storm"},
      .declare_metrics =
          [](MetricsRegistry& m) {
            m.Gauge(kPfcStormActive);
            m.Counter(kPfcStorms);
          },
      .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
        return std::make_unique<PfcStormDetector>(std::move(name), ctx);
      },
      .options =
          {
              option::Number(kFraction, "NUMBER",
                             "PFC storm: a poll interval counts as stormy when the priority was "
                             "paused for at least this fraction of it.",
                             Between(0.01, 1)),
              option::Duration(kDetection,
                               "PFC storm: stormy intervals must last this long "
                               "before a storm is declared."),
              option::Duration(
                  kRestoration,
                  "PFC storm: calm intervals must last this long before a storm ends."),
          }};
}

std::vector<const MetricSpec*> PfcStormDetector::Families() const {
  return {&families::kPfcPauseSeconds, &families::kPauseStormEvents};
}

void PfcStormDetector::ForEachEpisode(const std::function<void(Episode&)>& fn) {
  for (auto& [k, ep] : states_) fn(ep);
}

void PfcStormDetector::Observe(const AppendEvent& ev) {
  const bool nic = ev.signal->family == &families::kPauseStormEvents;
  auto it = states_.find(ev.id);
  if (it == states_.end()) {
    it = states_.try_emplace(ev.id, nic ? 0 : detection_ns_, restoration_ns_).first;
    Episode& ep = it->second;
    const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
    ep.tmpl = MakeEvent(nic ? "nic_pause_storm" : "storm", ref.device, ref.port, ev.key->netdev,
                        nic ? "" : std::string(ev.signal->Label("priority")),
                        nic ? "tx" : std::string(ev.signal->Label("direction")),
                        nic ? kRankNicPauseStorm : kRankStorm, SignalText(*ev.signal));
    ep.gauge = &kPfcStormActive;
    ep.gauge_labels = {{"netdev", ep.tmpl.netdev},
                       {"priority", ep.tmpl.priority},
                       {"direction", ep.tmpl.direction}};
    ctx_->DeclareGauge(kPfcStormActive, ep.gauge_labels);
  }
  if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
  Episode& ep = it->second;
  Debouncer::Transition t;
  if (nic) {
    t = ep.Feed(ctx_, ev.start_ns, ev.end_ns, ev.delta > 0, ev.rate, [](const Episode& e) {
      return absl::StrFormat(
          "%s: the NIC reports pause-storm events (its storm prevention is acting)", e.tmpl.netdev);
    });
  } else {
    const double fraction = PauseFraction(ev);
    const bool estimated = ev.signal->estimated;
    t = ep.Feed(
        ctx_, ev.start_ns, ev.end_ns, fraction >= fraction_, fraction,
        [estimated](const Episode& e) {
          return absl::StrFormat(
              "%s priority %s %s: paused up to %.0f%% of each poll interval%s", e.tmpl.netdev,
              e.tmpl.priority,
              e.tmpl.direction == "rx" ? "rx (the peer pauses this port)"
                                       : "tx (this port pauses the peer)",
              e.run_peak * 100,
              estimated ? " (estimated from XOFF frames x 65535 quanta at the link rate)" : "");
        });
  }
  if (t == Debouncer::Transition::kStarted && ctx_->metrics() != nullptr) {
    ctx_->metrics()
        ->Counter(kPfcStorms)
        .Add({{"netdev", ep.tmpl.netdev},
              {"priority", ep.tmpl.priority},
              {"direction", ep.tmpl.direction}})
        .Increment();
  }
}

}  // namespace fabricscope
