// rdma_netlink: RDMA port hardware counters over RDMA netlink (the kernel's
// `rdma statistic` interface, collectors/rdma_netlink.h), preferred over the
// sysfs hw_counters files where the kernel answers.
//
// Why: one RDMA_NLDEV_CMD_STAT_GET returns every hardware counter of a port
// in one message, always fresh (on mlx5 1-3 firmware commands while no
// counter objects are bound: see the budget below), where sysfs costs a
// read() per file and serves values cached for up to a lifespan; netlink also reports the optional
// counters (mlx5 cc_*, per-port RDMA byte counters) and which of them are enabled.
//
// What it does:
//   discovery    one RDMA_NLDEV_CMD_GET dump (device name -> index), then per
//                port of the port inventory (written by rdma_sysfs, so this
//                collector comes after it) one STAT_GET: a port that answers
//                with hardware counters is claimed
//                (PortInventory::SetHwCountersClaim) and its counters are
//                registered under the same SeriesKeys rdma_sysfs uses
//                (source "hw_counters", the raw name through the signal
//                table's MapCounter, so vendor maps apply alike): the same
//                series, written by netlink instead of sysfs, never both.
//   hot tier     one STAT_GET per claimed port; appends the --hot-counters names
//   medium tier  one STAT_GET per claimed port; appends the other names
//   config tier  re-probes every inventory port (new ports, new counter names
//                after optional counters were enabled, ports given back),
//                refreshes the optional counters status (STAT_GET_STATUS,
//                kernel >= 6.0) into
//                fabricscope_rdma_optional_counter_enabled{device,port,counter},
//                and publishes which source feeds each port in
//                fabricscope_rdma_hw_counters_source{device,port,source}.
//
// Opt-ins (both need CAP_NET_ADMIN, which the daemon does not keep by
// default; without it the kernel answers EPERM: counted once per port as
// permission_denied, nothing else changes):
//   --rdma-enable-optional-counters=LIST  at discovery (and for a port seen
//       later), enables the listed optional counters in addition to those
//       already enabled (STAT_SET with the union; nothing is disabled).
//   --rdma-per-process  sets auto mode by PID on each claimed port (STAT_SET:
//       the kernel binds each process's QPs to a counter object of its own),
//       then on every medium tick dumps the counter objects of each device
//       (one STAT_GET dump with STAT_RES = RES_QP per device) and sums their
//       retransmit / out-of-sequence counters (kProcessCounters) per
//       (port, PID). Kept bounded: per port the top kTopProcesses processes
//       by the sum of those counters, the rest folded into process="other".
//       Each (process, counter) is a store series (source "rdma_process",
//       raw name COUNTER@PID/COMM or COUNTER@other, the port's device and
//       port; the signal table maps it to
//       fabricscope_rdma_process_qp_counter{device,port,process,pid,counter},
//       a gauge: a counter object goes away with its process's last QP), so
//       the exposition renders it from the store and the correlator reads
//       it per process (daemon/correlate/process_scope.h). A series not
//       appended in a tick (the process went away or left the top) is
//       marked absent: not exported, its samples age out of the store like
//       those of any vanished series. Bounds: at most kMaxProcessSeries
//       series appended per tick (the rest dropped), and at most
//       kMaxProcessStoreSeries per-process series registered in the store
//       over the collector's life (the store never forgets a series, so pid
//       churn is bounded here; a process beyond it is summed into `other`);
//       both, and a series the store's budget refuses, are counted in
//       fabricscope_rdma_process_series_dropped_total. The process name is
//       /proc/PID/comm, non-printable bytes as '?'.
//
// --sysfs-root other than /sys (fixtures, fabricsim): not used at all, no
// error; every port stays on sysfs.
//
// Unsupported kernel (no NETLINK_RDMA, no ib_core, no STAT_GET): reported
// once as `unsupported` (fabricscope_collector_errors_total), the collector
// then does nothing and the sysfs path carries on for every port. A port
// whose STAT_GET fails later (device gone: not_found; unsupported) is given
// back to sysfs at once (its claim is dropped, sysfs reads it from the next
// tick) and re-probed on the config tier; a transient failure (io) leaves a
// gap of one tick and keeps the claim.
//
// No double counting: a tier appends a newly claimed port's series only from
// its tick after the one in which it first saw the claim; rdma_sysfs, polled
// before this collector in every tick (registry order), has seen the claim by
// then.
//
// What it costs the device, and the budget (ARCHITECTURE.md, "What a read
// costs the device"): a STAT_GET of a port costs the driver's get_hw_stats
// (counted as 3 firmware commands on mlx5, 1 elsewhere: the most it can be)
// plus N x K counter-object queries (N counters served, K counter objects
// bound on the port: the kernel sums each bound object into every counter it
// serves); a dump of a device's counter objects costs one query per object.
// The config tier learns K per port with one such dump per device (also
// without --rdma-per-process: an admin's `rdma statistic qp set ... auto`
// binds objects too), exports it (fabricscope_rdma_counter_objects), counts
// what the collector issued (fabricscope_device_queries_total{device,kind})
// and plans each device's reads against --device-query-budget (queries per
// second per device): when the full-rate plan costs more, the medium tier's
// reads of the device's ports are stretched first (every 2nd, 4th ... tick, up
// to the slow interval), then the hot tier's (the congestion signals: last),
// then both up to the config interval; never a sample dropped within a read.
// Each change is one log line and fabricscope_rdma_read_interval_seconds
// {device,tier}; fabricscope_device_queries_planned_per_second{device} is the
// plan's cost.
//
// Threading: Poll runs on the hot, medium and config scheduler threads. The
// port plan (which ports, which names map to which series per tier) is an
// immutable snapshot shared through a shared_ptr under plan_mu_, rebuilt by
// the config tier (and Discover) only, which bumps plan_generation_; each tier
// owns its transport (one netlink socket per tier) and its copy of the
// snapshot. A port's `released` flag is an atomic shared by the tiers.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectors/collector.h"
#include "collectors/rdma_netlink.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace prometheus {
class Counter;
class Gauge;
template <typename T>
class Family;
}  // namespace prometheus

namespace fabricscope {

class RdmaNetlinkCollector final : public Collector {
 public:
  static constexpr absl::string_view kName = "rdma_netlink";
  static constexpr char kDescription[] =
      "RDMA port hw counters over RDMA netlink, one request per port per tick (preferred over "
      "sysfs hw_counters where the kernel answers); optional counters status";

  // The registry factory: the kernel transport.
  static absl::StatusOr<std::unique_ptr<Collector>> Create(const CollectorContext& ctx);
  // Its options (--rdma-enable-optional-counters, --rdma-per-process),
  // registered with it (collectors/register_all.cc).
  static std::vector<OptionSpec> Options();

  // `transports` makes one transport per polled tier (tests pass a fake); an
  // empty one never asks a kernel (Create passes none when --sysfs-root is
  // not /sys: a fixture or simulated tree whose devices the kernel lacks).
  RdmaNetlinkCollector(const CollectorContext& ctx, RdmaNetlinkTransportFactory transports);
  ~RdmaNetlinkCollector() override;

  absl::string_view name() const override { return kName; }
  std::vector<Tier> Tiers() const override;
  absl::Status Discover(PollContext& ctx) override;
  absl::Status Poll(PollContext& ctx) override;
  // Per claimed port and tier: its STAT_GETs at the budget's strides (N
  // counters, K counter objects), the config tier's re-probe, and per device
  // the counter-object dumps.
  std::vector<ReadPlanRow> ReadPlan() const override;

  // The per-process bounds (--rdma-per-process).
  static constexpr size_t kTopProcesses = 5;
  static constexpr size_t kMaxProcessSeries = 1024;
  static constexpr size_t kMaxProcessStoreSeries = 8192;
  // The counters of a counter object that rank and are exported per process.
  static constexpr absl::string_view kProcessCounters[] = {
      "out_of_sequence",       "packet_seq_err",   "implied_nak_seq_err",
      "local_ack_timeout_err", "roce_adp_retrans", "roce_adp_retrans_to",
  };

  // For tests: lowers kMaxProcessStoreSeries. Call before the first poll.
  void set_max_process_store_series_for_test(size_t n) { max_process_store_series_ = n; }

  // The device-query budget's arithmetic (public for tests and benchmarks).
  struct PortLoad {
    uint32_t served = 0;   // N: counters one STAT_GET of the port serves
    uint32_t objects = 0;  // K: counter objects bound on the port
    bool hot = false;      // read by the hot tier
    bool medium = false;   // read by the medium tier
  };
  struct DeviceLoad {
    std::vector<PortLoad> ports;
    uint32_t get_hw_stats_commands = 3;  // firmware commands per get_hw_stats
    bool per_process = false;            // a counter-object dump every medium read
  };
  struct ReadStrides {
    uint32_t hot = 1;       // the hot tier reads the device's ports every `hot`th tick
    uint32_t medium = 1;    // the medium tier, every `medium`th tick
    double per_second = 0;  // device queries per second at these strides
    bool within = true;     // false: over the budget even at the longest strides
    friend bool operator==(const ReadStrides&, const ReadStrides&) = default;
  };
  using TierIntervals = std::array<absl::Duration, kNumTiers>;
  // Device queries per second of `load` read at these strides (the config
  // tier's re-probe and counter-object dump included).
  static double QueriesPerSecond(const DeviceLoad& load, const TierIntervals& intervals,
                                 uint32_t hot_stride, uint32_t medium_stride);
  // The shortest strides within `budget` queries per second (0: no budget):
  // the medium tier's stride doubles up to the slow interval, then the hot
  // tier's, then both up to the config interval.
  static ReadStrides PlanStrides(const DeviceLoad& load, const TierIntervals& intervals,
                                 uint64_t budget);
  // For tests: the strides in effect for a device (1/1 before the first plan).
  ReadStrides StridesForTest(const std::string& device);

  // For tests: whether the kernel was found without RDMA netlink support.
  bool unsupported() const { return unsupported_.load(std::memory_order_acquire); }

 private:
  // A device's read strides (set by the config tier, read by the others)
  // and what its queries are counted in.
  struct DeviceCost {
    std::atomic<uint32_t> stride[2] = {1, 1};  // hot, medium
    uint32_t get_hw_stats_commands = 1;
    prometheus::Counter* hw_stats = nullptr;        // may be null (no metrics)
    prometheus::Counter* counter_object = nullptr;  // may be null
    ReadStrides planned;                            // config tier only
    bool has_plan = false;                          // config tier only
    void Count(uint32_t served, uint32_t objects) const;
  };
  // A port's N and K, as last seen.
  struct PortCost {
    std::atomic<uint32_t> served{0};
    std::atomic<uint32_t> objects{0};
  };
  // One claimed port.
  struct PortPlan {
    uint64_t claim_id = 0;  // unique per claim (a re-claimed port gets a new one)
    std::string device;
    uint32_t device_index = 0;
    uint32_t port = 0;
    // Raw name -> series, per polled tier (0: hot, 1: medium).
    std::array<absl::flat_hash_map<std::string, SeriesId>, 2> series;
    // Set by a tier whose request failed for good; the config tier re-probes.
    std::shared_ptr<std::atomic<bool>> released;
    std::shared_ptr<DeviceCost> device_cost;
    std::shared_ptr<PortCost> port_cost;
  };
  struct Plan {
    std::vector<PortPlan> ports;
  };
  struct TierState {
    std::unique_ptr<RdmaNetlinkTransport> transport;
    absl::Status transport_status;  // sticky failure to create it
    uint64_t generation = 0;
    std::shared_ptr<const Plan> plan;
    // Claims (PortPlan::claim_id) this tier has seen: appends start on the
    // tick after first sight.
    absl::flat_hash_set<uint64_t> seen;
    std::vector<uint8_t> replies;
    uint64_t ticks = 0;  // this tier's polls, for the read strides
  };

  RdmaNetlinkTransport* Transport(TierState& ts, PollContext& ctx);
  // Config tier: K per port (one counter-object dump per device), then each
  // device's strides against the budget.
  void PlanBudget(RdmaNetlinkTransport* t, const Plan& plan, PollContext& ctx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(replan_mu_);
  std::shared_ptr<DeviceCost> CostOf(const PortInfo& port)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(replan_mu_);
  // Discovery and config tier: (re)build the plan from the inventory.
  void Replan(PollContext& ctx, bool discovery);
  void PollCounters(TierState& ts, int slot, PollContext& ctx);
  void PollProcesses(TierState& ts, PollContext& ctx);
  // What one medium tick of PollProcesses appended.
  struct ProcessTick {
    absl::flat_hash_set<SeriesId> live;
    size_t dropped = 0;
  };
  // Appends one process's (or the port's `other`) counters, registering its
  // series on first sight. False (nothing appended) when the process has no
  // series yet and kMaxProcessStoreSeries are registered: sum it into `other`.
  bool AppendProcess(const std::string& device, uint32_t port, absl::string_view process,
                     const uint64_t* values, PollContext& ctx, ProcessTick* tick);
  std::string ProcessName(uint32_t pid);
  void RefreshOptionalStatus(RdmaNetlinkTransport* t, const PortInfo& port, uint32_t device_index,
                             bool enable, PollContext& ctx);

  Store* const store_;
  PortInventory* const ports_;
  const absl::flat_hash_set<std::string> hot_counters_;
  const std::vector<std::string> enable_optional_;
  const RdmaNetlinkTransportFactory transports_;
  const bool per_process_;
  const std::string proc_root_;
  const TierIntervals intervals_;
  const uint64_t budget_;
  MetricsRegistry* const metrics_;
  prometheus::Counter* process_dropped_ = nullptr;
  // Medium-tier state of --rdma-per-process: every per-process series
  // registered (bounded by max_process_store_series_ plus the ports' `other`
  // series), and those appended last tick (present in the store).
  absl::flat_hash_map<SeriesKey, SeriesId> process_series_;
  absl::flat_hash_set<SeriesId> process_live_;
  size_t max_process_store_series_ = kMaxProcessStoreSeries;
  prometheus::Family<prometheus::Gauge>* source_gauge_ = nullptr;
  prometheus::Family<prometheus::Gauge>* optional_gauge_ = nullptr;

  std::atomic<bool> unsupported_{false};

  // Config-tier state (Discover runs before the tier threads).
  std::mutex replan_mu_;
  // Ports whose probe or optional-counter request already reported a lasting
  // failure: not reported again (no error storm every config tick).
  absl::flat_hash_set<std::string> reported_ ABSL_GUARDED_BY(replan_mu_);
  // Ports whose optional counters this daemon already asked to enable.
  absl::flat_hash_set<std::string> enabled_once_ ABSL_GUARDED_BY(replan_mu_);
  // Ports without STAT_GET_STATUS (older kernel): not asked again.
  absl::flat_hash_set<std::string> no_status_ ABSL_GUARDED_BY(replan_mu_);
  uint64_t next_claim_id_ ABSL_GUARDED_BY(replan_mu_) = 1;
  // Ports auto mode by PID was asked for (--rdma-per-process), once each.
  absl::flat_hash_set<std::string> auto_pid_asked_ ABSL_GUARDED_BY(replan_mu_);
  // Per device name / port key, kept across plans.
  absl::flat_hash_map<std::string, std::shared_ptr<DeviceCost>> device_costs_
      ABSL_GUARDED_BY(replan_mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<PortCost>> port_costs_
      ABSL_GUARDED_BY(replan_mu_);

  mutable std::mutex plan_mu_;
  std::shared_ptr<const Plan> plan_ ABSL_GUARDED_BY(plan_mu_);
  std::atomic<uint64_t> plan_generation_{0};

  // Hot, medium, config.
  std::array<TierState, 3> tiers_;
};

}  // namespace fabricscope
