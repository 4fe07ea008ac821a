// `fabricscope events`: detector events (PFC storms, ECN mistuning,
// microbursts, retransmit spikes, link degradation) from the daemon's event
// ring, oldest first.
//
//   fabricscope events [--since=DUR] [--detector=NAME] [--active]
//
// JSON (--output json): a list of
//   {"detector", "kind", "device", "port", "netdev", "priority", "direction",
//    "start_unix_nano", "end_unix_nano" (null while active), "detected_unix_nano"
//    (when the detector declared it), "peak", "summary", "partner" (only where
//    the daemon's topology knows the other end of the event's port: {"system_name",
//    "port_id", "chassis_id", "port_description", "source"})}
// The human output appends the partner to the summary: "(eth2 -> leaf07 Ethernet1/12)".
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
