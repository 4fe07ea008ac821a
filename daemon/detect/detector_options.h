// DetectorOptions: the detectors' settings (Config::detect; the --detectors,
// --pfc-storm-*, --microburst-*, --ecn-*, --retransmit-*, --fec-*, --link-hold
// and --max-events options). What each threshold means is documented with its
// detector (daemon/detect/<name>_detector.h).
//
// The names of the detectors live in one place, the registration list
// (daemon/detect/register_all.cc): the default of `enabled`, Validate() and the
// --detectors help text take them from there (BuiltinDetectorNames()).
//
// Thread-safety: a plain value.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fabricscope {

// The names of the built-in detectors, in registration order
// (daemon/detect/register_all.cc; defined in detector_registry.cc).
std::vector<std::string> BuiltinDetectorNames();

struct DetectorOptions {
  // --detectors: the enabled detectors (all registered ones by default).
  std::vector<std::string> enabled = BuiltinDetectorNames();

  double pfc_storm_fraction = 0.8;
  absl::Duration pfc_storm_detection = absl::Milliseconds(200);
  absl::Duration pfc_storm_restoration = absl::Milliseconds(200);

  // pause_role (daemon/detect/pause_role_detector.h): a port/priority is a
  // pause originator (tx) or receiver (rx) while its pause fraction is >=
  // pause_role_fraction for pause_role_detection; an originator's own rx
  // pause fraction must stay < pause_role_clear_fraction.
  double pause_role_fraction = 0.5;
  double pause_role_clear_fraction = 0.05;
  absl::Duration pause_role_detection = absl::Seconds(1);
  absl::Duration pause_role_restoration = absl::Seconds(2);

  std::vector<std::string> microburst_signals = {"port_bytes",       "netdev_bytes",
                                                 "pfc_pause_frames", "ecn_marked_packets",
                                                 "cnp_sent",         "discards"};
  absl::Duration microburst_gap = absl::Milliseconds(200);

  absl::Duration ecn_window = absl::Seconds(1);
  absl::Duration ecn_detection = absl::Milliseconds(300);
  absl::Duration ecn_restoration = absl::Seconds(1);
  double ecn_drop_floor = 100;       // discarded packets per second
  double ecn_mark_ratio = 0.1;       // marks + CNPs per discard below which marking is "flat"
  double ecn_cnp_floor = 1000;       // CNPs per second
  double ecn_low_utilization = 0.3;  // of the port's link rate
  double default_link_gbps = 100;    // when the port's rate is unknown

  absl::Duration retransmit_window = absl::Seconds(1);
  absl::Duration retransmit_baseline = absl::Seconds(30);
  absl::Duration retransmit_restoration = absl::Seconds(1);
  double retransmit_floor = 10;  // events per second
  double retransmit_factor = 4;

  double fec_corrected_factor = 10;
  double fec_block_floor = 100;  // corrected blocks per second
  double fec_bit_floor = 10000;  // corrected bits per second
  absl::Duration fec_baseline = absl::Seconds(60);
  absl::Duration link_hold = absl::Seconds(2);

  size_t max_events = 10000;  // --max-events: the event ring

  bool Enabled(absl::string_view detector) const;
  // Checks names (an unknown detector is an error that lists the registered
  // ones; so is a registration list with a duplicate name) and ranges; the
  // error names the option.
  absl::Status Validate() const;
};

}  // namespace fabricscope
