// The collector interface: how counters get from the OS into the store.
//
// A collector is one class in collectors/<name>_collector.{h,cc} plus one
// line in collectors/register_all.cc and one line in CMakeLists.txt. The
// daemon's main never changes when a collector is added.
//
// Life cycle:
//  1. The registry creates it from a CollectorContext (the few options
//     collectors take, store, clock, metrics). Construction does no I/O.
//  2. Discover() runs once before the first poll: find the devices, open the
//     hot files, Register() series in the store, Upsert() the port
//     inventory (store/port_inventory.h). A collector that reads the
//     inventory at discovery declares so at registration, and the registry
//     discovers it after the collector that writes it (collectors/registry.h).
//     Finding nothing is not an error (a host without RDMA devices).
//  3. The scheduler calls Poll(ctx) on each tick of each tier the collector
//     listed in Tiers(). Poll appends one sample per series through ctx with
//     the tick's single realtime timestamp. A collector rediscovers by itself
//     (hot-plug) when a device disappears or appears.
//
// Errors (STYLE.md taxonomy): no data is not an error. Environmental trouble
// on one file or device (ENOENT after hot-unplug, EACCES, garbage in a counter
// file) is reported with ctx.Error(status, key): counted in
// fabricscope_collector_errors_total{collector,code}, logged at a limited
// rate, and the poll goes on with the other series. Collectors build the
// status with core/errors.h (ErrnoToStatus for an errno, UnparsableError for
// garbage) and never pick the `code` label themselves: PollContext::Error
// maps the status with CollectorErrorCodeOf, the one mapping. Poll returns a non-OK
// status only when the whole tick failed; that is counted too. Collectors never
// throw, and never block for long: no sleeping, no waiting on locks held by
// readers.
//
// Thread-safety: Poll for different tiers may run concurrently on different
// scheduler threads; Poll for one tier is never concurrent with itself. A
// collector that polls several tiers must keep per-tier state separate or
// guard what is shared.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "collectors/netdev_filter.h"
#include "core/hot_counters.h"
#include "core/options.h"
#include "core/series.h"

namespace fabricscope {

class Clock;
class MetricsRegistry;
class PortInventory;
class Store;

enum class Tier : uint8_t { kHot = 0, kMedium = 1, kSlow = 2, kConfig = 3 };
inline constexpr int kNumTiers = 4;
absl::string_view TierName(Tier tier);

// Error classes: the `code` label of fabricscope_collector_errors_total.
enum class CollectorErrorCode : uint8_t {
  kNotFound,          // file/device vanished (hot-unplug)
  kPermissionDenied,  // EACCES/EPERM
  kParse,             // empty, non-numeric, overflowing or truncated content
  kIo,                // other read/syscall errors
  kUnsupported,       // the device or kernel does not support a request
  kPoll,              // a whole poll failed (Poll returned non-OK)
};
absl::string_view CollectorErrorCodeName(CollectorErrorCode code);
inline constexpr int kNumCollectorErrorCodes = 6;

// The one Status -> error class mapping (statuses as core/errors.h builds
// them):
//   NotFound          -> kNotFound
//   PermissionDenied  -> kPermissionDenied
//   DataLoss          -> kParse        (UnparsableError: garbage content)
//   Unimplemented     -> kUnsupported  (EOPNOTSUPP, EINVAL, "N/A", no such family)
//   anything else     -> kIo           (Internal, Unavailable, DeadlineExceeded,
//                                       ResourceExhausted, ...; an OK status,
//                                       which is no error to report, too)
// Never kPoll: that class is the scheduler's, for a Poll that returned non-OK.
CollectorErrorCode CollectorErrorCodeOf(const absl::Status& status);

// The options collectors take: the composition root (daemon/config.cc,
// CollectorOptionsFromConfig) fills it from the daemon's config; tests and
// benchmarks fill it by hand. Collectors never see the daemon's Config.
struct CollectorOptions {
  // Root of the sysfs tree (--sysfs-root): "/sys" on a real host.
  std::string sysfs_root = "/sys";
  // Read `ethtool -S` text files from this directory instead of the ioctl
  // (--ethtool-dir; empty: the kernel).
  std::string ethtool_dir;
  // Read each netdev's PFC configuration from the `dcb pfc show` text file
  // DIR/<netdev> instead of dcbnl (--dcb-dir; empty: the kernel).
  std::string dcb_dir;
  // Extra interfaces besides the RDMA netdevs (--netdev-include, compiled
  // once; the empty filter: none). Used by netdev, ethtool and dcb_config.
  NetdevFilter netdev_include;
  // hw_counters names the rdma_sysfs collector reads every hot tick.
  std::vector<std::string> hot_counters = DefaultHotCounters();
  // Where rdma_netlink reads process names (PROC/PID/comm); tests change it.
  std::string proc_root = "/proc";
  // The scheduler's tier intervals (--hot-interval ... --config-interval), by
  // Tier: what a collector's read plan costs per second follows from them.
  std::array<absl::Duration, kNumTiers> intervals = {
      absl::Milliseconds(10), absl::Milliseconds(100), absl::Seconds(1), absl::Seconds(10)};
  // The collectors' own options (--rdma-per-process, --lldpd-socket, ...),
  // which each declares with its registration (collectors/registry.h) and
  // reads with its OptionKey constants; unset ones are at their defaults.
  OptionValues values;
};

// What a collector gets at creation. Pointers outlive the collector.
struct CollectorContext {
  const CollectorOptions* options = nullptr;
  Store* store = nullptr;
  // The RDMA port inventory: rdma_sysfs writes it, netdev/ethtool/dcb_config
  // read it at discovery.
  PortInventory* ports = nullptr;
  Clock* clock = nullptr;
  MetricsRegistry* metrics = nullptr;
};

// Per-tick handle passed to Poll.
class PollContext {
 public:
  virtual ~PollContext() = default;
  virtual Tier tier() const = 0;
  // The tick's realtime timestamp (unix ns), the same for every sample.
  virtual int64_t ts_ns() const = 0;
  virtual void Append(SeriesId id, uint64_t raw) = 0;
  // The readings of this tick, in order: the same as Append(r.id, r.raw) for
  // each, but the scheduler's implementation hands them to the store in one
  // call, which prefetches the state of the series a few readings ahead (a
  // tick's series are cold in the cache: each tick touches hundreds of them).
  virtual void AppendReadings(absl::Span<const SeriesReading> readings) {
    for (const SeriesReading& r : readings) Append(r.id, r.raw);
  }
  // Counts a non-fatal error under CollectorErrorCodeOf(status) and logs
  // status.message() at a limited rate per `key` (a file path or device name:
  // bounded by the caller). The one place a status becomes a `code` label.
  void Error(const absl::Status& status, absl::string_view key) {
    RecordError(CollectorErrorCodeOf(status), key, status.message());
  }

 protected:
  // The implementation's sink for Error(): count `code`, log `detail`.
  virtual void RecordError(CollectorErrorCode code, absl::string_view key,
                           absl::string_view detail) = 0;
};

struct MetricSpec;

// fabricscope_device_queries_total{device,kind}: the device (firmware)
// queries and MADs the daemon's reads of an RDMA device cost, by the kernel's
// rules (ARCHITECTURE.md, "What a read costs the device"). Kinds: "hw_stats"
// (the driver's get_hw_stats, counted as 3 commands on mlx5 and 1 elsewhere;
// on the sysfs path estimated from the lifespan cache), "counter_object"
// (queries of the counter objects bound on a port), "pma_mad" (one PerfMgt
// MAD per IB PMA counters/ file read). Written by rdma_netlink and rdma_sysfs.
const MetricSpec& DeviceQueriesMetric();
// What the driver's get_hw_stats is counted as: 3 firmware commands on mlx5
// (QUERY_Q_COUNTER, QUERY_CONG_STATISTICS, PPCNT: the most it issues), 1 on
// other drivers.
uint32_t GetHwStatsCommands(absl::string_view driver);

// One line of a collector's read plan (`fabricscoped --explain-cost`): what
// one kind of read of one port costs the device, by the kernel's rules
// (ARCHITECTURE.md, "What a read costs the device").
struct ReadPlanRow {
  std::string collector;
  std::string device;
  uint32_t port = 0;
  std::string read;     // e.g. "STAT_GET", "hw_counters files", "counters/ files (PMA)"
  std::string tier;     // TierName, or "" for a device-wide read
  uint32_t values = 0;  // counter values per read
  double reads_per_second = 0;
  double syscalls_per_second = 0;
  double queries_per_second = 0;  // device (firmware) queries / MADs
  std::string note;
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual absl::string_view name() const = 0;
  // Tiers this collector wants to be polled in.
  virtual std::vector<Tier> Tiers() const = 0;
  virtual absl::Status Discover(PollContext& ctx) = 0;
  virtual absl::Status Poll(PollContext& ctx) = 0;
  // Its reads of RDMA devices as planned now (after Discover); none for a
  // collector that reads no device counters through the RDMA stack.
  virtual std::vector<ReadPlanRow> ReadPlan() const { return {}; }
};

}  // namespace fabricscope
