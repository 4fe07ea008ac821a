// The header of a recording (docs/recording.md, "The recording line"): what
// the daemon knew when it wrote the recording and the offline analysis would
// otherwise lack, so that `fabricscope analyze` answers as the live daemon did:
//
//   - the recorded window (a span whose baseline window starts before it is
//     "baseline incomplete" offline, not judged);
//   - the ports with their link rates (the ECN detector's utilization), the
//     link partners and the PCI/GPU placement (GPU-scoped spans);
//   - the pods holding the host's devices and processes at the end of the
//     window (pod-scoped spans, store/pod_table.h);
//   - every daemon option, rendered as its flag takes it: the correlator's,
//     the stall learner's and the detectors' settings are applied offline
//     (ApplyRecordedOptions), the rest is there for the reader;
//   - the stall learner's bounds at the end of the window, and the version.
//
// `fabricscope record` writes it as the first line ({"recording":{...}},
// made by the daemon: RecordChunk.header_line); readers that only feed
// samples and spans skip it. The spans of such a recording carry the
// daemon's own stall judgement ({"span":..,"judgement":..}, recording.h).
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/correlate/correlation.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/detect/detector_options.h"
#include "store/port_inventory.h"

namespace fabricscope {

struct JsonValue;

struct RecordingHeader {
  std::string version;  // the daemon's ("0.1.0 (abc1234)")
  // The window recorded.
  int64_t from_unix_nano = 0;
  int64_t to_unix_nano = 0;
  std::vector<PortInfo> ports;
  HostTopology topology;
  PodTable pods;
  // Every daemon option and its value, rendered as its flag takes it
  // ("correlate-rate-factor" -> "3"), in --help order.
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<LearnedBound> stall_bounds;
};

// {"recording":{...}} (no newline).
std::string FormatRecordingHeaderLine(const RecordingHeader& header);
// The value of a line's "recording" member.
absl::StatusOr<RecordingHeader> RecordingHeaderFromJson(const JsonValue& object);

// What the offline analysis takes from the options: the settings verdicts,
// stalls and events depend on.
struct AnalysisSettings {
  CorrelationOptions correlation;
  StallLearnerOptions learn;
  DetectorOptions detect;
};

// Applies the recorded options that AnalysisSettings holds (baseline-window,
// correlate-*, the three tier intervals (the correlator's gap bound, as the
// daemon derives it), stall-*, detectors, max-events and every detector's own
// options); the others are ignored. A value that does not parse is an error
// that names the option (nothing is half-applied).
absl::Status ApplyRecordedOptions(const std::vector<std::pair<std::string, std::string>>& options,
                                  AnalysisSettings* settings);

}  // namespace fabricscope
