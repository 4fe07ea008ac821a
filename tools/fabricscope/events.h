// `fabricscope events`: detector events (PFC storms, ECN mistuning,
// microbursts, retransmit spikes, link degradation) from the daemon's event
// ring, oldest first, one line per episode.
//
//   fabricscope events [--since=DUR] [--detector=NAME] [--active]
//
// JSON (--output json): a list of
//   {"detector", "kind", "device", "port", "netdev", "priority", "direction",
//    "start_unix_nano", "end_unix_nano" (null while active), "detected_unix_nano"
//    (when the detector declared it), "peak", "summary", "signals" (what the
//    episode was seen in, with the counter/reason of each: ["pfc_pause_frames
//    rx prio 3", "discards rx_discards_phy"]), "partner" (only where the
//    daemon's topology knows the other end of the event's port: {"system_name",
//    "port_id", "chassis_id", "port_description", "source"})}
// The daemon already merges the events of one episode on one port (several
// signals, detectors; daemon/detect/event_log.h); an episode is listed (and
// filtered by --detector) under its highest-ranked event's detector. The human output also folds
// events with the same detector, kind and place that overlap in time into one
// line (from an older daemon), appends the episode's signals when there is
// more than one ("[signals: pfc_pause_frames rx prio 3, discards
// rx_discards_phy]") and the partner: "(eth2 -> leaf07 Ethernet1/12)".
#pragma once

#include <string>
#include <vector>

#include "fabricscope/v1/query.pb.h"
#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunEvents(const CliContext& ctx, const std::vector<std::string>& args);

// Renderers (exposed for tests and `analyze`).
std::string EventJson(const v1::Event& e);
std::string EventsJson(const v1::EventsResponse& response);
std::string EventsHuman(const v1::EventsResponse& response);

}  // namespace fabricscope::cli
