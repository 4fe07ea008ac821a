// The canonical signal table: one place that says what every raw counter
// means. A rule maps (source, raw name) to a Prometheus family, the counter's
// width/wrap behaviour, the scale to the family's unit, and label values
// derived from the name (priority, direction, counter, reason, lane, ...).
// device/port/netdev labels always come from where the counter was read.
//
// Collectors call MapCounter() once per series at discovery, never per tick.
// The table is rendered into docs/metrics.md (RenderSignalTable) and tested.
//
// Vendors. A rule may belong to one driver (SignalRule::driver: "bnxt_re",
// "ionic", "irdma", "bnxt_en", "ice", ...): the vendor maps translate each
// vendor's raw names into the same families and canonical label values as the
// mlx5 names (bnxt_re `to_retransmits` is rdma_errors{counter=
// "local_ack_timeout_err"}), so the detectors and the correlator need no
// per-vendor code. The lookup is a function of (source, raw name, driver):
// with a known driver, that driver's rules come first, then the generic ones;
// with an unknown driver ("": recordings carry none) the generic rules come
// first, then every driver's rules but its "not collected" ones, then the
// generic catch-alls (a name only one driver uses still maps; a name several
// share takes its generic meaning).
// The driver of an RDMA device comes from RdmaDriverOf (the one driver
// probe's table).
//
// Pause-time estimates. ice (E810) and i40e (X710/XL710/X722) count PFC XOFF
// frames per priority but no pause time, which the pause fraction (the
// pfc_storm and pause_role detectors, fabricscope_pfc_pause_fraction_peak,
// the correlator's pause class) is made of. Their XOFF rules carry
// pause_quanta = 0xFFFF: each XOFF frame holds the priority for at most 65535
// quanta x 512 bit times at the link rate (335.5 us at 100 Gb/s, 1.34 ms at
// 25 Gb/s). From such a counter the ethtool collector registers a second
// series, source "pause_estimate", raw name "<frames name>@<link Mb/s>Mbps"
// (PauseEstimateKey), that appends the same raw frame count; MapCounter
// resolves it to fabricscope_pfc_pause_seconds_total with the frames' priority
// and direction, scale = quanta x 512 / link bits per second, and
// Signal::estimated. It is an upper bound: a XON frame (counted in
// fabricscope_pfc_pause_transitions_total) ends a pause early, a peer may
// send fewer quanta than 0xFFFF, and a peer that refreshes XOFF before the
// quanta expire counts the overlap twice (the fraction is clamped to 1). The
// link rate is part of the key, so a rate change starts a new series.
//
// Thread-safety: the table is immutable after static initialisation.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "core/metrics.h"
#include "core/series.h"

namespace fabricscope {

// What a series means, resolved for one SeriesKey.
struct Signal {
  const MetricSpec* family = nullptr;
  // The family name without "fabricscope_" and "_total" (the `signal` label of
  // the aggregate gauges, e.g. "pfc_pause_seconds").
  std::string name;
  CounterSemantics semantics;
  double scale = 1.0;  // raw unit -> family unit (4 for octets/4, 1e-6 for microseconds)
  // Values aligned with family->labels.
  std::vector<std::string> label_values;
  // The raw value 0xFFFFFFFFFFFFFFFF is the source's "invalid" marker (ionic
  // firmware), never a value: collectors skip it (no sample: the series is
  // blind for that poll) and count it.
  bool all_ones_invalid = false;
  // Pause frames that each request a known pause: the pause quanta (512 bit
  // times each) one frame asks for, else 0. Set on the ice and i40e XOFF frame
  // counters (0xFFFF, the standard quanta): they count no pause time, so the
  // ethtool collector derives an estimated pause-time series from them
  // (PauseEstimateKey, "Pause-time estimates" below).
  uint32_t pause_quanta = 0;
  // A derived estimate rather than a reading (the pause time of a
  // pause_estimate series).
  bool estimated = false;

  // The value of label `label`, or "" if the family has no such label.
  absl::string_view Label(absl::string_view label) const;
};

struct SignalRule {
  // Where the counter is read: "hw_counters", "counters", "ethtool", ...
  absl::string_view source;
  // The raw name: matched exactly, or as a full-match regex (ECMAScript) when
  // `regex` is true; capture groups are referenced as $1, $2 in label values.
  absl::string_view pattern;
  bool regex = false;
  // nullptr: a known name deliberately not collected (a gauge among
  // counters, a counter the driver documents as always 0): MapCounter
  // returns nullopt, so no later rule (no catch-all) claims it.
  const MetricSpec* family = nullptr;
  CounterSemantics semantics;
  double scale = 1.0;
  // Label values other than device/port/netdev. "$0" is the whole raw name.
  std::vector<std::pair<absl::string_view, absl::string_view>> labels;
  absl::string_view unit;  // the raw unit, for the documentation
  // The driver whose name this is ("": generic, any driver).
  absl::string_view driver;
  // A catch-all: tried after every other rule of its source when the driver
  // is unknown.
  bool catch_all = false;
  // See Signal::all_ones_invalid.
  bool all_ones_invalid = false;
  // See Signal::pause_quanta.
  uint32_t pause_quanta = 0;
};

// All rules, in match order (the first match wins).
const std::vector<SignalRule>& SignalRules();

// Resolves `key` through the table for a device of `driver` ("" when
// unknown, see "Vendors" above); nullopt when no rule matches or the
// matching rule says "not collected".
std::optional<Signal> MapCounter(const SeriesKey& key, absl::string_view driver = {});

// The table's driver name for a device whose kernel driver (the basename of
// sysfs `device/driver`: the PCI function's driver or, for an auxiliary
// device, the RDMA driver itself) is `kernel_driver`, else guessed from the
// device name's prefix ("bnxt_re0", "ionic_0", "irdma1", "mlx5_0"); "" when
// neither says. E.g. "bnxt_en" -> "bnxt_re", "ice" -> "irdma", "mlx5_core" ->
// "mlx5".
std::string RdmaDriverOf(absl::string_view kernel_driver, absl::string_view device);

// The source of the derived pause-time estimates ("Pause-time estimates").
inline constexpr absl::string_view kPauseEstimateSource = "pause_estimate";

// The key of the pause-time estimate of the pause-frame series `frames_key`
// (whose signal has pause_quanta > 0) on a link of `link_bps` bits per second:
// the same device/port/netdev, source kPauseEstimateSource, name
// "<frames name>@<link Mb/s>Mbps". nullopt when link_bps is below 1 Mb/s.
std::optional<SeriesKey> PauseEstimateKey(const SeriesKey& frames_key, double link_bps);

// A link rate as sysfs prints it ("100 Gb/sec (4X EDR)", "25 Gb/sec") in bits
// per second; 0 when it does not parse.
double ParseLinkRateBps(absl::string_view rate);

// The table in Markdown, appended to the metric reference.
std::string RenderSignalTable();

// The derived signal name of a family ("fabricscope_x_total" -> "x").
std::string SignalNameOf(absl::string_view family_name);

// Families declared by the table (used by collectors and tests).
namespace families {
extern const MetricSpec& kPortInfo;
extern const MetricSpec& kPortBytes;
extern const MetricSpec& kPortPackets;
extern const MetricSpec& kPortUnicastPackets;
extern const MetricSpec& kPortMulticastPackets;
extern const MetricSpec& kIbPortErrors;
extern const MetricSpec& kIbPortXmitWait;
extern const MetricSpec& kEcnMarked;
extern const MetricSpec& kCnpSent;
extern const MetricSpec& kCnpHandled;
extern const MetricSpec& kCnpIgnored;
extern const MetricSpec& kRdmaErrors;
extern const MetricSpec& kRdmaRequests;
extern const MetricSpec& kDiscards;
extern const MetricSpec& kNetdevBytes;
extern const MetricSpec& kNetdevPackets;
extern const MetricSpec& kNetdevDrops;
extern const MetricSpec& kNetdevErrors;
extern const MetricSpec& kPfcPauseFrames;
extern const MetricSpec& kPfcPauseSeconds;
extern const MetricSpec& kPfcPauseTransitions;
extern const MetricSpec& kPauseStormEvents;
extern const MetricSpec& kRxBufferPassedThreshold;
extern const MetricSpec& kFecCorrectedBlocks;
extern const MetricSpec& kFecUncorrectableBlocks;
extern const MetricSpec& kPhyCorrectedBits;
extern const MetricSpec& kPhySymbolErrors;
extern const MetricSpec& kLinkDownEvents;
extern const MetricSpec& kPfcEnabled;
extern const MetricSpec& kEcnEnabled;
extern const MetricSpec& kHwCountersLifespan;
extern const MetricSpec& kProcessQpCounter;
}  // namespace families

}  // namespace fabricscope
