// `fabricscoped --explain-cost`: the read plan of the RDMA collectors on the
// host it runs on, and what each read costs the device by the kernel's rules
// (ARCHITECTURE.md, "What a read costs the device"), so that an SRE can check
// the cost before deploying. It discovers the devices as the daemon would
// (same flags: --sysfs-root, --collectors, --rdma-per-process, the tier
// intervals, --device-query-budget ...), asks each enabled collector for its
// ReadPlan() and prints one line per port, read and tier, then the totals per
// device against the budget. Nothing is polled; the daemon is not started.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "daemon/config.h"

namespace fabricscope {

absl::StatusOr<std::string> ExplainCost(const Config& config);

}  // namespace fabricscope
