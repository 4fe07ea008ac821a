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

}  // namespace

DetectorClass MicroburstDetector::Class() {
  return {.description =
              "microbursts: episodes of poll intervals the store judged bursts, per "
              "series of --microburst-signals",
          .kinds = {"burst"},
          .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kMicroburstActive); },
          .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
            return std::make_unique<MicroburstDetector>(std::move(name), ctx);
          }};
}

MicroburstDetector::MicroburstDetector(std::string name, DetectorContext* ctx)
    : Detector(std::move(name), ctx) {
  for (const std::string& s : ctx->options().microburst_signals) {
    const MetricSpec* spec = FindMetric(absl::StrCat("fabricscope_", s, "_total"));
    if (spec != nullptr) families_.push_back(spec);
  }
}

void MicroburstDetector::ForEachEpisode(const std::function<void(Episode&)>& fn) {
  for (auto& [k, ep] : states_) fn(ep);
}

void MicroburstDetector::Observe(const AppendEvent& ev) {
  if (!ev.rate_valid) return;
  auto it = states_.find(ev.id);
  if (it == states_.end()) {
    if (!ev.microburst) return;  // state only for series that burst
    it = states_.try_emplace(ev.id, 0, Ns(ctx_->options().microburst_gap)).first;
    Episode& ep = it->second;
    const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
    ep.tmpl = MakeEvent("burst", ref.device, ref.port, ref.netdev,
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
        const std::string where =
            !e.tmpl.device.empty() ? absl::StrCat(e.tmpl.device, "/", e.tmpl.port) : e.tmpl.netdev;
        return absl::StrFormat("%s %s%s%s: burst up to %.3g/s", where, signal,
                               e.tmpl.direction.empty() ? "" : " ", e.tmpl.direction, e.run_peak);
      });
}

}  // namespace fabricscope
