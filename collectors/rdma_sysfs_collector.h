// rdma_sysfs: RDMA port counters from /sys/class/infiniband (under
// --sysfs-root).
//
// Which devices: every directory of class/infiniband, or those
// --rdma-device-include matches, less those --rdma-device-exclude matches
// (never opened; their ports stay out of the port inventory, so no other
// collector reads them either).
//
// What it reads, per <dev>/ports/<port>:
//   hot tier     hw_counters/<name> for the names in --hot-counters (congestion
//                and loss indicators); all hot files of one port are read
//                back-to-back, so an mlx5 port costs one hw_counters refresh
//   medium tier  every other hw_counters/<name> (not `lifespan`, a setting)
//   slow tier    counters/* (IB PMA: one firmware MAD per file on mlx5) and the
//                legacy counters_ext/*; plus a cheap device rescan (readdir +
//                stat of class/infiniband) for hot-plug
//   config tier  the rescan again, plus a re-read of the port attributes
//                (state, rate, link_layer, netdev) for fabricscope_port_info
// The hw_counters files of a port the rdma_netlink collector claims
// (PortInventory::SetHwCountersClaim) are not read while the claim holds:
// netlink then writes those series (same SeriesKey, same ids), never both.
// Each file becomes one series, SeriesKey{source = "hw_counters" | "counters" |
// "counters_ext", name = file name, device, port, netdev}, resolved once
// through the signal table (MapCounter) with the device's driver; a file no
// rule maps (or the table marks "not collected") is skipped (debug log). A
// hw_counters file is hot when its name is in --hot-counters or it means what
// a hot name means (same family and labels: the vendors' names for ECN, CNP
// and retransmit counters).
//
// Vendors (the driver probe): a device's driver is the basename of its sysfs
// device/driver link, mapped by RdmaDriverOf (core/signals.h: bnxt_en ->
// bnxt_re, ice -> irdma, ...; else the device name's prefix); it is
// fabricscope_port_info's `driver` label, next to `fw_ver` (<dev>/fw_ver).
// An IB counters/ (or counters_ext/) file that is empty or fails with EINVAL
// at discovery (bnxt_re, ionic) is not read: one `unsupported` error per
// port, no error storm; the port's bytes and packets come from the vendor's
// hw_counters (rx_bytes, rx_rdma_ucast_bytes, ...: the same series, so where
// both exist hw_counters wins as the wider one). A value of
// 0xFFFFFFFFFFFFFFFF in a series whose rule says so (ionic: the driver's
// "invalid") is never appended: counted as a `parse` error (rate-limited
// log), the series has a gap there (blind for the correlator). The netdev of a port is the first
// non-empty ports/<p>/gid_attrs/ndevs/* entry, else device/net/* (the one whose dev_port matches,
// else the first).
//
// Cached hw_counters (the kernel's lifespan, drivers/infiniband/core/sysfs.c:
// a hw_counters read asks the driver only when jiffies has passed the last
// refresh plus `lifespan`, msecs_to_jiffies of hw_counters/lifespan; any
// other read returns the cached value). A 10 ms hot tick therefore sees, on
// some ticks, the previous value: an interval with no movement, then one with
// twice the movement, and a per-interval peak up to 2x the truth. At discovery
// each port's hw_counters/lifespan (ms, as the kernel shows it) gives the
// staleness window W = (ceil(lifespan x HZ / 1000) + 1) jiffies: the longest a
// refreshed value can be served again. HZ is --kernel-hz (0: CONFIG_HZ from
// /boot/config-<release>, else 100, the coarsest, whose window is the
// longest: a window too long only costs resolution of idle counters, one too
// short lets a stale read through). A hw_counters reading equal to the last
// appended one, less than W after it, is taken as the cache's and not
// appended (counted in fabricscope_rdma_sysfs_cached_reads_total): the next
// reading that moved (or the first one past W) closes one interval over both
// ticks, so rates, peaks and fractions are those of refreshed values only. A
// reading that moved is fresh by construction (the cache changes only on a
// refresh). Ports without a lifespan file (other drivers' counters, a fake
// tree): every reading is appended.
//
// What the reads cost the device (fabricscope_device_queries_total, shared
// with rdma_netlink): each counters/ file read is one PerfMgt MAD (kind
// pma_mad, exact); a hw_counters read at least W after the port's last
// counted refresh is taken as one get_hw_stats (kind hw_stats, 3 commands on
// mlx5: an estimate, tracked per port across the tiers). The N x K
// counter-object queries a hw_counters read adds are not counted here (K is
// not known on this path). ReadPlan() gives the plan per port and tier for
// --explain-cost.
//
// Counter semantics fed to the store (store/counter_semantics.h):
// from the signal table, except counters/port_{xmit,rcv}_{data,packets} on a
// port without the IB PMA extended-width group (no unicast_*/multicast_*
// files): those are 32-bit saturating, unless one of them reads above 2^32-1
// at discovery (the "noietf" 64-bit group has no unicast files either).
// When counters/ and counters_ext/ map to the same series labels (old mlx4
// kernels expose both), one is kept: counters/ if it has extended width, else
// counters_ext/ (64-bit).
//
// I/O: counter files are opened once per device incarnation and read with
// pread into a fixed buffer (collectors/sysfs_reader.h); nothing is opened per
// tick except after hot-plug. A tick reads every file of its tier first and
// then appends the readings to the store in one run (syscalls and store work
// not interleaved: the store's code and data stay warm across the appends);
// every sample carries the tick's one timestamp either way.
// Errors go through PollContext::Error:
//   parse (garbage, empty, overflow)  counted every time, no sample, polling goes on
//   unsupported ("N/A (no PMA)", EINVAL, EOPNOTSUPP), permission denied
//                                     counted once, the file is not asked again
//                                     until its device is rediscovered
//   not found (ENOENT/ENODEV on a read, or the device directory vanished / was
//                                     replaced at a rescan): the device's files
//                                     are closed, its series and port marked
//                                     absent (not exported); when it comes back
//                                     it is rediscovered (a replaced directory is
//                                     told apart by inode and ctime), its files
//                                     reopened, its series (same ids) present
//                                     again - no restart
//   io (EIO and anything else)        counted, polling goes on; after 3 failures
//                                     on one port (a restricted function whose
//                                     firmware refuses the query, and whose
//                                     kernel logs every attempt) the port's
//                                     files back off: retried after 1 s, the
//                                     delay doubling to 5 min, one log line when
//                                     it starts and one when a read succeeds
//                                     (PortBackoff)
//
// Threading: Poll runs on up to four scheduler threads at once (one per
// distinct tier interval), never concurrently with itself for one tier.
//  - Each tier owns its open files (TierState), touched only by its thread.
//  - The device topology (which devices, which files, which series) is an
//    immutable snapshot shared through a shared_ptr under topo_mu_; a rescan
//    builds a new one (serialised by rescan_mu_) and bumps generation_. A tier
//    compares generation_ (one atomic load per tick) and, when it moved, syncs
//    its files with the new snapshot on its own thread: keeps open files of
//    unchanged devices, closes those of vanished ones, opens new ones.
//  - A tier that reads ENOENT/ENODEV sets rescan_requested_ so that the next
//    rescan publishes a new generation even if the directory is still there.
//  - Store calls are thread-safe; each series is appended only by its tier.
// Discover() runs before the tier threads start (Scheduler::Start).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "collectors/collector.h"
#include "collectors/ib_mad_source.h"
#include "collectors/ib_pma.h"
#include "collectors/sysfs_reader.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

class RdmaSysfsCollector final : public Collector {
 public:
  static constexpr absl::string_view kName = "rdma_sysfs";
  static constexpr char kDescription[] =
      "RDMA port counters from /sys/class/infiniband (hw_counters, counters, counters_ext)";

  // The registry factory. Reads config (sysfs_root, hot_counters) once.
  static absl::StatusOr<std::unique_ptr<Collector>> Create(const CollectorContext& ctx);
  // Its options (--rdma-device-include, --rdma-device-exclude, --kernel-hz),
  // registered with it (collectors/register_all.cc).
  static std::vector<OptionSpec> Options();
  // The kernel's HZ as the staleness window assumes it: `configured` if not
  // 0, else CONFIG_HZ from `boot_config` (/boot/config-<release>), else 100.
  // `from_boot_config` (optional): whether the value came from the file.
  static int KernelHz(int configured, const std::string& boot_config,
                      bool* from_boot_config = nullptr);
  // The staleness window of a hw_counters/lifespan of `lifespan_ms` at `hz`.
  static int64_t StaleWindowNs(uint64_t lifespan_ms, int hz);

  // `pma_transport`: --ib-pma-mad's MAD transport (MakeUmadPmaTransport, or a
  // test's); null reads counters/ files.
  explicit RdmaSysfsCollector(const CollectorContext& ctx,
                              std::unique_ptr<SmpTransport> pma_transport = nullptr);
  ~RdmaSysfsCollector() override;

  absl::string_view name() const override { return kName; }
  std::vector<Tier> Tiers() const override;
  absl::Status Discover(PollContext& ctx) override;
  absl::Status Poll(PollContext& ctx) override;
  // Per port and tier: the hw_counters files (unless rdma_netlink claims the
  // port) and the IB PMA counters/ files, with what they cost the device.
  std::vector<ReadPlanRow> ReadPlan() const override;
  // How often the driver's get_hw_stats runs for a port whose hw_counters
  // are read every `interval_ns` behind a cache whose staleness window is
  // `window_ns` (0: no cache, every read): the first read after the window.
  static double HwStatsRefreshesPerSecond(int64_t interval_ns, int64_t window_ns);

  // For tests: the number of counter files a tier has open right now (call
  // from the thread that polls that tier, or while no poll runs).
  size_t OpenFilesForTest(Tier tier) const;
  // For tests: the topology generation (bumped by each rescan that changed
  // something).
  uint64_t GenerationForTest() const { return generation_.load(std::memory_order_acquire); }

 private:
  // One counter file of one device incarnation.
  struct CounterSpec {
    std::string path;
    SeriesId id = kInvalidSeries;
    uint32_t port = 0;
    bool hw_counter = false;  // under hw_counters/: skipped while rdma_netlink claims the port
    bool all_ones_invalid = false;  // Signal::all_ones_invalid
    // hw_counters behind the kernel's lifespan cache: the staleness window
    // (see the header comment); 0: every reading is fresh.
    int64_t stale_window_ns = 0;
    uint32_t port_slot = 0;  // index of its port in DeviceEntry::ports
    // counters/ of an InfiniBand port: --ib-pma-mad reads it with the port's
    // MADs; `name` is the file's (the PmaCounter name).
    bool pma_mad = false;
    std::string name;
  };
  struct DeviceEntry {
    std::string name;
    uint64_t incarnation = 0;  // unique per (re)discovery
    bool present = true;
    // Identity of the device directory (stat, following the class symlink): a
    // device removed and re-created between two rescans gets a new one.
    struct Identity {
      uint64_t dev = 0;
      uint64_t ino = 0;
      int64_t ctime_ns = 0;
      friend bool operator==(const Identity&, const Identity&) = default;
    } identity;
    std::vector<std::pair<uint32_t, std::string>> ports;  // number, directory
    // Files per tier, port by port (hot files of a port are contiguous).
    std::array<std::vector<CounterSpec>, kNumTiers> files;
    // Per port (parallel to `ports`): when a hw_counters read last went past
    // the kernel's lifespan cache (the driver was asked), as the tiers
    // estimate it for fabricscope_device_queries_total; shared by the tiers.
    std::shared_ptr<std::atomic<int64_t>[]> last_refresh_ns;
    uint32_t get_hw_stats_commands = 1;
  };
  struct Topology {
    std::vector<DeviceEntry> devices;
  };

  // Per-tier open files, owned by the tier's thread. 24 bytes, laid out for
  // the tick loop (PollTier): the file and its series id are read from here,
  // `spec` is followed only on an error.
  struct TierFile {
    const CounterSpec* spec = nullptr;  // points into `topo` of the TierState
    SeriesId id = kInvalidSeries;       // spec->id, kept here for the tick loop
    uint32_t device = 0;                // index into TierState::devices
    CounterFile file;
    bool disabled = false;  // unsupported / permission denied: not asked again
    bool claimed = false;   // its port's hw_counters come from rdma_netlink: not read
    // The last appended reading and its tick (stale_window_ns > 0 only).
    bool has_last = false;
    uint64_t last_raw = 0;
    int64_t last_ts_ns = 0;
  };
  struct TierDevice {
    std::string name;
    uint64_t incarnation = 0;
    // fabricscope_rdma_sysfs_cached_reads_total{device}; null without metrics.
    prometheus::Counter* cached_reads = nullptr;
    // fabricscope_device_queries_total{device,kind="hw_stats"|"pma_mad"};
    // null without metrics. What one tick added, flushed at its end.
    prometheus::Counter* hw_stats = nullptr;
    prometheus::Counter* pma_mads = nullptr;
    uint64_t tick_hw_stats = 0;
    uint64_t tick_pma_mads = 0;
    std::atomic<int64_t>* last_refresh_ns = nullptr;  // DeviceEntry's, alive with TierState::topo
    uint32_t get_hw_stats_commands = 1;
  };
  // A port whose reads fail with I/O errors (EIO: a function whose firmware
  // refuses the query): after kBackoffAfterFailures failures its files are
  // not read until retry_ns, the delay doubling from 1 s to 5 min on every
  // failed retry; the first success ends it. Logged once when it starts and
  // once when it ends; every failure is counted (code io).
  struct PortBackoff {
    int failures = 0;
    int64_t delay_ns = 0;  // 0: not backing off yet
    int64_t since_ns = 0;
    int64_t retry_ns = 0;
  };
  static constexpr int kBackoffAfterFailures = 3;
  static constexpr int64_t kBackoffFirstNs = 1'000'000'000;
  static constexpr int64_t kBackoffMaxNs = 300'000'000'000;

  struct TierState {
    uint64_t generation = 0;
    // PortInventory::HwCountersClaimsGeneration() the `claimed` flags reflect.
    uint64_t claims_generation = UINT64_MAX;
    std::shared_ptr<const Topology> topo;
    std::vector<TierDevice> devices;
    std::vector<TierFile> files;
    // The tick's readings, appended to the store after every file was read
    // (PollTier): capacity kept across ticks, nothing allocated per tick.
    std::vector<SeriesReading> readings;
    // Ports (device index, port) with failing reads; empty normally.
    absl::flat_hash_map<std::pair<uint32_t, uint32_t>, PortBackoff> backoff;
    // --ib-pma-mad: this tick's PMA counters per port (device index, port)
    // whose MADs succeeded.
    absl::flat_hash_map<std::pair<uint32_t, uint32_t>, std::vector<PmaCounter>> pma_values;
  };

  // --ib-pma-mad: the PortCountersExtended and PortCounters MADs of each
  // InfiniBand port of the tier into ts.pma_values (slow tier only: the
  // counters/ files are there).
  void ReadPmaMads(TierState& ts, PollContext& ctx);
  static bool PortIsInfiniBand(const std::vector<CounterSpec>& specs, uint32_t port);
  void Rescan(PollContext& ctx, bool refresh_attributes) ABSL_LOCKS_EXCLUDED(rescan_mu_);
  DeviceEntry BuildDevice(PollContext& ctx, const std::string& name,
                          const DeviceEntry::Identity& identity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(rescan_mu_);
  PortInfo ReadPortInfo(const std::string& device, uint32_t port,
                        const std::string& port_dir) const;
  void RefreshPortInfo(const Topology& topo) ABSL_EXCLUSIVE_LOCKS_REQUIRED(rescan_mu_);
  void SetPortsPresent(const DeviceEntry& d, bool present)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(rescan_mu_);

  void SyncTier(TierState& ts, PollContext& ctx);
  void PollTier(TierState& ts, PollContext& ctx);
  void CloseDevice(TierState& ts, uint32_t device);
  void NoteIoFailure(TierState& ts, const TierFile& f, PollContext& ctx, const absl::Status& error);

  // --ib-pma-mad (null: off). Used by the slow tier's thread only, as are
  // the two fields after it.
  const std::unique_ptr<SmpTransport> pma_transport_;
  uint64_t pma_transaction_ = 0;
  int pma_wait_ticks_ = 0;  // slow ticks before MADs are tried again
  const std::string root_;  // <sysfs-root>/class/infiniband
  const absl::flat_hash_set<std::string> hot_counters_;
  // What the hot names mean (family and labels): a vendor's file with the same
  // meaning is hot too (ionic's resp_rx_outouf_seq like mlx5's out_of_sequence).
  const absl::flat_hash_set<std::string> hot_signals_;
  Store* const store_;
  PortInventory* const ports_;      // written at discovery and on changes
  MetricsRegistry* const metrics_;  // may be null (tests)
  // --rdma-device-include / --rdma-device-exclude (empty: every device).
  const NetdevFilter device_include_;
  const NetdevFilter device_exclude_;
  bool Watched(absl::string_view device) const;
  bool kernel_hz_from_boot_config_ = false;  // set by kernel_hz_'s initializer
  const int kernel_hz_;                      // KernelHz(--kernel-hz, ...)
  const std::array<absl::Duration, kNumTiers> intervals_;

  std::mutex rescan_mu_;
  uint64_t next_incarnation_ ABSL_GUARDED_BY(rescan_mu_) = 1;
  // Last PortInfo published per (device, port), to upsert only on change.
  absl::flat_hash_map<std::pair<std::string, uint32_t>, PortInfo> port_info_
      ABSL_GUARDED_BY(rescan_mu_);

  mutable std::mutex topo_mu_;
  std::shared_ptr<const Topology> topo_ ABSL_GUARDED_BY(topo_mu_);
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> rescan_requested_{false};

  std::array<TierState, kNumTiers> tiers_;
};

}  // namespace fabricscope
