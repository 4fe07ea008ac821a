#include "daemon/detect/ecn_mistuning_detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/signals.h"

namespace fabricscope {
namespace {

const MetricSpec& kEcnMistuningActive = DefineMetric(
    {.name = "fabricscope_ecn_mistuning_active",
     .type = MetricType::kGauge,
     .help = "1 while ECN mistuning of the kind is detected on the RDMA port: marking_too_late, "
             "drops_ecn_disabled, too_aggressive, cnp_ignored, ecn_disabled_on_pfc_priority.",
     .labels = {"device", "port", "kind"},
     .component = "detect"});

const OptionKey<absl::Duration> kWindow{"ecn-window", absl::Seconds(1)};
const OptionKey<absl::Duration> kDetection{"ecn-detection-time", absl::Milliseconds(300)};
const OptionKey<absl::Duration> kRestoration{"ecn-restoration-time", absl::Seconds(1)};
const OptionKey<double> kDropFloor{"ecn-drop-floor", 100};  // discarded packets per second
const OptionKey<double> kMarkRatio{"ecn-mark-ratio", 0.1};  // marks + CNPs per discard
const OptionKey<double> kCnpFloor{"ecn-cnp-floor", 1000};   // CNPs per second
const OptionKey<double> kLowUtilization{"ecn-low-utilization", 0.3};  // of the link rate
// The link rate of a port whose rate is unknown (no option).
constexpr double kDefaultLinkGbps = 100;

}  // namespace

EcnMistuningDetector::Settings EcnMistuningDetector::SettingsOf(const OptionValues& v) {
  return {.window_s = absl::ToDoubleSeconds(v.Get(kWindow)),
          .window_ns = Ns(v.Get(kWindow)),
          .detection_ns = Ns(v.Get(kDetection)),
          .restoration_ns = Ns(v.Get(kRestoration)),
          .drop_floor = v.Get(kDropFloor),
          .mark_ratio = v.Get(kMarkRatio),
          .cnp_floor = v.Get(kCnpFloor),
          .low_utilization = v.Get(kLowUtilization)};
}

EcnMistuningDetector::EcnMistuningDetector(std::string name, DetectorContext* ctx)
    : Detector(std::move(name), ctx), settings_(SettingsOf(ctx->options().values)) {}

DetectorClass EcnMistuningDetector::Class() {
  return {
      .description =
          "ECN mistuning: marking too late, drops with ECN disabled, marking too "
          "aggressively, CNPs ignored, ECN disabled on a PFC priority",
      .kinds = {"marking_too_late", "drops_ecn_disabled", "too_aggressive", "cnp_ignored",
                "ecn_disabled_on_pfc_priority"},
      .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kEcnMistuningActive); },
      .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
        return std::make_unique<EcnMistuningDetector>(std::move(name), ctx);
      },
      .options =
          {
              option::Duration(kWindow,
                               "ECN mistuning: the trailing window the rates are taken "
                               "over."),
              option::Duration(kDetection,
                               "ECN mistuning: how long a condition must hold before "
                               "it is reported."),
              option::Duration(kRestoration,
                               "ECN mistuning: how long a condition must be gone "
                               "before the report ends."),
              option::Number(kDropFloor, "NUMBER",
                             "ECN marking too late: discards per second on the port at or above "
                             "which marking is judged.",
                             Between(1e-3, 1e12)),
              option::Number(kMarkRatio, "NUMBER",
                             "ECN marking too late: ECN marks + CNPs per discard below which "
                             "marking is flat.",
                             Between(0, 1e6)),
              option::Number(kCnpFloor, "NUMBER",
                             "ECN too aggressive: CNPs per second (sent + handled) at or above "
                             "which the port is judged.",
                             Between(1e-3, 1e12)),
              option::Number(kLowUtilization, "NUMBER",
                             "ECN too aggressive: link utilization (of the port's rate) below "
                             "which CNPs are suspicious.",
                             Between(0.001, 1)),
          }};
}

std::vector<const MetricSpec*> EcnMistuningDetector::Families() const {
  return {&families::kDiscards,    &families::kEcnMarked,  &families::kCnpSent,
          &families::kCnpHandled,  &families::kCnpIgnored, &families::kPortBytes,
          &families::kNetdevBytes, &families::kPfcEnabled, &families::kEcnEnabled};
}

void EcnMistuningDetector::ForEachEpisode(const std::function<void(Episode&)>& fn) {
  for (auto& [k, p] : ports_) {
    fn(p.too_late);
    fn(p.ecn_off);
    fn(p.aggressive);
    fn(p.cnp_ignored);
  }
  for (auto& [k, ep] : config_) fn(ep);
}

void EcnMistuningDetector::Observe(const AppendEvent& ev) {
  const MetricSpec* f = ev.signal->family;
  if (f == &families::kPfcEnabled || f == &families::kEcnEnabled) {
    ObserveConfig(ev);
    return;
  }
  if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
  const PortRef& ref = ctx_->ResolveSeries(ev.id, *ev.key, ev.end_ns);
  if (ref.device.empty()) return;  // a netdev that is not an RDMA port
  Cached* cached = cache_.Get(ev.id);
  PortState* port = nullptr;
  Input input = Input::kUnknown;
  if (cached != nullptr && cached->port != nullptr && cached->inserts == port_inserts_ &&
      cached->generation == ctx_->generation()) {
    port = cached->port;
    input = cached->input;
    if (ref.link_bps > 0) port->link_bps = ref.link_bps;  // as Port() does
  } else {
    port = &Port(ref);
    input = InputOf(*ev.signal);
    if (cached != nullptr) *cached = {input, port, port_inserts_, ctx_->generation()};
  }
  PortState& p = *port;
  const int64_t dt = ev.end_ns - ev.start_ns;
  if (p.first_ns == INT64_MIN) p.first_ns = ev.start_ns;
  WindowSum* sums[2] = {nullptr, nullptr};
  switch (input) {
    case Input::kDrops:
      sums[0] = &p.drops;
      break;
    case Input::kMarks:
      sums[0] = &p.marks;
      break;
    case Input::kMarksAndCnps:
      sums[0] = &p.marks;
      sums[1] = &p.cnps;
      break;
    case Input::kCnps:
      sums[0] = &p.cnps;
      break;
    case Input::kIgnored:
      sums[0] = &p.ignored;
      break;
    case Input::kPortRx:
      sums[0] = &p.port_rx;
      break;
    case Input::kPortTx:
      sums[0] = &p.port_tx;
      break;
    case Input::kNetRx:
      sums[0] = &p.net_rx;
      break;
    case Input::kNetTx:
    case Input::kUnknown:
      sums[0] = &p.net_tx;
      break;
  }
  for (WindowSum* w : sums) {
    if (w != nullptr) w->Add(ev.end_ns, dt, ev.delta);
  }
  if (ev.end_ns < p.next_eval_ns) return;
  const int64_t from = p.last_eval_ns == INT64_MIN ? ev.start_ns : p.last_eval_ns;
  p.last_eval_ns = ev.end_ns;
  p.next_eval_ns = ev.end_ns + 100'000'000;
  Evaluate(&p, ref, from, ev.end_ns);
}

EcnMistuningDetector::Input EcnMistuningDetector::InputOf(const Signal& signal) {
  const MetricSpec* f = signal.family;
  if (f == &families::kDiscards) return Input::kDrops;
  if (f == &families::kEcnMarked) return Input::kMarks;
  if (f == &families::kCnpSent) return Input::kMarksAndCnps;
  if (f == &families::kCnpHandled) return Input::kCnps;
  if (f == &families::kCnpIgnored) return Input::kIgnored;
  // bytes: utilization is the busiest direction of either source
  const bool rx = signal.Label("direction") == "rx";
  if (f == &families::kPortBytes) return rx ? Input::kPortRx : Input::kPortTx;
  return rx ? Input::kNetRx : Input::kNetTx;
}

EcnMistuningDetector::PortState& EcnMistuningDetector::Port(const PortRef& ref) {
  const std::string key = absl::StrCat(ref.device, "/", ref.port);
  auto it = ports_.find(key);
  if (it == ports_.end()) {
    ++port_inserts_;
    it =
        ports_
            .try_emplace(key, settings_.window_ns, settings_.detection_ns, settings_.restoration_ns)
            .first;
    PortState& p = it->second;
    Init(&p.too_late, ref, "marking_too_late", kRankEcn);
    Init(&p.ecn_off, ref, "drops_ecn_disabled", kRankEcn);
    Init(&p.aggressive, ref, "too_aggressive", kRankEcn);
    Init(&p.cnp_ignored, ref, "cnp_ignored", kRankEcn);
  }
  if (ref.link_bps > 0) it->second.link_bps = ref.link_bps;
  return it->second;
}

void EcnMistuningDetector::Init(Episode* ep, const PortRef& ref, absl::string_view kind,
                                int merge_rank) {
  ep->tmpl = MakeEvent(std::string(kind), ref.device, ref.port, ref.netdev, "", "", merge_rank,
                       std::string(kind));
  ep->gauge = &kEcnMistuningActive;
  ep->gauge_labels = {
      {"device", ref.device}, {"port", PortLabel(ref.port)}, {"kind", std::string(kind)}};
  ctx_->DeclareGauge(kEcnMistuningActive, ep->gauge_labels);
}

void EcnMistuningDetector::Evaluate(PortState* p, const PortRef& ref, int64_t from, int64_t now) {
  const Settings& o = settings_;
  const double elapsed = std::clamp(static_cast<double>(now - p->first_ns) * 1e-9, 0.1, o.window_s);
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
  const double link = p->link_bps > 0 ? p->link_bps : kDefaultLinkGbps * 1e9;
  const double util = bytes * 8 / link;
  const std::string where = absl::StrCat(ref.device, "/", ref.port);
  const bool flat = drops >= o.drop_floor && marks < o.mark_ratio * drops;
  std::string off_what;
  const bool ecn_off = flat && EcnDisabled(ref.netdev, &off_what);
  p->ecn_off.Feed(ctx_, from, now, ecn_off, drops, [&](const Episode& e) {
    return absl::StrFormat(
        "%s: discards at up to %.0f/s with ECN disabled on %s: drops with ECN disabled (flat "
        "ECN marks + CNPs are expected, not marking too late)",
        where, e.run_peak, off_what);
  });
  p->too_late.Feed(ctx_, from, now, flat && !ecn_off, drops, [&](const Episode& e) {
    return absl::StrFormat(
        "%s: discards at up to %.0f/s while ECN marks + CNPs stay at %.0f/s: "
        "ECN marks too late (Kmin/Kmax above the buffer?)",
        where, e.run_peak, marks);
  });
  p->aggressive.Feed(ctx_, from, now, cnps >= o.cnp_floor && util < o.low_utilization && drops == 0,
                     cnps, [&](const Episode& e) {
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

bool EcnMistuningDetector::EcnDisabled(const std::string& netdev, std::string* what) const {
  if (netdev.empty() || prio_.empty()) return false;
  std::vector<std::pair<int, const PrioConfig*>> known;  // priorities with a known ECN enable
  bool any_pfc = false;
  for (int prio = 0; prio < 8; ++prio) {
    auto it = prio_.find(absl::StrCat(netdev, "|", prio));
    if (it == prio_.end()) continue;
    any_pfc |= it->second.pfc == 1;
    if (it->second.ecn_np >= 0 || it->second.ecn_rp >= 0) known.push_back({prio, &it->second});
  }
  std::string out;
  bool any = false;
  for (const auto& [prio, c] : known) {
    if (any_pfc && c->pfc != 1) continue;                // not a RoCE (lossless) priority
    if (c->ecn_np != 0 && c->ecn_rp != 0) return false;  // ECN on (or half unknown)
    absl::StrAppend(&out, any ? ", " : "", "priority ", prio, " (np ",
                    c->ecn_np < 0 ? "?" : (c->ecn_np ? "on" : "off"), ", rp ",
                    c->ecn_rp < 0 ? "?" : (c->ecn_rp ? "on" : "off"), ")");
    any = true;
  }
  if (any) *what = std::move(out);
  return any;
}

// PFC enabled on a priority whose ECN is disabled for either role.
void EcnMistuningDetector::ObserveConfig(const AppendEvent& ev) {
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
    Init(&it->second, ref, "ecn_disabled_on_pfc_priority", kRankNever);
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

}  // namespace fabricscope
