#include "daemon/detect/retransmit_spike_detector.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "core/signals.h"

namespace fabricscope {
namespace {

const MetricSpec& kRetransmitSpikeActive = DefineMetric(
    {.name = "fabricscope_retransmit_spike_active",
     .type = MetricType::kGauge,
     .help = "1 while the retransmission counter spikes on the port (rate over "
             "--retransmit-window >= --retransmit-floor and >= --retransmit-factor x baseline).",
     .labels = {"device", "port", "kind"},
     .component = "detect"});

const OptionKey<absl::Duration> kWindow{"retransmit-window", absl::Seconds(1)};
const OptionKey<absl::Duration> kBaseline{"retransmit-baseline", absl::Seconds(30)};
const OptionKey<double> kFloor{"retransmit-floor", 10};
const OptionKey<double> kFactor{"retransmit-factor", 4};
// How long the condition must be gone before an episode ends (no option).
constexpr absl::Duration kRestoration = absl::Seconds(1);

}  // namespace

RetransmitSpikeDetector::RetransmitSpikeDetector(std::string name, DetectorContext* ctx)
    : Detector(std::move(name), ctx),
      window_ns_(Ns(ctx->options().values.Get(kWindow))),
      baseline_ns_(Ns(ctx->options().values.Get(kBaseline))),
      floor_(ctx->options().values.Get(kFloor)),
      factor_(ctx->options().values.Get(kFactor)) {}

DetectorClass RetransmitSpikeDetector::Class() {
  return {.description =
              "retransmission spikes: out_of_sequence, packet_seq_err or "
              "local_ack_timeout_err rising above their own baseline",
          .kinds = {"out_of_sequence", "packet_seq_err", "local_ack_timeout_err"},
          .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kRetransmitSpikeActive); },
          .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
            return std::make_unique<RetransmitSpikeDetector>(std::move(name), ctx);
          },
          .options =
              {
                  option::Duration(kWindow, "Retransmit spike: the window of the judged rate."),
                  option::Duration(kBaseline,
                                   "Retransmit spike: the trailing window of the baseline rate."),
                  option::Number(kFloor, "NUMBER",
                                 "Retransmit spike: events per second at or above which a counter "
                                 "can spike.",
                                 Between(1e-3, 1e12)),
                  option::Number(kFactor, "NUMBER",
                                 "Retransmit spike: the rate must be at least this multiple of the "
                                 "baseline.",
                                 Between(1, 1e6)),
              }};
}

std::vector<const MetricSpec*> RetransmitSpikeDetector::Families() const {
  return {&families::kRdmaErrors};
}

void RetransmitSpikeDetector::ForEachEpisode(const std::function<void(Episode&)>& fn) {
  for (auto& [k, s] : states_) fn(s.ep);
}

bool RetransmitSpikeDetector::Reads(const Signal& signal) const {
  const absl::string_view counter = signal.Label("counter");
  return counter == "out_of_sequence" || counter == "packet_seq_err" ||
         counter == "local_ack_timeout_err";
}

void RetransmitSpikeDetector::Observe(const AppendEvent& ev) {
  // Only the series Reads() accepts come here (the engine asks once).
  auto it = states_.find(ev.id);
  if (it == states_.end()) {
    const absl::string_view counter = ev.signal->Label("counter");
    it = states_.try_emplace(ev.id, window_ns_, baseline_ns_, Ns(kRestoration)).first;
    State& st = it->second;
    const PortRef ref = ctx_->Resolve(*ev.key, ev.end_ns);
    st.ep.tmpl = MakeEvent(std::string(counter), ev.key->device, ev.key->port, ref.netdev, "", "",
                           kRankRetransmit, SignalText(*ev.signal));
    st.ep.tmpl.merge_tail = true;  // ACK timeouts and NAKs outlast a flap or a drop burst
    st.ep.gauge = &kRetransmitSpikeActive;
    st.ep.gauge_labels = {
        {"device", ev.key->device}, {"port", PortLabel(ev.key->port)}, {"kind", st.ep.tmpl.kind}};
    ctx_->DeclareGauge(kRetransmitSpikeActive, st.ep.gauge_labels);
  }
  if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
  State& st = it->second;
  const auto [rate, baseline] = st.rate.Add(ev, !st.ep.deb.active());
  const bool cond = rate >= floor_ && rate >= factor_ * baseline;
  st.ep.Feed(ctx_, ev.start_ns, ev.end_ns, cond, rate, [baseline = baseline](const Episode& e) {
    return absl::StrFormat("%s/%u: %s at up to %.0f/s (baseline %.1f/s)", e.tmpl.device,
                           e.tmpl.port, e.tmpl.kind, e.run_peak, baseline);
  });
}

}  // namespace fabricscope
