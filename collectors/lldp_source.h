// The LLDP link-partner source: the neighbours lldpd (https://lldpd.github.io)
// has learned, read through its client library liblldpctl over lldpd's
// control socket (--lldpd-socket, default /run/lldpd.socket).
//
// Partners() opens a fresh connection to the socket on every call, asks for
// the interfaces lldpd manages (GET_INTERFACES) and, for each, the interface
// with its neighbours (GET_INTERFACE), and closes the connection. A fresh
// connection per call (the config tier, every 10 s by default) is what makes
// the source follow lldpd across restarts without any reconnect logic, and a
// unix-socket connect costs microseconds.
//
// Every neighbour lldpd knows on every interface it manages becomes a
// LinkPartner{netdev = interface name, source = "lldp", chassis_id,
// system_name, port_id, port_description}; device and port stay empty (the
// topology collector fills them from the inventory and drops netdevs it does
// not watch). Chassis and port ids are lldpd's string renderings: a MAC
// subtype as "aa:bb:cc:dd:ee:ff", an interface name or locally assigned id as
// the string, a network address as the address. Neighbours lldpd hides (its
// "smart" filtering when one neighbour speaks several protocols) are skipped,
// as `lldpcli show neighbors` does. When one interface has several visible
// neighbours (a hub, a misbehaving switch, LLDP and CDP from different
// devices), one is chosen deterministically: an LLDP neighbour before one
// learned by another protocol (CDP, EDP, FDP, SONMP: off unless lldpd was
// started with -c/-e/-f/-s), then the smallest (chassis_id, port_id,
// system_name, port_description) in byte order, so the choice does not depend
// on the order lldpd learned them in. The result is ordered by netdev.
//
// Errors (codes as collectors/collector.h maps them):
//  - UnimplementedError("lldpd not reachable at <socket>: <reason>") when
//    nothing listens there: the socket file is missing (ENOENT, ENOTDIR) or
//    refuses the connection (ECONNREFUSED: a stale socket file, or not a
//    socket). The collector reports that once; the source tries again on the
//    next call (lldpd may start later), and a failed attempt costs one
//    socket() + connect().
//  - PermissionDenied: the socket is there but not ours to open (lldpd makes
//    it 0770 root:_lldpd; the daemon's user needs the _lldpd group).
//  - DeadlineExceeded: lldpd accepted the connection but the whole exchange
//    did not finish within `timeout` (a wedged lldpd); Unavailable: lldpd
//    closed the connection mid-exchange (it stopped or restarted) or its
//    backlog is full; DataLoss (UnparsableError): an answer liblldpctl
//    cannot unmarshal; InvalidArgument: a socket path longer than a unix
//    socket address holds.
//
// Bounded: the socket is non-blocking and liblldpctl is given our own send and
// receive callbacks, which poll() the socket against one absolute deadline
// (steady clock) per Partners() call, `timeout` after it started. So a connect,
// a send or a receive that would hang ends at that deadline, and one call
// never blocks the config tier for longer than `timeout` (plus scheduling
// noise). liblldpctl's default synchronous callbacks would block in poll(-1).
//
// liblldpctl logs to stderr by default; the first source created routes its
// log lines, process-wide (lldpctl_log_callback), to the daemon's log at debug
// level, component "lldp".
//
// Thread-safety: as LinkPartnerSource (one thread at a time); different
// sources may be used concurrently. Ownership: the source owns nothing between
// calls (no connection is kept open).
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "collectors/topology_sources.h"

namespace fabricscope {

// The default bound on one Partners() call (connect + every exchange).
inline constexpr absl::Duration kLldpDefaultTimeout = absl::Seconds(1);

// The LLDP source over lldpd's control socket at `socket_path`. No I/O here.
std::unique_ptr<LinkPartnerSource> MakeLldpSource(std::string socket_path,
                                                  absl::Duration timeout = kLldpDefaultTimeout);

}  // namespace fabricscope
