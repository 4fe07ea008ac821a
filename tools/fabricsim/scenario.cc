#include "tools/fabricsim/scenario.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fabricsim {
namespace {

constexpr int64_t kMs = 1'000'000;

struct ScenarioDef {
  const char* name;
  const char* description;
  int64_t period_ms;
  std::vector<Episode> episodes;  // times in ms here, converted by Make()
};

const std::vector<ScenarioDef>& Defs() {
  using K = EpisodeKind;
  static const auto* defs = new std::vector<ScenarioDef>{
      {"quiet", "moderate load, no congestion: nothing should fire", 10'000, {}},
      {"incast_microbursts",
       "4-6 ms incast bursts into alternating ports twice a second",
       1'000,
       {{K::kMicroburst, 0, 200, 204}, {K::kMicroburst, 1, 700, 706}}},
      {"pfc_storm",
       "600 ms PFC storms every 10 s: port 0 paused by the switch (rx), port 1 pausing it (tx)",
       10'000,
       {{K::kPfcStormRx, 0, 1'000, 1'600}, {K::kPfcStormTx, 1, 5'000, 5'600}}},
      {"ecn_too_late",
       "3 s of sustained incast on port 0 with ECN thresholds above the buffer: drops, no marks",
       10'000,
       {{K::kEcnTooLate, 0, 1'000, 4'000}}},
      {"ecn_too_aggressive",
       "3 s on port 0 with Kmin 0 and Pmax 1: CNP flood at low utilization, no drops",
       10'000,
       {{K::kEcnTooAggressive, 0, 1'000, 4'000}}},
      {"fec_degradation",
       "port 0's bit error rate climbs from 1e-9 to 2e-5 over 6 s, then recovers",
       10'000,
       {{K::kFecDegradation, 0, 1'000, 7'000}}},
      {"link_flap",
       "port 0 down for 300 ms, port 1 down for 200 ms, every 10 s",
       10'000,
       {{K::kLinkFlap, 0, 1'000, 1'300}, {K::kLinkFlap, 1, 5'000, 5'200}}},
      {"retransmit_storm",
       "2 s of 0.2% silent packet loss on port 0: NAKs, out-of-sequence, ACK timeouts",
       10'000,
       {{K::kRetransmitStorm, 0, 1'000, 3'000}}},
      {"mixed",
       "cycles through every storm and mistuning in 36 s (the demo)",
       36'000,
       {{K::kPfcStormRx, 0, 1'000, 1'600},
        {K::kMicroburst, 0, 2'000, 2'004},
        {K::kMicroburst, 1, 2'300, 2'306},
        {K::kMicroburst, 0, 2'600, 2'604},
        {K::kMicroburst, 1, 2'900, 2'906},
        {K::kEcnTooAggressive, 1, 3'500, 7'500},
        {K::kEcnTooLate, 0, 8'500, 12'500},
        {K::kFecDegradation, 1, 13'500, 20'500},
        {K::kLinkFlap, 0, 21'500, 21'800},
        {K::kRetransmitStorm, 1, 23'000, 26'000},
        {K::kPfcStormTx, 1, 27'000, 27'700}}},
  };
  return *defs;
}

void Apply(const Episode& e, int64_t now_in_period, PortParams* p) {
  switch (e.kind) {
    case EpisodeKind::kMicroburst:
      p->recv_incast = true;
      p->recv_incast_load = 1.0;
      break;
    case EpisodeKind::kPfcStormRx:
      p->send.drain_gbps = 0;
      break;
    case EpisodeKind::kPfcStormTx:
      p->local_rx_stuck = true;
      break;
    case EpisodeKind::kEcnTooLate:
      // 8 remote senders at 20% of line rate each: 1.6x oversubscribed, for
      // seconds. Marking starts above the buffer and PFC headroom is
      // misconfigured (lossy), so the queue overflows without a single mark.
      p->recv_incast = true;
      p->recv_incast_load = 0.2;
      p->recv.kmin_bytes = 2 * p->recv.buffer_bytes;
      p->recv.kmax_bytes = 3 * p->recv.buffer_bytes;
      p->recv.pfc = false;
      break;
    case EpisodeKind::kEcnTooAggressive:
      // Normal offered load, but the few packets queued behind a burst are
      // enough to mark: CNPs keep the senders' rates near the floor.
      p->recv.kmin_bytes = 0;
      p->recv.kmax_bytes = 20e3;
      p->recv.pmax = 1.0;
      break;
    case EpisodeKind::kFecDegradation: {
      double frac = static_cast<double>(now_in_period - e.start_ns) /
                    static_cast<double>(std::max<int64_t>(1, e.end_ns - e.start_ns));
      p->ber = std::pow(10.0, -9.0 + frac * (std::log10(2e-5) + 9.0));
      break;
    }
    case EpisodeKind::kLinkFlap:
      p->link_up = false;
      break;
    case EpisodeKind::kRetransmitStorm:
      p->send.loss_probability = 2e-3;
      p->recv.loss_probability = 2e-3;
      break;
  }
}

GroundTruthEvent DescribeEpisode(const Episode& e) {
  GroundTruthEvent g;
  switch (e.kind) {
    case EpisodeKind::kMicroburst:
      g.kind = "microburst";
      g.detector = "microburst";
      g.detector_kind = "burst";
      break;
    case EpisodeKind::kPfcStormRx:
    case EpisodeKind::kPfcStormTx:
      g.kind = "pfc_storm";
      g.detector = "pfc_storm";
      g.detector_kind = "storm";
      g.direction = e.kind == EpisodeKind::kPfcStormRx ? "rx" : "tx";
      break;
    case EpisodeKind::kEcnTooLate:
      g.kind = "marking_too_late";
      g.detector = "ecn_mistuning";
      g.detector_kind = "marking_too_late";
      break;
    case EpisodeKind::kEcnTooAggressive:
      g.kind = "too_aggressive";
      g.detector = "ecn_mistuning";
      g.detector_kind = "too_aggressive";
      break;
    case EpisodeKind::kFecDegradation:
      g.kind = "fec_degradation";
      g.detector = "link_degradation";
      g.detector_kind = "fec_corrected_rising";
      break;
    case EpisodeKind::kLinkFlap:
      g.kind = "link_flap";
      g.detector = "link_degradation";
      g.detector_kind = "link_downed";
      break;
    case EpisodeKind::kRetransmitStorm:
      g.kind = "retransmit_storm";
      g.detector = "retransmit_spike";
      g.detector_kind = "retransmit_spike";
      break;
  }
  return g;
}

}  // namespace

PortParams QuietParams() { return PortParams{}; }

absl::StatusOr<Scenario> Scenario::Make(absl::string_view name, int ports) {
  if (ports < 1) return absl::InvalidArgumentError("ports: must be at least 1");
  for (const ScenarioDef& d : Defs()) {
    if (name != d.name) continue;
    Scenario s;
    s.name_ = d.name;
    s.ports_ = ports;
    s.period_ns_ = d.period_ms * kMs;
    for (Episode e : d.episodes) {
      e.port %= ports;
      e.start_ns *= kMs;
      e.end_ns *= kMs;
      s.episodes_.push_back(e);
    }
    return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("scenario: unknown scenario '", name, "'; one of ",
                                                 absl::StrJoin(Names(), ", ")));
}

std::vector<std::string> Scenario::Names() {
  std::vector<std::string> out;
  for (const ScenarioDef& d : Defs()) out.push_back(d.name);
  return out;
}

std::string Scenario::Describe() {
  std::string out;
  for (const ScenarioDef& d : Defs())
    absl::StrAppend(&out, "  ", d.name, ": ", d.description, "\n");
  return out;
}

void Scenario::Params(int port, int64_t now_ns, PortParams* params) const {
  *params = QuietParams();
  int64_t t = period_ns_ > 0 ? now_ns % period_ns_ : now_ns;
  for (const Episode& e : episodes_) {
    if (e.port == port && t >= e.start_ns && t < e.end_ns) Apply(e, t, params);
  }
}

std::vector<GroundTruthEvent> Scenario::GroundTruth(int64_t until_ns, int pfc_priority) const {
  std::vector<GroundTruthEvent> out;
  if (period_ns_ <= 0) return out;
  for (int64_t base = 0; base < until_ns; base += period_ns_) {
    for (const Episode& e : episodes_) {
      if (base + e.start_ns >= until_ns) continue;
      GroundTruthEvent g = DescribeEpisode(e);
      g.port_index = e.port;
      if (e.kind == EpisodeKind::kPfcStormRx || e.kind == EpisodeKind::kPfcStormTx ||
          e.kind == EpisodeKind::kMicroburst || e.kind == EpisodeKind::kEcnTooLate ||
          e.kind == EpisodeKind::kEcnTooAggressive) {
        g.priority = pfc_priority;
      }
      g.start_ns = base + e.start_ns;
      g.end_ns = base + e.end_ns;
      out.push_back(std::move(g));
    }
  }
  std::stable_sort(
      out.begin(), out.end(),
      [](const GroundTruthEvent& a, const GroundTruthEvent& b) { return a.start_ns < b.start_ns; });
  return out;
}

}  // namespace fabricsim
