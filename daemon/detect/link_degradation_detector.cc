#include "daemon/detect/link_degradation_detector.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/signals.h"

namespace fabricscope {
namespace {

const MetricSpec& kLinkDegradedActive =
    DefineMetric({.name = "fabricscope_link_degraded_active",
                  .type = MetricType::kGauge,
                  .help = "1 while the link shows degradation of the kind: fec_corrected_rising, "
                          "fec_uncorrectable, symbol_errors, link_downed, link_error_recovery.",
                  .labels = {"device", "port", "netdev", "kind"},
                  .component = "detect"});

}  // namespace

DetectorClass LinkDegradationDetector::Class() {
  return {.description =
              "link degradation: FEC corrected rate rising, uncorrectable FEC blocks, "
              "symbol errors, link down events, link error recovery",
          .kinds = {"fec_corrected_rising", "fec_uncorrectable", "symbol_errors", "link_downed",
                    "link_error_recovery"},
          .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kLinkDegradedActive); },
          .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
            return std::make_unique<LinkDegradationDetector>(std::move(name), ctx);
          }};
}

std::vector<const MetricSpec*> LinkDegradationDetector::Families() const {
  return {&families::kFecCorrectedBlocks,     &families::kPhyCorrectedBits,
          &families::kFecUncorrectableBlocks, &families::kPhySymbolErrors,
          &families::kLinkDownEvents,         &families::kIbPortErrors};
}

void LinkDegradationDetector::ForEachEpisode(const std::function<void(Episode&)>& fn) {
  for (auto& [k, s] : states_) fn(s.ep);
}

void LinkDegradationDetector::Observe(const AppendEvent& ev) {
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
    st.ep.tmpl = MakeEvent(std::string(kind), ref.device, ref.port, ref.netdev, "", "", kRankLink,
                           SignalText(*ev.signal));
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

}  // namespace fabricscope
