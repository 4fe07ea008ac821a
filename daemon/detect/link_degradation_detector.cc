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

const OptionKey<double> kCorrectedFactor{"fec-corrected-factor", 10};
const OptionKey<absl::Duration> kFecBaseline{"fec-baseline", absl::Seconds(60)};
const OptionKey<absl::Duration> kHold{"link-hold-time", absl::Seconds(2)};
// Corrected blocks and corrected bits per second at or above which a rising
// FEC rate is judged (no options).
constexpr double kBlockFloor = 100;
constexpr double kBitFloor = 10000;

}  // namespace

LinkDegradationDetector::LinkDegradationDetector(std::string name, DetectorContext* ctx)
    : Detector(std::move(name), ctx),
      corrected_factor_(ctx->options().values.Get(kCorrectedFactor)),
      fec_baseline_ns_(Ns(ctx->options().values.Get(kFecBaseline))),
      hold_ns_(Ns(ctx->options().values.Get(kHold))) {}

DetectorClass LinkDegradationDetector::Class() {
  return {
      .description =
          "link degradation: FEC corrected rate rising, uncorrectable FEC blocks, "
          "symbol errors, link down events, link error recovery",
      .kinds = {"fec_corrected_rising", "fec_uncorrectable", "symbol_errors", "link_downed",
                "link_error_recovery"},
      .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kLinkDegradedActive); },
      .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
        return std::make_unique<LinkDegradationDetector>(std::move(name), ctx);
      },
      .options =
          {
              option::Number(kCorrectedFactor, "NUMBER",
                             "Link degradation: FEC corrected rate over 1s at least this multiple "
                             "of its baseline (--fec-baseline) is fec_corrected_rising.",
                             Between(1, 1e9)),
              option::Duration(kFecBaseline,
                               "Link degradation: the baseline window of the FEC rate."),
              option::Duration(kHold,
                               "Link degradation: error-counter increases closer than this "
                               "are one episode."),
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

absl::string_view LinkDegradationDetector::KindOf(const Signal& signal) {
  const MetricSpec* f = signal.family;
  if (!signal.Label("lane").empty()) return "";  // per-lane FEC: the total is enough
  if (f == &families::kFecCorrectedBlocks || f == &families::kPhyCorrectedBits) {
    return "fec_corrected_rising";
  }
  if (f == &families::kFecUncorrectableBlocks) return "fec_uncorrectable";
  if (f == &families::kPhySymbolErrors) return "symbol_errors";
  if (f == &families::kLinkDownEvents) return "link_downed";
  // IB PMA port errors
  const absl::string_view c = signal.Label("counter");
  if (c == "symbol_error") return "symbol_errors";
  if (c == "link_downed") return "link_downed";
  if (c == "link_error_recovery") return "link_error_recovery";
  return "";
}

bool LinkDegradationDetector::Reads(const Signal& signal) const { return !KindOf(signal).empty(); }

LinkDegradationDetector::State& LinkDegradationDetector::FindState(const AppendEvent& ev,
                                                                   bool corrected,
                                                                   const PortRef* resolved) {
  const MetricSpec* f = ev.signal->family;
  const absl::string_view kind = KindOf(*ev.signal);
  // A corrected-rate state per series (each has its own baseline); error
  // increases per port and kind, whichever counter reports them (the
  // ethtool link-down counter and the IB PMA link_downed are one event).
  std::string key;
  PortRef ref;
  if (corrected) {
    key = absl::StrCat("series:", ev.id);
  } else {
    ref = *resolved;
    key = absl::StrCat(ref.device, "/", ref.port, "|", ref.netdev, "|", kind);
  }
  auto it = states_.find(key);
  if (it == states_.end()) {
    ++inserts_;
    const int64_t on = corrected ? 300'000'000 : 0;
    it = states_.try_emplace(key, on, hold_ns_, fec_baseline_ns_).first;
    State& st = it->second;
    st.corrected = corrected;
    st.floor = f == &families::kPhyCorrectedBits ? kBitFloor : kBlockFloor;
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
  return it->second;
}

void LinkDegradationDetector::Observe(const AppendEvent& ev) {
  // Only the series Reads() accepts come here (the engine asks once).
  const MetricSpec* f = ev.signal->family;
  const bool corrected = f == &families::kFecCorrectedBlocks || f == &families::kPhyCorrectedBits;
  // An error kind's state is keyed by the port, resolved on every sample
  // (which may consult the inventory); a corrected-rate state by the series.
  const PortRef* ref = corrected ? nullptr : &ctx_->ResolveSeries(ev.id, *ev.key, ev.end_ns);
  Cached* cached = cache_.Get(ev.id);
  State* state = nullptr;
  if (cached != nullptr && cached->state != nullptr && cached->inserts == inserts_ &&
      (corrected || cached->generation == ctx_->generation())) {
    state = cached->state;
  } else {
    state = &FindState(ev, corrected, ref);
    if (cached != nullptr) *cached = {state, inserts_, ctx_->generation()};
  }
  if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
  State& st = *state;
  if (st.corrected) {
    const auto [rate, baseline] = st.rate.Add(ev, !st.ep.deb.active());
    const bool cond = rate >= st.floor && rate >= corrected_factor_ * baseline;
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
