// The ethtool stats-source seam (STYLE.md "OS seams"): where the ethtool
// collector gets a netdev's `ethtool -S` statistics and its standard
// pause/FEC statistics.
//
//  - MakeKernelEthtoolSource(): production. ETHTOOL_GSTATS through the
//    SIOCETHTOOL ioctl; the string set (ETHTOOL_GSSET_INFO + ETHTOOL_GSTRINGS)
//    is resolved on the first read and again whenever the count the kernel
//    reports in the GSTATS reply changes (PFC or global pause toggled, channel
//    count changed), plus every `names_refresh` to catch a same-count swap.
//    Standard stats through ethtool generic netlink (ethtool_netlink.h); the
//    link speed through ETHTOOL_GLINKSETTINGS.
//  - MakeDirEthtoolSource(dir): tests and the simulator. Every regular file
//    DIR/<netdev> holds `ethtool -S` text (ethtool_text.h) and is re-read on
//    every tick (the writer rewrites it); names are re-resolved only when the
//    name set changes. A file whose last line has no newline is treated as
//    truncated mid-write (UnparsableError), as is garbage. No standard
//    stats (HasStandardStats() is false). The link speed is the netdev's
//    sysfs attribute <sysfs_root>/class/net/<netdev>/speed (Mb/s), which the
//    kernel serves from the same link settings.
//
// Status codes of Read/ReadPause/ReadFec: those of core/errors.h --
// ErrnoToStatus for a failed ioctl/open/read (NotFound: netdev or file gone;
// PermissionDenied; Unimplemented: the device/kernel does not support the
// request, EOPNOTSUPP or EINVAL; Internal and friends: anything else) and
// UnparsableError (DataLoss) for unparsable content.
//
// Thread-safety: a source and its readers are used from one thread at a time
// (the collector's medium tier).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collectors/ethtool_netlink.h"

namespace fabricscope {

// The `ethtool -S` statistics of one netdev.
class EthtoolStatsReader {
 public:
  virtual ~EthtoolStatsReader() = default;

  // Reads the current values. On success values()[i] is the value of
  // names()[i], and *names_changed tells whether names() was (re-)resolved by
  // this read (always true on the first successful read). On failure names()
  // and values() keep their previous contents.
  virtual absl::Status Read(bool* names_changed) = 0;

  virtual const std::vector<std::string>& names() const = 0;
  // Valid until the next Read.
  virtual absl::Span<const uint64_t> values() const = 0;
};

class EthtoolStatsSource {
 public:
  virtual ~EthtoolStatsSource() = default;

  // Netdevs the source offers on its own: the dir source lists DIR; the
  // kernel source offers none (the collector asks for the RDMA netdevs).
  virtual absl::StatusOr<std::vector<std::string>> ListNetdevs() = 0;

  // A reader for `netdev`. No I/O until the first Read.
  virtual std::unique_ptr<EthtoolStatsReader> Open(const std::string& netdev) = 0;

  // Whether ReadPause/ReadFec can work at all (false: do not ask, do not count).
  virtual bool HasStandardStats() const = 0;
  virtual absl::StatusOr<PauseStats> ReadPause(const std::string& netdev) = 0;
  virtual absl::StatusOr<FecStats> ReadFec(const std::string& netdev) = 0;

  // The netdev's link speed in Mb/s; 0 when it has none now (link down, or
  // the driver reports SPEED_UNKNOWN). NotFound: no such netdev (or no speed
  // file); Unimplemented: the source or driver cannot tell.
  virtual absl::StatusOr<uint32_t> LinkSpeedMbps(const std::string& netdev) {
    return absl::UnimplementedError(
        absl::StrCat("no link speed for ", netdev, " from this source"));
  }
};

std::unique_ptr<EthtoolStatsSource> MakeKernelEthtoolSource(
    absl::Duration names_refresh = absl::Seconds(10));
std::unique_ptr<EthtoolStatsSource> MakeDirEthtoolSource(std::string dir,
                                                         std::string sysfs_root = "/sys");

// The content of a sysfs `speed` attribute: Mb/s, 0 for "-1" (SPEED_UNKNOWN)
// and 0; UnparsableError for anything else. Exposed for tests.
absl::StatusOr<uint32_t> ParseSysfsSpeed(absl::string_view text);

// Trims the names the kernel returns in ETHTOOL_GSTRINGS (NUL padding,
// surrounding whitespace such as the historic trailing space of
// "tx_pause_storm_warning_events "). Exposed for tests.
std::string TrimStatName(const char* raw, size_t max_len);

}  // namespace fabricscope
