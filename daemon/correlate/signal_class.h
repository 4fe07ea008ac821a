// Which series the correlator judges, and how.
//
// Every series in the store has a Signal (core/signals.h) that names its
// Prometheus family. The correlator sorts families into classes:
//
//   class          families (fabricscope_<...>)                       verdict rule
//   pause          pfc_pause_seconds_total (ethtool *_pause_duration)   pause fraction
//   pause_frames   pfc_pause_frames_total (and other *pause* counters
//                  except *pause_transitions*, which is context)        rate
//   pause_storm    *pause_storm*                                        rate
//   ecn            ecn_marked_packets_total                             rate
//   cnp            cnp_sent_total, cnp_handled_total, cnp_ignored_total rate
//   discards       discards_total                                       rate
//   drops          netdev_drops_total, netdev_errors_total              rate
//   retransmits    rdma_errors_total{counter=out_of_sequence,
//                  packet_seq_err, local_ack_timeout_err,
//                  implied_nak_seq_err, roce_adp_retrans*}              rate
//   port_errors    ib_port_errors_total, phy_symbol_errors_total,
//                  link_down_events_total                               rate
//   xmit_wait      ib_port_xmit_wait_ticks_total                        rate
//   fec            *fec*uncorrect* (family or label)                    rate
//   context        bytes, packets, requests, other rdma_errors, other
//                  fec counters: reported, never a verdict              —
//   ignored        gauges (configuration, state)                        —
//
// Matching is on the family name (and the `counter` label for
// rdma_errors_total), so families added by later collectors fall into the
// right class when they follow the naming conventions above.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

#include "core/signals.h"

namespace fabricscope {

enum class SignalClass : uint8_t {
  kPause,
  kPauseFrames,
  kPauseStorm,
  kEcn,
  kCnp,
  kDiscards,
  kDrops,
  kRetransmits,
  kPortErrors,
  kXmitWait,
  kFec,
  kContext,
  kIgnored,
};
inline constexpr int kNumSignalClasses = 13;

// Stable lower-case name ("pause", "ecn", ...), used in config keys
// (--correlate-floors) and in query output.
absl::string_view SignalClassName(SignalClass c);
std::optional<SignalClass> ParseSignalClass(absl::string_view name);

// True for the classes that can make a span's verdict "fabric".
inline bool IsCongestionClass(SignalClass c) {
  return c != SignalClass::kContext && c != SignalClass::kIgnored;
}

// The class of a series' signal.
SignalClass ClassifySignal(const Signal& signal);

// The congestion group of a congestion class, for the blind rule of the
// correlator (correlator.h: a port whose whole group is blind makes a span
// "unknown"): "pause" (pause, pause_frames, pause_storm, xmit_wait), "ecn"
// (ecn, cnp), "drops" (discards, drops), "retransmits", "port_errors"
// (port_errors, fec); "" for context and ignored.
absl::string_view BlindGroupName(SignalClass c);

}  // namespace fabricscope
