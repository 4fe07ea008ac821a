// The InfiniBand link-partner source (opt-in, --ib-mad-topology): for each
// ACTIVE InfiniBand port of the inventory, the node at the other end of the
// link, asked with directed-route SMPs one hop out of the port
// (collectors/ib_mad.h) through an SmpTransport (the real one: libibumad on
// /dev/infiniband/umad*, which needs that device's permissions).
//
// The partner of port (device, port):
//   device, port, netdev  the port (netdev from the inventory's PortInfo)
//   source                "ib_mad"
//   chassis_id            the peer's NodeGUID, "0x%016x" (the switch or HCA
//                         identity as ibnetdiscover and the SM print it)
//   system_name           the peer's NodeDescription, trimmed of white space
//                         (e.g. "MF0;leaf07:MQM8700/U1" or "node12 mlx5_0")
//   port_id               the peer's NodeInfo.LocalPortNum, decimal: the
//                         peer's port number at the far end of the link
//   port_description      the peer's node type: "switch", "ca" or "router"
//
// Queries: each call sends one SubnGet(NodeInfo) per eligible port (port
// state ACTIVE, link layer InfiniBand, present; other ports are skipped
// without I/O), each with a timeout of `query_timeout`. The NodeDescription is
// cached per NodeGUID: a SubnGet(NodeDescription) goes out only when the
// peer's NodeGUID is new (first contact, re-cabling) or its cached
// description is `description_refresh_calls` calls old (a renamed switch). So
// the steady state is one SMP per port per call, and at most two. The whole
// call stops sending after `call_budget` (the remaining ports keep their
// previous partner and are asked first on the next call).
//
// Errors:
//  - the transport says the host has no umad support at all
//    (UnimplementedError) or umad is not accessible (PermissionDenied):
//    Partners returns that status, and returns it again at once, without
//    any I/O, until `unavailable_retry_calls` calls after the failing one;
//    that call tries the transport again (with 30 and the 10 s config tick:
//    every 5 minutes; 0: never again). The partners known before are
//    forgotten. The topology collector reports such a status once
//    (collectors/topology_sources.h); both codes mean "this source cannot
//    work on this host", not a per-tick error.
//  - anything else is per port (a timeout, a malformed reply, a MAD status):
//    it goes to `port_error` (status, key "<device>/<port>"), which the
//    collector counts and logs like PollContext::Error; the other ports are
//    still asked. A port whose query failed keeps its previous partner for
//    up to `keep_partner_failed_calls` consecutive failed calls (a lost SMP
//    does not end the series), then has none until a query succeeds.
//
// Thread-safety: a source and a transport are used by one thread at a time
// (the config tier). Ownership: the source owns its transport; the clock
// outlives the source.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collectors/topology_sources.h"

namespace fabricscope {

class Clock;

// Sends one SMP out of a local port and returns the reply: the seam between
// the source and libibumad.
class SmpTransport {
 public:
  virtual ~SmpTransport() = default;
  // Sends `request` (one kMadSize-byte directed-route SMP) on QP0 of
  // (device, port) and waits at most `timeout` for the reply with the same
  // transaction id (SameMadTransaction); returns the reply's MAD bytes.
  // Errors: UnimplementedError when this host has no umad support at all (no
  // kernel ib_umad, no /dev/infiniband/umad* device); PermissionDenied when
  // the umad device cannot be opened for lack of permission;
  // DeadlineExceeded when no reply came in time; NotFound when the port has
  // no umad device; others as core/errors.h maps the errno.
  virtual absl::StatusOr<std::vector<uint8_t>> Query(const std::string& device, uint32_t port,
                                                     absl::Span<const uint8_t> request,
                                                     absl::Duration timeout) = 0;
};

// The transport over libibumad: per (device, port) one umad port opened
// (umad_open_port) with one agent registered for class 0x81 version 1,
// kept open between calls and closed after an error other than a timeout
// (then reopened by the next query). umad_send with the timeout and no
// retries; umad_recv until the reply with the request's transaction id, the
// kernel's timeout notice, or the deadline. umad support is checked with
// umad_init and the kernel's /sys/class/infiniband_mad/abi_version (libibumad
// reads the fixed /sys and /dev paths, not --sysfs-root).
std::unique_ptr<SmpTransport> MakeUmadSmpTransport();

// The same seam for PerfMgt GMPs (collectors/ib_pma.h) to a port's own PMA:
// an agent for class 0x04 version 1, each request LID-routed to the port's
// base LID (umad_get_port) on QP1 with the GSI Q_Key 0x80010000.
// FailedPrecondition for a port without a LID (no subnet manager yet).
std::unique_ptr<SmpTransport> MakeUmadPmaTransport();

struct IbMadSourceOptions {
  // Timeout of each SMP (the reply from the next hop normally takes well
  // under a millisecond).
  absl::Duration query_timeout = absl::Milliseconds(150);
  // No SMP goes out after this much time spent in one call.
  absl::Duration call_budget = absl::Seconds(2);
  // Refresh a cached NodeDescription after this many calls (about 5 min at
  // the default 10 s config tick).
  int description_refresh_calls = 30;
  // A port whose query failed keeps its previous partner this many calls.
  int keep_partner_failed_calls = 2;
  // After Unimplemented / PermissionDenied from the transport, the call this
  // many calls later tries the transport again; the calls in between answer
  // the same status without I/O. 0 (or less): never try again.
  int unavailable_retry_calls = 30;
  // Per-port errors (see above); null: dropped.
  std::function<void(const absl::Status& status, absl::string_view key)> port_error;
};

// A source named "ib_mad" over `transport` (not null); `clock` (not null)
// measures the call budget.
std::unique_ptr<LinkPartnerSource> MakeIbMadSource(IbMadSourceOptions options,
                                                   std::unique_ptr<SmpTransport> transport,
                                                   Clock* clock);

// The same over MakeUmadSmpTransport() and the process's RealClock.
std::unique_ptr<LinkPartnerSource> MakeIbMadSource(IbMadSourceOptions options);

}  // namespace fabricscope
