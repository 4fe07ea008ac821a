// The canonical signal table: one place that says what every raw counter
// means. A rule maps (source, raw name) to a Prometheus family, the counter's
// width/wrap behaviour, the scale to the family's unit, and label values
// derived from the name (priority, direction, counter, reason, lane, ...).
// device/port/netdev labels always come from where the counter was read.
//
// Collectors call MapCounter() once per series at discovery, never per tick.
// The table is rendered into docs/metrics.md (RenderSignalTable) and tested.
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

  // The value of label `label`, or "" if the family has no such label.
  absl::string_view Label(absl::string_view label) const;
};

struct SignalRule {
  absl::string_view source;
  // The raw name: matched exactly, or as a full-match regex (ECMAScript) when
  // `regex` is true; capture groups are referenced as $1, $2 in label values.
  absl::string_view pattern;
  bool regex = false;
  const MetricSpec* family = nullptr;
  CounterSemantics semantics;
  double scale = 1.0;
  // Label values other than device/port/netdev. "$0" is the whole raw name.
  std::vector<std::pair<absl::string_view, absl::string_view>> labels;
  absl::string_view unit;  // the raw unit, for the documentation
};

// All rules, in match order (the first match wins).
const std::vector<SignalRule>& SignalRules();

// Resolves `key` through the table; nullopt when no rule matches.
std::optional<Signal> MapCounter(const SeriesKey& key);

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
}  // namespace families

}  // namespace fabricscope
