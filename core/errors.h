// The project's error vocabulary for the OS and for outside input: ONE
// errno -> absl::Status mapping, and ONE status for contents that do not
// parse. Every collector and reader builds its statuses with these two, so
// that the same fault gets the same absl code -- and therefore the same
// `code` label on fabricscope_collector_errors_total
// (collectors/collector.h, CollectorErrorCodeOf) -- whoever met it.
//
// ErrnoToStatus(err, context): the message is "<context>: <strerror(err)>".
//   ENOENT ENODEV ENXIO ENOTDIR           NotFound          the file, device or
//                                                           interface is not there
//                                                           (hot-unplug, a path
//                                                           through a vanished dir)
//   EACCES EPERM                          PermissionDenied
//   EOPNOTSUPP (= ENOTSUP on Linux)       Unimplemented     the device, driver or
//   EPROTONOSUPPORT EAFNOSUPPORT ENOSYS                     kernel does not support
//   ENOTTY EINVAL                                           the request
//   EAGAIN (= EWOULDBLOCK) EINTR EBUSY    Unavailable       try again later
//   ETIMEDOUT                             DeadlineExceeded  no answer in time
//   ENOMEM ENOBUFS                        ResourceExhausted
//   EPROTO EBADMSG                        DataLoss          a malformed message (the
//                                                           unparsable-input rule below)
//   anything else (EIO, ...)              Internal          an I/O failure
//
// Why EINVAL is "unsupported": the requests that can answer EINVAL here are
// reads of sysfs hw_counters attributes (a driver whose firmware cannot
// provide that counter fails the read with EINVAL, e.g. mlx5 on counters of
// a port mode it lacks), SIOCETHTOOL ioctls (older drivers and kernels answer
// an ethtool sub-command they do not implement with EINVAL rather than
// EOPNOTSUPP), and dcbnl/ethtool-netlink requests (a driver without the
// operation or the attribute). All of these requests are fixed structures
// built by our own code, so EINVAL means "this driver does not support this
// request", not "we sent garbage"; it is mapped once, here, so that the
// callers' "ask once, then stop asking" logic sees it the same everywhere.
//
// Unparsable contents (garbage in a counter file, a truncated `ethtool -S`
// text, a netlink reply or attribute too short or malformed): always
// absl::StatusCode::kDataLoss, built with UnparsableError(). Never
// InvalidArgument (that code is for bad arguments and configuration: flags,
// config keys) and never Internal.
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fabricscope {

// Maps an errno value (positive; 0 is not an error and maps to Internal
// "errno 0") to a Status per the table above. Not absl::ErrnoToStatus, whose
// table differs (EINVAL -> InvalidArgument, ...): with an absl::string_view
// argument, argument-dependent lookup sees both, so such calls spell
// fabricscope::ErrnoToStatus.
absl::Status ErrnoToStatus(int err, absl::string_view context);

// The status for contents that do not parse: DataLoss with `message`.
absl::Status UnparsableError(absl::string_view message);

// Whether `status` is UnparsableError's code.
inline bool IsUnparsable(const absl::Status& status) { return absl::IsDataLoss(status); }

}  // namespace fabricscope
