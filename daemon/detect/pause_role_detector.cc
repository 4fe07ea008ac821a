#include "daemon/detect/pause_role_detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/signals.h"

namespace fabricscope {
namespace {

const MetricSpec& kPauseRole = DefineMetric(
    {.name = "fabricscope_pfc_pause_role",
     .type = MetricType::kGauge,
     .help = "1 while the port holds the PFC pause role on the priority, else 0. role "
             "\"originator\": this NIC pauses its switch (tx pause fraction >= "
             "--pause-role-fraction for --pause-role-detection-time while its own rx pause is "
             "below --pause-role-clear-fraction; priority \"\": the NIC's own pause-storm "
             "events rise); role \"receiver\": the switch pauses this port (rx pause fraction >= "
             "--pause-role-fraction for --pause-role-detection-time).",
     .labels = {"netdev", "priority", "role"},
     .component = "detect"});

const OptionKey<double> kFraction{"pause-role-fraction", 0.5};
const OptionKey<double> kClearFraction{"pause-role-clear-fraction", 0.05};
const OptionKey<absl::Duration> kDetection{"pause-role-detection-time", absl::Seconds(1)};
const OptionKey<absl::Duration> kRestoration{"pause-role-restoration-time", absl::Seconds(2)};

}  // namespace

PauseRoleDetector::PauseRoleDetector(std::string name, DetectorContext* ctx)
    : Detector(std::move(name), ctx),
      fraction_(ctx->options().values.Get(kFraction)),
      clear_fraction_(ctx->options().values.Get(kClearFraction)),
      detection_ns_(Ns(ctx->options().values.Get(kDetection))),
      restoration_ns_(Ns(ctx->options().values.Get(kRestoration))) {}

DetectorClass PauseRoleDetector::Class() {
  return {.description =
              "PFC pause roles for fleet rules: a port that pauses its switch while not paused "
              "itself (originator), a port its switch pauses (receiver)",
          .kinds = {"pause_originator", "pause_receiver"},
          .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kPauseRole); },
          .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
            return std::make_unique<PauseRoleDetector>(std::move(name), ctx);
          },
          .options =
              {
                  option::Number(kFraction, "NUMBER",
                                 "Pause roles (fabricscope_pfc_pause_role): a priority's tx "
                                 "(originator) or rx (receiver) pause fraction of a poll interval "
                                 "at or above which the role holds.",
                                 Between(0.01, 1)),
                  option::Number(kClearFraction, "NUMBER",
                                 "Pause roles: an originator's own rx pause fraction must stay "
                                 "below this (a port paused itself is a victim passing pause on, "
                                 "not an origin).",
                                 Between(0, 1)),
                  option::Duration(kDetection,
                                   "Pause roles: how long the condition must hold "
                                   "before the role is reported."),
                  option::Duration(kRestoration,
                                   "Pause roles: how long the condition must be "
                                   "gone before the role ends."),
              },
          .validate = [](const OptionValues& v) -> absl::Status {
            if (!(v.Get(kClearFraction) < v.Get(kFraction))) {
              return absl::InvalidArgumentError(
                  "pause-role-clear-fraction must be below pause-role-fraction");
            }
            return absl::OkStatus();
          }};
}

std::vector<const MetricSpec*> PauseRoleDetector::Families() const {
  return {&families::kPfcPauseSeconds, &families::kPauseStormEvents};
}

void PauseRoleDetector::ForEachEpisode(const std::function<void(Episode&)>& fn) {
  for (auto& [k, s] : priorities_) {
    fn(s.originator);
    fn(s.receiver);
  }
  for (auto& [k, ep] : nic_) fn(ep);
}

void PauseRoleDetector::InitEpisode(Episode& ep, const AppendEvent& ev, const std::string& priority,
                                    const std::string& role, const std::string& kind,
                                    const std::string& direction) {
  const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
  ep.tmpl =
      MakeEvent(kind, ref.device, ref.port, ev.key->netdev, priority, direction, kRankPauseRole,
                priority.empty() ? kind : absl::StrCat(kind, " prio ", priority));
  ep.gauge = &kPauseRole;
  ep.gauge_labels = {{"netdev", ev.key->netdev}, {"priority", priority}, {"role", role}};
  ctx_->DeclareGauge(kPauseRole, ep.gauge_labels);
}

PauseRoleDetector::PriorityState& PauseRoleDetector::State(const AppendEvent& ev,
                                                           const std::string& priority) {
  auto [it, inserted] = priorities_.try_emplace(absl::StrCat(ev.key->netdev, "|", priority),
                                                detection_ns_, restoration_ns_);
  if (inserted) {
    InitEpisode(it->second.originator, ev, priority, "originator", "pause_originator", "tx");
    InitEpisode(it->second.receiver, ev, priority, "receiver", "pause_receiver", "rx");
  }
  return it->second;
}

void PauseRoleDetector::Observe(const AppendEvent& ev) {
  if (ev.signal->family == &families::kPauseStormEvents) {
    auto it = nic_.find(ev.id);
    if (it == nic_.end()) {
      it = nic_.try_emplace(ev.id, 0, restoration_ns_).first;
      InitEpisode(it->second, ev, "", "originator", "pause_originator", "tx");
    }
    if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
    it->second.Feed(ctx_, ev.start_ns, ev.end_ns, ev.delta > 0, ev.rate, [](const Episode& e) {
      return absl::StrFormat(
          "%s: pause originator: the NIC reports pause-storm events (it pauses its switch)",
          e.tmpl.netdev);
    });
    return;
  }
  Cached* cached = cache_.Get(ev.id);
  if (cached == nullptr || cached->state == nullptr) {
    const std::string priority(ev.signal->Label("priority"));
    const Cached found{&State(ev, priority), ev.signal->Label("direction") == "rx"};
    if (cached == nullptr) cached = &cache_scratch_;
    *cached = found;
  }
  PriorityState& s = *cached->state;
  const bool rx = cached->rx;
  if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
  const double fraction = PauseFraction(ev);
  if (rx) {
    s.last_rx_fraction = fraction;
    s.receiver.Feed(ctx_, ev.start_ns, ev.end_ns, fraction >= fraction_, fraction,
                    [](const Episode& e) {
                      return absl::StrFormat(
                          "%s priority %s: pause receiver: the switch pauses this port up to "
                          "%.0f%% of each poll interval",
                          e.tmpl.netdev, e.tmpl.priority, e.run_peak * 100);
                    });
    return;
  }
  const bool cond = fraction >= fraction_ && s.last_rx_fraction < clear_fraction_;
  s.originator.Feed(ctx_, ev.start_ns, ev.end_ns, cond, fraction, [](const Episode& e) {
    return absl::StrFormat(
        "%s priority %s: pause originator: this NIC pauses its switch up to %.0f%% of each "
        "poll interval while not paused itself",
        e.tmpl.netdev, e.tmpl.priority, e.run_peak * 100);
  });
}

}  // namespace fabricscope
