#include "daemon/correlate/signal_class.h"

#include "absl/strings/match.h"

namespace fabricscope {
namespace {

constexpr absl::string_view kNames[kNumSignalClasses] = {
    "pause",       "pause_frames", "pause_storm", "ecn", "cnp",     "discards", "drops",
    "retransmits", "port_errors",  "xmit_wait",   "fec", "context", "ignored",
};

bool IsRetransmitCounter(absl::string_view counter) {
  return counter == "out_of_sequence" || counter == "packet_seq_err" ||
         counter == "local_ack_timeout_err" || counter == "implied_nak_seq_err" ||
         absl::StartsWith(counter, "roce_adp_retrans");
}

}  // namespace

absl::string_view SignalClassName(SignalClass c) { return kNames[static_cast<int>(c)]; }

std::optional<SignalClass> ParseSignalClass(absl::string_view name) {
  for (int i = 0; i < kNumSignalClasses; ++i) {
    if (kNames[i] == name) return static_cast<SignalClass>(i);
  }
  return std::nullopt;
}

absl::string_view BlindGroupName(SignalClass c) {
  switch (c) {
    case SignalClass::kPause:
    case SignalClass::kPauseFrames:
    case SignalClass::kPauseStorm:
    case SignalClass::kXmitWait:
      return "pause";
    case SignalClass::kEcn:
    case SignalClass::kCnp:
      return "ecn";
    case SignalClass::kDiscards:
    case SignalClass::kDrops:
      return "drops";
    case SignalClass::kRetransmits:
      return "retransmits";
    case SignalClass::kPortErrors:
    case SignalClass::kFec:
      return "port_errors";
    case SignalClass::kContext:
    case SignalClass::kIgnored:
      return "";
  }
  return "";
}

SignalClass ClassifySignal(const Signal& signal) {
  if (signal.family == nullptr) return SignalClass::kIgnored;
  if (signal.semantics.kind == CounterKind::kGauge || signal.family->type != MetricType::kCounter) {
    return SignalClass::kIgnored;
  }
  const std::string& f = signal.family->name;
  const absl::string_view counter = signal.Label("counter");
  if (absl::StrContains(f, "pause_storm")) return SignalClass::kPauseStorm;
  if (absl::StrContains(f, "pause_transition")) return SignalClass::kContext;
  if (absl::StrContains(f, "pause") && absl::StrContains(f, "_seconds")) return SignalClass::kPause;
  if (absl::StrContains(f, "pause")) return SignalClass::kPauseFrames;
  if (f == "fabricscope_ecn_marked_packets_total") return SignalClass::kEcn;
  if (absl::StartsWith(f, "fabricscope_cnp_")) return SignalClass::kCnp;
  if (f == "fabricscope_discards_total") return SignalClass::kDiscards;
  if (f == "fabricscope_netdev_drops_total" || f == "fabricscope_netdev_errors_total") {
    return SignalClass::kDrops;
  }
  if (f == "fabricscope_rdma_errors_total") {
    return IsRetransmitCounter(counter) ? SignalClass::kRetransmits : SignalClass::kContext;
  }
  if (f == "fabricscope_ib_port_errors_total" || f == "fabricscope_phy_symbol_errors_total" ||
      f == "fabricscope_link_down_events_total") {
    return SignalClass::kPortErrors;
  }
  if (f == "fabricscope_ib_port_xmit_wait_ticks_total") return SignalClass::kXmitWait;
  if (absl::StrContains(f, "fec")) {
    if (absl::StrContains(f, "uncorrect") || absl::StrContains(counter, "uncorrect") ||
        absl::StrContains(signal.Label("kind"), "uncorrect") ||
        absl::StrContains(signal.Label("result"), "uncorrect")) {
      return SignalClass::kFec;
    }
    return SignalClass::kContext;
  }
  return SignalClass::kContext;
}

}  // namespace fabricscope
