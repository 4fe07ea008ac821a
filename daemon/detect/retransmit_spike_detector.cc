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

}  // namespace

DetectorClass RetransmitSpikeDetector::Class() {
  return {.description =
              "retransmission spikes: out_of_sequence, packet_seq_err or "
              "local_ack_timeout_err rising above their own baseline",
          .kinds = {"out_of_sequence", "packet_seq_err", "local_ack_timeout_err"},
          .declare_metrics = [](MetricsRegistry& m) { m.Gauge(kRetransmitSpikeActive); },
          .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
            return std::make_unique<RetransmitSpikeDetector>(std::move(name), ctx);
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
  const DetectorOptions& o = ctx_->options();
  auto it = states_.find(ev.id);
  if (it == states_.end()) {
    const absl::string_view counter = ev.signal->Label("counter");
    it = states_
             .try_emplace(ev.id, Ns(o.retransmit_window), Ns(o.retransmit_baseline),
                          Ns(o.retransmit_restoration))
             .first;
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
  const bool cond = rate >= o.retransmit_floor && rate >= o.retransmit_factor * baseline;
  st.ep.Feed(ctx_, ev.start_ns, ev.end_ns, cond, rate, [baseline = baseline](const Episode& e) {
    return absl::StrFormat("%s/%u: %s at up to %.0f/s (baseline %.1f/s)", e.tmpl.device,
                           e.tmpl.port, e.tmpl.kind, e.run_peak, baseline);
  });
}

}  // namespace fabricscope
