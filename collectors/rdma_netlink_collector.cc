#include "collectors/rdma_netlink_collector.h"

#include <netlink/msg.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectors/sysfs_reader.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/signals.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"

namespace fabricscope {
namespace {

const MetricSpec& kHwCountersSource = DefineMetric(
    {.name = "fabricscope_rdma_hw_counters_source",
     .type = MetricType::kGauge,
     .help = "1 for the source that feeds a port's hw_counters series: \"netlink\" (the "
             "rdma_netlink collector, one RDMA_NLDEV_CMD_STAT_GET per port per tick) or "
             "\"sysfs\" (rdma_sysfs reads the hw_counters files); 0 for the other. Each series "
             "has exactly one source at a time.",
     .labels = {"device", "port", "source"},
     .component = "rdma_netlink"});

const MetricSpec& kOptionalCounterEnabled = DefineMetric(
    {.name = "fabricscope_rdma_optional_counter_enabled",
     .type = MetricType::kGauge,
     .help = "1 when the port's optional hardware counter is enabled, 0 when it is not "
             "(RDMA_NLDEV_CMD_STAT_GET_STATUS, kernel >= 6.0). Enabling is opt-in: "
             "--rdma-enable-optional-counters (needs CAP_NET_ADMIN).",
     .labels = {"device", "port", "counter"},
     .component = "rdma_netlink"});

const MetricSpec& kProcessSeriesDropped =
    DefineMetric({.name = "fabricscope_rdma_process_series_dropped_total",
                  .type = MetricType::kCounter,
                  .help = "Per-process QP counter series not exported because a hard bound was "
                          "reached: 1024 series at a time (dropped), or 8192 per-process series "
                          "kept in the store over the daemon's life (the process is then summed "
                          "into process=\"other\"), or the store's memory budget refused one.",
                  .labels = {},
                  .component = "rdma_netlink"});

const MetricSpec& kCounterObjects = DefineMetric(
    {.name = "fabricscope_rdma_counter_objects",
     .type = MetricType::kGauge,
     .help = "Counter objects bound on the port (K), from a dump of the device's counter "
             "objects every config interval: per-process counters (--rdma-per-process, or an "
             "admin's `rdma statistic qp set ... auto`). Each counter one STAT_GET serves costs "
             "K device queries.",
     .labels = {"device", "port"},
     .component = "rdma_netlink"});

const MetricSpec& kReadInterval = DefineMetric(
    {.name = "fabricscope_rdma_read_interval_seconds",
     .type = MetricType::kGauge,
     .help = "How often the rdma_netlink collector reads the device's ports in each tier "
             "(\"hot\", \"medium\"): the tier's interval, stretched when the full-rate plan "
             "would cost more than --device-query-budget.",
     .labels = {"device", "tier"},
     .component = "rdma_netlink"});

const MetricSpec& kPlannedQueries = DefineMetric(
    {.name = "fabricscope_device_queries_planned_per_second",
     .type = MetricType::kGauge,
     .help = "Device queries per second the rdma_netlink read plan of the device costs at its "
             "current read intervals (its ports' STAT_GETs at N x K each, the counter-object "
             "dumps, the config tier's re-probe); kept at or under --device-query-budget "
             "unless even the longest intervals exceed it (then logged).",
     .labels = {"device"},
     .component = "rdma_netlink"});

constexpr int kHotSlot = 0;
constexpr int kMediumSlot = 1;
constexpr int kConfigTier = 2;

std::string PortKey(absl::string_view device, uint32_t port) {
  return absl::StrCat(device, "/", port);
}

// A request/response exchange; the request is freed here.
absl::Status Exchange(RdmaNetlinkTransport* t, nl_msg* request, std::vector<uint8_t>* replies) {
  if (request == nullptr) return absl::InternalError("cannot build an rdma netlink request");
  absl::Status s = t->Exchange(request, replies);
  nlmsg_free(request);
  return s;
}

bool Lasting(const absl::Status& s) {
  const CollectorErrorCode code = CollectorErrorCodeOf(s);
  return code == CollectorErrorCode::kNotFound || code == CollectorErrorCode::kUnsupported ||
         code == CollectorErrorCode::kPermissionDenied;
}

// Its options.
const OptionKey<std::vector<std::string>> kEnableOptional{"rdma-enable-optional-counters", {}};
const OptionKey<bool> kPerProcess{"rdma-per-process", false};
const OptionKey<uint64_t> kQueryBudget{"device-query-budget", 2000};

}  // namespace

absl::StatusOr<std::unique_ptr<Collector>> RdmaNetlinkCollector::Create(
    const CollectorContext& ctx) {
  if (ctx.options == nullptr || ctx.store == nullptr || ctx.ports == nullptr) {
    return absl::InvalidArgumentError("rdma_netlink needs a config, a store and a port inventory");
  }
  // A fixture or simulated sysfs tree (--sysfs-root): the kernel's RDMA
  // devices are not the tree's, so netlink is not asked at all.
  RdmaNetlinkTransportFactory transports;
  if (ctx.options->sysfs_root == "/sys") transports = MakeKernelRdmaNetlinkTransport;
  return std::make_unique<RdmaNetlinkCollector>(ctx, std::move(transports));
}

std::vector<OptionSpec> RdmaNetlinkCollector::Options() {
  return {
      option::List(kEnableOptional,
                   "Comma-separated optional RDMA hw counters (e.g. mlx5 cc_rx_ce_pkts) the "
                   "rdma_netlink collector enables on every port at discovery, in addition to "
                   "those already enabled. Needs CAP_NET_ADMIN (e.g. systemd "
                   "AmbientCapabilities=CAP_NET_ADMIN); without it the kernel refuses (counted "
                   "as permission_denied). Empty changes nothing."),
      option::Bool(kPerProcess,
                   "Per-process RDMA QP counters: the rdma_netlink collector sets auto mode by "
                   "PID on every port (each process's QPs get a counter object) and exports the "
                   "top processes by retransmits/out-of-sequence per port, the rest as "
                   "process=\"other\". Needs CAP_NET_ADMIN (e.g. systemd "
                   "AmbientCapabilities=CAP_NET_ADMIN)."),
      option::Integer(kQueryBudget,
                      "Device (firmware) queries per second the rdma_netlink reads may cost one "
                      "RDMA device (see fabricscope_device_queries_total): above it the "
                      "medium tier's reads of the device are stretched first, then the hot "
                      "tier's, each change logged. The default keeps the full-rate plan "
                      "(about 330/s per mlx5 port) with room, and bounds per-process mode, "
                      "whose reads cost N x K. 0: no budget.",
                      0, 10'000'000),
  };
}

RdmaNetlinkCollector::RdmaNetlinkCollector(const CollectorContext& ctx,
                                           RdmaNetlinkTransportFactory transports)
    : store_(ctx.store),
      ports_(ctx.ports),
      hot_counters_(ctx.options->hot_counters.begin(), ctx.options->hot_counters.end()),
      enable_optional_(ctx.options->values.Get(kEnableOptional)),
      transports_(std::move(transports)),
      per_process_(ctx.options->values.Get(kPerProcess)),
      proc_root_(ctx.options->proc_root),
      intervals_(ctx.options->intervals),
      budget_(ctx.options->values.Get(kQueryBudget)),
      metrics_(ctx.metrics) {
  if (ctx.metrics != nullptr) {
    source_gauge_ = &ctx.metrics->Gauge(kHwCountersSource);
    optional_gauge_ = &ctx.metrics->Gauge(kOptionalCounterEnabled);
    if (per_process_) process_dropped_ = &ctx.metrics->Counter(kProcessSeriesDropped).Add({});
  }
}

RdmaNetlinkCollector::~RdmaNetlinkCollector() = default;

std::vector<Tier> RdmaNetlinkCollector::Tiers() const {
  return {Tier::kHot, Tier::kMedium, Tier::kConfig};
}

absl::Status RdmaNetlinkCollector::Discover(PollContext& ctx) {
  Replan(ctx, /*discovery=*/true);
  return absl::OkStatus();
}

absl::Status RdmaNetlinkCollector::Poll(PollContext& ctx) {
  if (unsupported()) return absl::OkStatus();
  switch (ctx.tier()) {
    case Tier::kHot:
      ++tiers_[kHotSlot].ticks;
      PollCounters(tiers_[kHotSlot], kHotSlot, ctx);
      break;
    case Tier::kMedium:
      ++tiers_[kMediumSlot].ticks;
      PollCounters(tiers_[kMediumSlot], kMediumSlot, ctx);
      if (per_process_) PollProcesses(tiers_[kMediumSlot], ctx);
      break;
    case Tier::kConfig:
      Replan(ctx, /*discovery=*/false);
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

RdmaNetlinkTransport* RdmaNetlinkCollector::Transport(TierState& ts, PollContext& ctx) {
  if (ts.transport != nullptr) return ts.transport.get();
  if (!ts.transport_status.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<RdmaNetlinkTransport>> t = transports_();
  if (!t.ok()) {
    ts.transport_status = t.status();
    ctx.Error(t.status(), kName);
    return nullptr;
  }
  ts.transport = *std::move(t);
  return ts.transport.get();
}

void RdmaNetlinkCollector::PollCounters(TierState& ts, int slot, PollContext& ctx) {
  if (plan_generation_.load(std::memory_order_acquire) != ts.generation) {
    std::lock_guard<std::mutex> lock(plan_mu_);
    ts.plan = plan_;
    ts.generation = plan_generation_.load(std::memory_order_acquire);
    absl::flat_hash_set<uint64_t> live;
    if (ts.plan != nullptr) {
      for (const PortPlan& p : ts.plan->ports) {
        if (ts.seen.contains(p.claim_id)) live.insert(p.claim_id);
      }
    }
    ts.seen = std::move(live);
  }
  if (ts.plan == nullptr || ts.plan->ports.empty()) return;
  RdmaNetlinkTransport* t = Transport(ts, ctx);
  if (t == nullptr) return;
  for (const PortPlan& p : ts.plan->ports) {
    if (p.series[slot].empty() || p.released->load(std::memory_order_acquire)) continue;
    // First sight of this claim: rdma_sysfs may have read the port in this
    // tick already (the claim is newer than its check); start next tick.
    if (ts.seen.insert(p.claim_id).second) continue;
    // The device's budget stride: this tier reads it every stride-th tick.
    const uint32_t stride = p.device_cost->stride[slot].load(std::memory_order_relaxed);
    if (stride > 1 && ts.ticks % stride != 0) continue;
    absl::Status s = Exchange(t, BuildRdmaStatGet(p.device_index, p.port), &ts.replies);
    absl::StatusOr<RdmaNlPortStats> stats =
        s.ok() ? ParseRdmaStatGet(ts.replies) : absl::StatusOr<RdmaNlPortStats>(s);
    if (stats.ok()) {
      const uint32_t served = static_cast<uint32_t>(stats->counters.size());
      p.port_cost->served.store(served, std::memory_order_relaxed);
      p.device_cost->Count(served, p.port_cost->objects.load(std::memory_order_relaxed));
    }
    const std::string key = PortKey(p.device, p.port);
    if (!stats.ok()) {
      if (Lasting(stats.status())) {
        // Given back to sysfs from the next tick; the config tier re-probes.
        p.released->store(true, std::memory_order_release);
        ports_->SetHwCountersClaim(p.device, p.port, false);
        ctx.Error(absl::Status(stats.status().code(),
                               absl::StrCat(stats.status().message(),
                                            "; the port's hw_counters go back to sysfs")),
                  key);
      } else {
        ctx.Error(stats.status(), key);
      }
      continue;
    }
    const auto& series = p.series[slot];
    for (const RdmaNlCounter& c : stats->counters) {
      auto it = series.find(c.name);
      if (it != series.end()) ctx.Append(it->second, c.value);
    }
  }
}

std::string RdmaNetlinkCollector::ProcessName(uint32_t pid) {
  absl::StatusOr<std::string> comm = ReadAttribute(absl::StrCat(proc_root_, "/", pid, "/comm"));
  if (!comm.ok() || comm->empty()) return "unknown";
  std::string name = comm->substr(0, 16);  // TASK_COMM_LEN
  // Printable ASCII only: the name is part of a series key and a label value.
  for (char& c : name) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return name;
}

bool RdmaNetlinkCollector::AppendProcess(const std::string& device, uint32_t port,
                                         absl::string_view process, const uint64_t* values,
                                         PollContext& ctx, ProcessTick* tick) {
  constexpr size_t kNumCounters = std::size(kProcessCounters);
  const bool other = process == "other";
  for (size_t i = 0; i < kNumCounters; ++i) {
    if (tick->live.size() >= kMaxProcessSeries) {
      ++tick->dropped;
      continue;
    }
    SeriesKey key{"rdma_process", absl::StrCat(kProcessCounters[i], "@", process), device, port,
                  ""};
    auto it = process_series_.find(key);
    if (it == process_series_.end()) {
      // The store never forgets a series: bound what pid churn can register
      // (the per-port `other` series are bounded by the ports).
      if (!other && process_series_.size() >= max_process_store_series_) {
        if (i == 0) {  // summed into `other`
          tick->dropped += kNumCounters;
          return false;
        }
        ++tick->dropped;
        continue;
      }
      std::optional<Signal> sig = MapCounter(key);
      SeriesId id = sig.has_value() ? store_->Register(key, *sig) : kInvalidSeries;
      if (id == kInvalidSeries) {  // the store's budget refused it
        ++tick->dropped;
        continue;
      }
      it = process_series_.emplace(std::move(key), id).first;
    } else if (!process_live_.contains(it->second)) {
      store_->SetPresent(it->second, true);
    }
    ctx.Append(it->second, values[i]);
    tick->live.insert(it->second);
  }
  return true;
}

void RdmaNetlinkCollector::PollProcesses(TierState& ts, PollContext& ctx) {
  if (ts.plan == nullptr) return;
  RdmaNetlinkTransport* t = Transport(ts, ctx);
  if (t == nullptr) return;
  constexpr size_t kNumCounters = std::size(kProcessCounters);
  struct Proc {
    uint32_t pid = 0;
    std::array<uint64_t, kNumCounters> values{};
    uint64_t rank = 0;
  };
  ProcessTick tick;
  absl::flat_hash_set<uint32_t> dumped;
  for (const PortPlan& p : ts.plan->ports) {
    if (!dumped.insert(p.device_index).second) continue;
    const uint32_t stride = p.device_cost->stride[kMediumSlot].load(std::memory_order_relaxed);
    if (stride > 1 && ts.ticks % stride != 0) {
      // Not this tick: the device's series stay as they are.
      for (const auto& [key, id] : process_series_) {
        if (key.device == p.device && process_live_.contains(id)) tick.live.insert(id);
      }
      continue;
    }
    absl::Status s = Exchange(t, BuildRdmaQpCounterDump(p.device_index), &ts.replies);
    absl::StatusOr<std::vector<RdmaNlQpCounter>> objects =
        s.ok() ? ParseRdmaQpCounterDump(ts.replies)
               : absl::StatusOr<std::vector<RdmaNlQpCounter>>(s);
    if (!objects.ok()) {
      ctx.Error(objects.status(), absl::StrCat(p.device, " qp counters"));
      continue;
    }
    if (p.device_cost->counter_object != nullptr) {
      p.device_cost->counter_object->Increment(static_cast<double>(objects->size()));
    }
    // Per port of this device: per PID sums.
    absl::flat_hash_map<uint32_t, absl::flat_hash_map<uint32_t, Proc>> by_port;
    for (const RdmaNlQpCounter& o : *objects) {
      if (o.pid == 0) continue;  // a kernel consumer
      Proc& proc = by_port[o.port][o.pid];
      proc.pid = o.pid;
      for (const RdmaNlCounter& c : o.counters) {
        for (size_t i = 0; i < kNumCounters; ++i) {
          if (c.name == kProcessCounters[i]) {
            proc.values[i] += c.value;
            proc.rank += c.value;
          }
        }
      }
    }
    for (auto& [port, procs] : by_port) {
      std::vector<Proc> ranked;
      ranked.reserve(procs.size());
      for (auto& [pid, proc] : procs) ranked.push_back(proc);
      std::sort(ranked.begin(), ranked.end(), [](const Proc& a, const Proc& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pid < b.pid;
      });
      Proc other;
      bool has_other = false;
      for (size_t r = 0; r < ranked.size(); ++r) {
        if (r < kTopProcesses &&
            AppendProcess(p.device, port,
                          absl::StrCat(ranked[r].pid, "/", ProcessName(ranked[r].pid)),
                          ranked[r].values.data(), ctx, &tick)) {
          continue;
        }
        has_other = true;
        for (size_t i = 0; i < kNumCounters; ++i) other.values[i] += ranked[r].values[i];
      }
      if (has_other) AppendProcess(p.device, port, "other", other.values.data(), ctx, &tick);
    }
  }
  // Series not appended this tick (process gone, fell out of the top): absent,
  // so not exported; their samples stay in the store until they age out.
  for (SeriesId id : process_live_) {
    if (!tick.live.contains(id)) store_->SetPresent(id, false);
  }
  process_live_ = std::move(tick.live);
  if (tick.dropped > 0 && process_dropped_ != nullptr) {
    process_dropped_->Increment(static_cast<double>(tick.dropped));
  }
}

void RdmaNetlinkCollector::RefreshOptionalStatus(RdmaNetlinkTransport* t, const PortInfo& port,
                                                 uint32_t device_index, bool enable,
                                                 PollContext& ctx) {
  const std::string key = PortKey(port.device, port.port);
  if (no_status_.contains(key)) return;
  std::vector<uint8_t> replies;
  absl::Status s = Exchange(t, BuildRdmaStatGetStatus(device_index, port.port), &replies);
  absl::StatusOr<std::vector<RdmaNlCounterStatus>> status =
      s.ok() ? ParseRdmaStatStatus(replies) : absl::StatusOr<std::vector<RdmaNlCounterStatus>>(s);
  if (!status.ok()) {
    if (CollectorErrorCodeOf(status.status()) == CollectorErrorCode::kUnsupported) {
      no_status_.insert(key);  // kernel < 6.0: no optional counters status
      ctx.Error(absl::UnimplementedError(absl::StrCat(
                    "no optional counters status (STAT_GET_STATUS): ", status.status().message())),
                key);
    } else {
      ctx.Error(status.status(), key);
    }
    return;
  }
  if (enable) {
    enabled_once_.insert(key);
    std::vector<uint32_t> want;
    for (const RdmaNlCounterStatus& c : *status) {
      if (c.optional && c.enabled) want.push_back(c.index);
    }
    const size_t already = want.size();
    for (const std::string& name : enable_optional_) {
      auto it = std::find_if(status->begin(), status->end(), [&](const RdmaNlCounterStatus& c) {
        return c.optional && c.name == name;
      });
      if (it == status->end()) {
        Log(LogLevel::kWarn, kName, "no such optional counter on this port; not enabled",
            {{"port", key}, {"counter", name}});
        continue;
      }
      if (!it->enabled && std::find(want.begin(), want.end(), it->index) == want.end()) {
        want.push_back(it->index);
      }
    }
    if (want.size() > already) {
      absl::Status set =
          Exchange(t, BuildRdmaSetOptionalCounters(device_index, port.port, want), &replies);
      if (!set.ok()) {
        ctx.Error(absl::Status(
                      set.code(),
                      absl::StrCat("enabling optional counters: ", set.message(),
                                   absl::IsPermissionDenied(set) ? " (needs CAP_NET_ADMIN)" : "")),
                  key);
      } else {
        Log(LogLevel::kInfo, kName, "optional counters enabled",
            {{"port", key}, {"count", absl::StrCat(want.size() - already)}});
        // Re-read what the kernel now reports.
        RefreshOptionalStatus(t, port, device_index, /*enable=*/false, ctx);
        return;
      }
    }
  }
  if (optional_gauge_ == nullptr) return;
  for (const RdmaNlCounterStatus& c : *status) {
    if (!c.optional) continue;
    optional_gauge_
        ->Add({{"device", port.device}, {"port", absl::StrCat(port.port)}, {"counter", c.name}})
        .Set(c.enabled ? 1 : 0);
  }
}

void RdmaNetlinkCollector::Replan(PollContext& ctx, bool discovery) {
  std::lock_guard<std::mutex> replan_lock(replan_mu_);
  std::shared_ptr<const Plan> cur;
  {
    std::lock_guard<std::mutex> lock(plan_mu_);
    cur = plan_;
  }
  const std::vector<PortInfo> inventory = ports_->List();
  auto publish_sources = [&](const Plan* plan) {
    if (source_gauge_ == nullptr) return;
    for (const PortInfo& p : inventory) {
      if (!p.present) continue;
      bool netlink = false;
      if (plan != nullptr) {
        for (const PortPlan& pp : plan->ports) {
          netlink = netlink || (pp.device == p.device && pp.port == p.port &&
                                !pp.released->load(std::memory_order_acquire));
        }
      }
      const std::string port = absl::StrCat(p.port);
      source_gauge_->Add({{"device", p.device}, {"port", port}, {"source", "netlink"}})
          .Set(netlink ? 1 : 0);
      source_gauge_->Add({{"device", p.device}, {"port", port}, {"source", "sysfs"}})
          .Set(netlink ? 0 : 1);
    }
  };

  if (!transports_) {  // no kernel to ask (a --sysfs-root tree): sysfs for every port
    if (discovery) {
      Log(LogLevel::kInfo, kName, "--sysfs-root is not /sys: RDMA netlink not used",
          {{"ports", absl::StrCat(inventory.size())}});
    }
    unsupported_.store(true, std::memory_order_release);
    publish_sources(nullptr);
    return;
  }
  TierState& ts = tiers_[kConfigTier];
  RdmaNetlinkTransport* t = Transport(ts, ctx);
  std::vector<uint8_t> replies;
  absl::Status s =
      t == nullptr ? ts.transport_status : Exchange(t, BuildRdmaDeviceDump(), &replies);
  absl::StatusOr<std::vector<RdmaNlDevice>> devices =
      s.ok() ? ParseRdmaDeviceDump(replies) : absl::StatusOr<std::vector<RdmaNlDevice>>(s);
  if (!devices.ok()) {
    if (discovery && CollectorErrorCodeOf(devices.status()) == CollectorErrorCode::kUnsupported) {
      // Reported once (by Transport() when the socket failed, else here); the
      // sysfs path carries on for every port.
      if (t != nullptr) ctx.Error(devices.status(), kName);
      Log(LogLevel::kInfo, kName,
          "RDMA netlink statistics unsupported on this kernel; hw_counters stay on sysfs",
          {{"reason", std::string(devices.status().message())}});
      unsupported_.store(true, std::memory_order_release);
      publish_sources(nullptr);
      return;
    }
    if (t != nullptr) ctx.Error(devices.status(), kName);
    return;  // keep the current plan
  }
  absl::flat_hash_map<std::string, uint32_t> index_of;
  for (const RdmaNlDevice& d : *devices) index_of[d.name] = d.index;

  auto next = std::make_shared<Plan>();
  bool changed = cur == nullptr;
  absl::flat_hash_set<std::string> kept;
  for (const PortInfo& info : inventory) {
    if (!info.present) continue;
    auto idx = index_of.find(info.device);
    if (idx == index_of.end()) continue;  // not a kernel RDMA device (replay, fixture): sysfs
    const std::string key = PortKey(info.device, info.port);
    RefreshOptionalStatus(t, info, idx->second,
                          !enable_optional_.empty() && !enabled_once_.contains(key), ctx);

    absl::Status gs = Exchange(t, BuildRdmaStatGet(idx->second, info.port), &replies);
    absl::StatusOr<RdmaNlPortStats> stats =
        gs.ok() ? ParseRdmaStatGet(replies) : absl::StatusOr<RdmaNlPortStats>(gs);
    if (stats.ok() && stats->counters.empty()) {
      stats = absl::UnimplementedError("the port reports no hardware counters over netlink");
    }
    if (!stats.ok()) {
      if (!Lasting(stats.status()) || reported_.insert(key).second) {
        ctx.Error(absl::Status(stats.status().code(),
                               absl::StrCat(stats.status().message(),
                                            "; the port's hw_counters stay on sysfs")),
                  key);
      }
      continue;
    }
    reported_.erase(key);
    PortPlan pp;
    pp.device = info.device;
    pp.device_index = idx->second;
    pp.port = info.port;
    pp.device_cost = CostOf(info);
    std::shared_ptr<PortCost>& port_cost = port_costs_[key];
    if (port_cost == nullptr) port_cost = std::make_shared<PortCost>();
    pp.port_cost = port_cost;
    port_cost->served.store(static_cast<uint32_t>(stats->counters.size()),
                            std::memory_order_relaxed);
    pp.device_cost->Count(static_cast<uint32_t>(stats->counters.size()),
                          port_cost->objects.load(std::memory_order_relaxed));
    for (const RdmaNlCounter& c : stats->counters) {
      if (c.name == "lifespan") continue;  // a setting, as in sysfs
      SeriesKey skey{"hw_counters", c.name, info.device, info.port, info.netdev};
      std::optional<Signal> sig = MapCounter(skey);
      if (!sig.has_value()) continue;
      const int slot = hot_counters_.contains(c.name) ? kHotSlot : kMediumSlot;
      pp.series[slot].emplace(c.name, store_->Register(skey, *sig));
    }
    if (pp.series[kHotSlot].empty() && pp.series[kMediumSlot].empty()) continue;
    // Keep the current claim when nothing changed (the tiers carry on).
    const PortPlan* old = nullptr;
    if (cur != nullptr) {
      for (const PortPlan& o : cur->ports) {
        if (o.device == pp.device && o.port == pp.port) old = &o;
      }
    }
    if (old != nullptr && !old->released->load(std::memory_order_acquire) &&
        old->device_index == pp.device_index && old->series == pp.series) {
      next->ports.push_back(*old);
    } else {
      pp.claim_id = next_claim_id_++;
      pp.released = std::make_shared<std::atomic<bool>>(false);
      ports_->SetHwCountersClaim(pp.device, pp.port, true);  // before the tiers see the plan
      next->ports.push_back(std::move(pp));
      changed = true;
      if (old != nullptr) old->released->store(true, std::memory_order_release);
    }
    kept.insert(key);
    if (per_process_ && auto_pid_asked_.insert(key).second) {
      absl::Status as = Exchange(t, BuildRdmaSetAutoPid(idx->second, info.port), &replies);
      if (!as.ok()) {
        ctx.Error(absl::Status(
                      as.code(),
                      absl::StrCat("auto mode by PID: ", as.message(),
                                   absl::IsPermissionDenied(as) ? " (needs CAP_NET_ADMIN)" : "")),
                  key);
      }
    }
  }
  // Claims that ended (port gone, no longer answering): stop the tiers first,
  // then give the port back to sysfs.
  if (cur != nullptr) {
    for (const PortPlan& o : cur->ports) {
      if (kept.contains(PortKey(o.device, o.port))) continue;
      changed = true;
      o.released->store(true, std::memory_order_release);
      ports_->SetHwCountersClaim(o.device, o.port, false);
    }
  }
  if (changed) {
    size_t claimed = next->ports.size();
    {
      std::lock_guard<std::mutex> lock(plan_mu_);
      plan_ = next;
      plan_generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    Log(LogLevel::kInfo, kName, "hw_counters over netlink",
        {{"ports", absl::StrCat(claimed)}, {"inventory_ports", absl::StrCat(inventory.size())}});
  }
  const Plan* in_effect = changed ? next.get() : cur.get();
  publish_sources(in_effect);
  if (in_effect != nullptr) PlanBudget(t, *in_effect, ctx);
}

void RdmaNetlinkCollector::DeviceCost::Count(uint32_t served, uint32_t objects) const {
  if (hw_stats != nullptr) hw_stats->Increment(get_hw_stats_commands);
  if (counter_object != nullptr && served > 0 && objects > 0) {
    counter_object->Increment(static_cast<double>(served) * objects);
  }
}

std::shared_ptr<RdmaNetlinkCollector::DeviceCost> RdmaNetlinkCollector::CostOf(
    const PortInfo& port) {
  std::shared_ptr<DeviceCost>& cost = device_costs_[port.device];
  if (cost != nullptr) return cost;
  cost = std::make_shared<DeviceCost>();
  cost->get_hw_stats_commands = GetHwStatsCommands(port.driver);
  if (metrics_ != nullptr) {
    cost->hw_stats = &metrics_->Counter(DeviceQueriesMetric())
                          .Add({{"device", port.device}, {"kind", "hw_stats"}});
    cost->counter_object = &metrics_->Counter(DeviceQueriesMetric())
                                .Add({{"device", port.device}, {"kind", "counter_object"}});
  }
  return cost;
}

double RdmaNetlinkCollector::QueriesPerSecond(const DeviceLoad& load,
                                              const TierIntervals& intervals, uint32_t hot_stride,
                                              uint32_t medium_stride) {
  const double hot = absl::ToDoubleSeconds(intervals[static_cast<int>(Tier::kHot)]) * hot_stride;
  const double medium =
      absl::ToDoubleSeconds(intervals[static_cast<int>(Tier::kMedium)]) * medium_stride;
  const double config = absl::ToDoubleSeconds(intervals[static_cast<int>(Tier::kConfig)]);
  double per_second = 0;
  double objects = 0;
  for (const PortLoad& p : load.ports) {
    const double request = load.get_hw_stats_commands + static_cast<double>(p.served) * p.objects;
    double reads = 1 / config;  // the config tier's re-probe
    if (p.hot) reads += 1 / hot;
    if (p.medium) reads += 1 / medium;
    per_second += request * reads;
    objects += p.objects;
  }
  per_second += objects / config;  // the config tier's counter-object dump
  if (load.per_process) per_second += objects / medium;
  return per_second;
}

RdmaNetlinkCollector::ReadStrides RdmaNetlinkCollector::PlanStrides(const DeviceLoad& load,
                                                                    const TierIntervals& intervals,
                                                                    uint64_t budget) {
  ReadStrides r;
  auto cost = [&] { return QueriesPerSecond(load, intervals, r.hot, r.medium); };
  r.per_second = cost();
  if (budget == 0 || r.per_second <= static_cast<double>(budget)) return r;
  const absl::Duration hot = intervals[static_cast<int>(Tier::kHot)];
  const absl::Duration medium = intervals[static_cast<int>(Tier::kMedium)];
  const absl::Duration slow = intervals[static_cast<int>(Tier::kSlow)];
  const absl::Duration config = intervals[static_cast<int>(Tier::kConfig)];
  auto over = [&] { return (r.per_second = cost()) > static_cast<double>(budget); };
  // The medium tier's counters first, up to the slow interval; then the hot
  // tier's (the congestion signals); then both, up to the config interval.
  while (over() && medium * (2 * r.medium) <= slow) r.medium *= 2;
  while (over() && hot * (2 * r.hot) <= slow) r.hot *= 2;
  while (over()) {
    const bool hot_room = hot * (2 * r.hot) <= config;
    const bool medium_room = medium * (2 * r.medium) <= config;
    if (!hot_room && !medium_room) break;
    if (medium_room) r.medium *= 2;
    if (hot_room) r.hot *= 2;
  }
  r.within = r.per_second <= static_cast<double>(budget);
  return r;
}

std::vector<ReadPlanRow> RdmaNetlinkCollector::ReadPlan() const {
  std::shared_ptr<const Plan> plan;
  {
    std::lock_guard<std::mutex> lock(plan_mu_);
    plan = plan_;
  }
  std::vector<ReadPlanRow> rows;
  if (plan == nullptr) return rows;
  absl::flat_hash_map<std::string, uint64_t> objects_of;  // per device
  std::vector<std::pair<std::string, uint32_t>> devices;  // name, stride[medium], in order
  const double config = absl::ToDoubleSeconds(intervals_[static_cast<int>(Tier::kConfig)]);
  for (const PortPlan& p : plan->ports) {
    if (p.released->load(std::memory_order_acquire)) continue;
    const uint32_t n = p.port_cost->served.load(std::memory_order_relaxed);
    const uint32_t k = p.port_cost->objects.load(std::memory_order_relaxed);
    const double request = p.device_cost->get_hw_stats_commands + static_cast<double>(n) * k;
    const std::string note = absl::StrCat(p.device_cost->get_hw_stats_commands,
                                          " (get_hw_stats) + N x K = ", n, " x ", k);
    for (int slot : {kHotSlot, kMediumSlot}) {
      if (p.series[slot].empty()) continue;
      const Tier tier = slot == kHotSlot ? Tier::kHot : Tier::kMedium;
      const uint32_t stride = p.device_cost->stride[slot].load(std::memory_order_relaxed);
      const double per_second =
          1 / (absl::ToDoubleSeconds(intervals_[static_cast<int>(tier)]) * stride);
      rows.push_back({.collector = std::string(kName),
                      .device = p.device,
                      .port = p.port,
                      .read = "STAT_GET",
                      .tier = std::string(TierName(tier)),
                      .values = n,
                      .reads_per_second = per_second,
                      .syscalls_per_second = 2 * per_second,  // sendmsg + recvmsg
                      .queries_per_second = request * per_second,
                      .note = stride > 1 ? absl::StrCat(note, "; once every ", stride,
                                                        " ticks (--device-query-budget)")
                                         : note});
    }
    rows.push_back({.collector = std::string(kName),
                    .device = p.device,
                    .port = p.port,
                    .read = "STAT_GET (re-probe)",
                    .tier = std::string(TierName(Tier::kConfig)),
                    .values = n,
                    .reads_per_second = 1 / config,
                    .syscalls_per_second = 2 / config,
                    .queries_per_second = request / config,
                    .note = note});
    if (!objects_of.contains(p.device)) {
      devices.emplace_back(p.device, p.device_cost->stride[kMediumSlot].load());
    }
    objects_of[p.device] += k;
  }
  for (const auto& [device, medium_stride] : devices) {
    const double k = static_cast<double>(objects_of[device]);
    rows.push_back({.collector = std::string(kName),
                    .device = device,
                    .read = "counter-object dump",
                    .tier = std::string(TierName(Tier::kConfig)),
                    .values = static_cast<uint32_t>(k),
                    .reads_per_second = 1 / config,
                    .syscalls_per_second = 2 / config,
                    .queries_per_second = k / config,
                    .note = "one query per counter object (K)"});
    if (per_process_) {
      const double per_second =
          1 / (absl::ToDoubleSeconds(intervals_[static_cast<int>(Tier::kMedium)]) * medium_stride);
      rows.push_back({.collector = std::string(kName),
                      .device = device,
                      .read = "counter-object dump (--rdma-per-process)",
                      .tier = std::string(TierName(Tier::kMedium)),
                      .values = static_cast<uint32_t>(k),
                      .reads_per_second = per_second,
                      .syscalls_per_second = 2 * per_second,
                      .queries_per_second = k * per_second,
                      .note = "one query per counter object (K)"});
    }
  }
  return rows;
}

RdmaNetlinkCollector::ReadStrides RdmaNetlinkCollector::StridesForTest(const std::string& device) {
  std::lock_guard<std::mutex> lock(replan_mu_);
  auto it = device_costs_.find(device);
  if (it == device_costs_.end()) return {};
  ReadStrides r = it->second->planned;
  r.hot = it->second->stride[kHotSlot].load();
  r.medium = it->second->stride[kMediumSlot].load();
  return r;
}

void RdmaNetlinkCollector::PlanBudget(RdmaNetlinkTransport* t, const Plan& plan, PollContext& ctx) {
  // K per port: one dump of each device's counter objects (one query each).
  std::vector<uint8_t> replies;
  absl::flat_hash_map<std::string, DeviceLoad> loads;
  absl::flat_hash_set<uint32_t> dumped;
  for (const PortPlan& p : plan.ports) {
    if (!dumped.insert(p.device_index).second) continue;
    absl::Status s = Exchange(t, BuildRdmaQpCounterDump(p.device_index), &replies);
    absl::StatusOr<std::vector<RdmaNlQpCounter>> objects =
        s.ok() ? ParseRdmaQpCounterDump(replies) : absl::StatusOr<std::vector<RdmaNlQpCounter>>(s);
    const std::string key = absl::StrCat(p.device, " counter objects");
    if (!objects.ok()) {
      // K stays as last seen (0 if never): reported once per device.
      if (reported_.insert(key).second) ctx.Error(objects.status(), key);
      continue;
    }
    reported_.erase(key);
    if (p.device_cost->counter_object != nullptr) {
      p.device_cost->counter_object->Increment(static_cast<double>(objects->size()));
    }
    absl::flat_hash_map<uint32_t, uint32_t> per_port;
    for (const RdmaNlQpCounter& o : *objects) ++per_port[o.port];
    for (const PortPlan& q : plan.ports) {
      if (q.device_index != p.device_index) continue;
      auto it = per_port.find(q.port);
      q.port_cost->objects.store(it == per_port.end() ? 0 : it->second, std::memory_order_relaxed);
    }
  }
  for (const PortPlan& p : plan.ports) {
    DeviceLoad& load = loads[p.device];
    load.get_hw_stats_commands = p.device_cost->get_hw_stats_commands;
    load.per_process = per_process_;
    const uint32_t objects = p.port_cost->objects.load(std::memory_order_relaxed);
    load.ports.push_back({p.port_cost->served.load(std::memory_order_relaxed), objects,
                          !p.series[kHotSlot].empty(), !p.series[kMediumSlot].empty()});
    if (metrics_ != nullptr) {
      metrics_->Gauge(kCounterObjects)
          .Add({{"device", p.device}, {"port", absl::StrCat(p.port)}})
          .Set(objects);
    }
  }
  for (const auto& [device, load] : loads) {
    DeviceCost& cost = *device_costs_[device];
    const ReadStrides r = PlanStrides(load, intervals_, budget_);
    const bool strides_changed =
        !cost.has_plan || r.hot != cost.planned.hot || r.medium != cost.planned.medium;
    cost.stride[kHotSlot].store(r.hot, std::memory_order_relaxed);
    cost.stride[kMediumSlot].store(r.medium, std::memory_order_relaxed);
    const absl::Duration hot = intervals_[static_cast<int>(Tier::kHot)] * r.hot;
    const absl::Duration medium = intervals_[static_cast<int>(Tier::kMedium)] * r.medium;
    if (metrics_ != nullptr) {
      metrics_->Gauge(kReadInterval)
          .Add({{"device", device}, {"tier", "hot"}})
          .Set(absl::ToDoubleSeconds(hot));
      metrics_->Gauge(kReadInterval)
          .Add({{"device", device}, {"tier", "medium"}})
          .Set(absl::ToDoubleSeconds(medium));
      metrics_->Gauge(kPlannedQueries).Add({{"device", device}}).Set(r.per_second);
    }
    if (strides_changed && (cost.has_plan || r.hot > 1 || r.medium > 1 || !r.within)) {
      uint64_t objects = 0;
      for (const PortLoad& p : load.ports) objects += p.objects;
      Log(r.within ? LogLevel::kInfo : LogLevel::kWarn, kName,
          r.hot == 1 && r.medium == 1
              ? "device query budget: the device's ports are read at full rate"
              : (r.within ? "device query budget: reads of the device's ports stretched"
                          : "device query budget exceeded even at the longest read intervals"),
          {{"device", device},
           {"budget_per_second", absl::StrCat(budget_)},
           {"planned_per_second", absl::StrFormat("%.0f", r.per_second)},
           {"hot_interval", absl::FormatDuration(hot)},
           {"medium_interval", absl::FormatDuration(medium)},
           {"counter_objects", absl::StrCat(objects)}});
    }
    cost.planned = r;
    cost.has_plan = true;
  }
}

}  // namespace fabricscope
