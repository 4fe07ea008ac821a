// `fabricscope ports [--server HOST:PORT] [--output human|json]`: the RDMA
// port inventory of the host (Query.Ports).
//
// JSON: [{"device", "port", "netdev", "link_layer", "state", "rate", "present",
// "partner"}]; "partner" (the other end of the link: {"system_name", "port_id",
// "chassis_id", "port_description", "source"}) only where the daemon's
// topology knows it. The human output appends "-> leaf07 Ethernet1/12".
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "fabricscope/v1/query.pb.h"
#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

int RunPorts(const CliContext& ctx, const std::vector<std::string>& args);
std::string PortsJson(const v1::PortsResponse& response);
std::string PortsHuman(const v1::PortsResponse& response);

}  // namespace fabricscope::cli
