#include "collectors/rdma_sysfs_collector.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/signals.h"

namespace fabricscope {
namespace {

constexpr absl::string_view kSources[] = {"hw_counters", "counters", "counters_ext"};

bool IsPmaDataCounter(absl::string_view name) {
  return name == "port_xmit_data" || name == "port_rcv_data" || name == "port_xmit_packets" ||
         name == "port_rcv_packets";
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// "4: ACTIVE" -> "ACTIVE".
std::string StripEnumPrefix(const std::string& s) {
  size_t colon = s.find(": ");
  if (colon == std::string::npos) return s;
  uint32_t n;
  if (!absl::SimpleAtoi(absl::string_view(s).substr(0, colon), &n)) return s;
  return s.substr(colon + 2);
}

// Numeric names of `dir` in numeric order (port numbers, gid indexes).
std::vector<std::pair<uint32_t, std::string>> NumericEntries(const std::string& dir) {
  std::vector<std::pair<uint32_t, std::string>> out;
  auto names = ListDir(dir);
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    uint32_t v;
    if (absl::SimpleAtoi(n, &v)) out.emplace_back(v, n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string FindNetdev(const std::string& dev_dir, const std::string& port_dir, uint32_t port) {
  const std::string ndevs = port_dir + "/gid_attrs/ndevs";
  for (const auto& [idx, name] : NumericEntries(ndevs)) {
    auto v = ReadAttribute(ndevs + "/" + name);  // unused GID entries fail with EINVAL
    if (v.ok() && !v->empty()) return *v;
  }
  const std::string net = dev_dir + "/device/net";
  auto names = ListDir(net);
  if (!names.ok() || names->empty()) return "";
  if (names->size() > 1) {
    for (const std::string& n : *names) {
      auto dev_port = ReadAttribute(net + "/" + n + "/dev_port");
      uint32_t dp;
      if (dev_port.ok() && absl::SimpleAtoi(*dev_port, &dp) && dp + 1 == port) return n;
    }
  }
  return names->front();
}

// The basename of <dir>/device/driver (a symlink), "" if none.
std::string KernelDriver(const std::string& dev_dir) {
  std::error_code ec;
  const std::filesystem::path target =
      std::filesystem::read_symlink(dev_dir + "/device/driver", ec);
  return ec ? std::string() : target.filename().string();
}

// What a hot name means (family and labels other than where it was read), so
// that a vendor's name for the same signal is hot too.
std::string SignalIdentity(const Signal& s) {
  std::string id(s.family->name);
  for (size_t i = 0; i < s.family->labels.size() && i < s.label_values.size(); ++i) {
    const std::string& l = s.family->labels[i];
    if (l == "device" || l == "port" || l == "netdev") continue;
    absl::StrAppend(&id, "\x1f", l, "=", s.label_values[i]);
  }
  return id;
}

absl::flat_hash_set<std::string> HotSignals(const std::vector<std::string>& hot_counters) {
  absl::flat_hash_set<std::string> out;
  for (const std::string& name : hot_counters) {
    std::optional<Signal> s = MapCounter({"hw_counters", name, "", 0, ""});
    if (s.has_value()) out.insert(SignalIdentity(*s));
  }
  return out;
}

const OptionKey<uint64_t> kKernelHz{"kernel-hz", 0};
const OptionKey<std::string> kDeviceInclude{"rdma-device-include", ""};
const OptionKey<std::string> kDeviceExclude{"rdma-device-exclude", ""};
const OptionKey<bool> kIbPmaMad{"ib-pma-mad", false};

// After the PMA transport said this host cannot send MADs (no umad, no
// permission), the slow ticks before it is tried again (~5 min at 1 s).
constexpr int kPmaRetryTicks = 300;
constexpr absl::Duration kPmaTimeout = absl::Milliseconds(100);

absl::Status CheckDeviceRegex(const std::string& v) { return NetdevFilter::Compile(v).status(); }

NetdevFilter CompiledOrEmpty(const std::string& pattern) {
  absl::StatusOr<NetdevFilter> f = NetdevFilter::Compile(pattern);  // validated by the option
  return f.ok() ? *std::move(f) : NetdevFilter();
}

const MetricSpec& kCachedReads = DefineMetric(
    {.name = "fabricscope_rdma_sysfs_cached_reads_total",
     .type = MetricType::kCounter,
     .help = "hw_counters readings taken as the kernel's cached value (unchanged, inside the "
             "lifespan's staleness window; --kernel-hz): not appended, so the next fresh "
             "reading's interval covers both ticks.",
     .labels = {"device"},
     .component = "rdma_sysfs"});

std::string BootConfigPath() {
  struct utsname u {};
  if (uname(&u) != 0) return "";
  return absl::StrCat("/boot/config-", u.release);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collector>> RdmaSysfsCollector::Create(const CollectorContext& ctx) {
  if (ctx.options == nullptr || ctx.store == nullptr || ctx.ports == nullptr) {
    return absl::InvalidArgumentError("rdma_sysfs needs a config, a store and a port inventory");
  }
  return std::make_unique<RdmaSysfsCollector>(
      ctx, ctx.options->values.Get(kIbPmaMad) ? MakeUmadPmaTransport() : nullptr);
}

RdmaSysfsCollector::RdmaSysfsCollector(const CollectorContext& ctx,
                                       std::unique_ptr<SmpTransport> pma_transport)
    : pma_transport_(std::move(pma_transport)),
      root_(ctx.options->sysfs_root + "/class/infiniband"),
      hot_counters_(ctx.options->hot_counters.begin(), ctx.options->hot_counters.end()),
      hot_signals_(HotSignals(ctx.options->hot_counters)),
      store_(ctx.store),
      ports_(ctx.ports),
      metrics_(ctx.metrics),
      device_include_(CompiledOrEmpty(ctx.options->values.Get(kDeviceInclude))),
      device_exclude_(CompiledOrEmpty(ctx.options->values.Get(kDeviceExclude))),
      kernel_hz_(KernelHz(static_cast<int>(ctx.options->values.Get(kKernelHz)), BootConfigPath(),
                          &kernel_hz_from_boot_config_)),
      intervals_(ctx.options->intervals) {
  if (kernel_hz_ != static_cast<int>(ctx.options->values.Get(kKernelHz))) {
    Log(LogLevel::kInfo, kName, "kernel HZ for the hw_counters lifespan",
        {{"hz", absl::StrCat(kernel_hz_)},
         {"from",
          kernel_hz_from_boot_config_ ? BootConfigPath() : std::string("default (the coarsest)")}});
  }
}

bool RdmaSysfsCollector::Watched(absl::string_view device) const {
  if (!device_include_.empty() && !device_include_.Matches(device)) return false;
  return !device_exclude_.Matches(device);
}

std::vector<OptionSpec> RdmaSysfsCollector::Options() {
  return {option::String(kDeviceInclude, "REGEX",
                         "Only these RDMA devices (ECMAScript regex, full match, e.g. "
                         "\"mlx5_[0-7]\"): the others are never read by any collector (their "
                         "ports stay out of the inventory). Empty: every device.",
                         CheckDeviceRegex),
          option::String(kDeviceExclude, "REGEX",
                         "RDMA devices never read (ECMAScript regex, full match), e.g. the "
                         "restricted functions whose counter queries fail and flood the kernel "
                         "log. Applied after --rdma-device-include. Empty: none.",
                         CheckDeviceRegex),
          option::Integer(kKernelHz,
                          "The kernel's HZ (CONFIG_HZ), for the staleness window of cached "
                          "hw_counters (their lifespan is kept in jiffies): 0 reads CONFIG_HZ "
                          "from /boot/config-<release>, else assumes 100 (the coarsest, the "
                          "longest window: safe, at the cost of resolution on idle counters).",
                          0, 10000),
          option::Bool(kIbPmaMad,
                       "Read each InfiniBand port's PMA counters (counters/) with one "
                       "PortCountersExtended and one PortCounters MAD per slow tick over umad, "
                       "instead of the kernel's one MAD per file read (needs read-write access "
                       "to /dev/infiniband/umad*, as --ib-mad-topology). A port whose MADs fail "
                       "is read from its files that tick (counted); no umad access at all is "
                       "said once and retried every 300 slow ticks.")};
}

int RdmaSysfsCollector::KernelHz(int configured, const std::string& boot_config,
                                 bool* from_boot_config) {
  if (from_boot_config != nullptr) *from_boot_config = false;
  if (configured > 0) return configured;
  std::ifstream in(boot_config);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view v = line;
    int hz = 0;
    if (absl::ConsumePrefix(&v, "CONFIG_HZ=") && absl::SimpleAtoi(v, &hz) && hz >= 24 &&
        hz <= 10000) {
      if (from_boot_config != nullptr) *from_boot_config = true;
      return hz;
    }
  }
  return 100;
}

int64_t RdmaSysfsCollector::StaleWindowNs(uint64_t lifespan_ms, int hz) {
  // msecs_to_jiffies rounds up; a refresh happens once jiffies is past the
  // last refresh plus the lifespan: (L + 1) jiffies after it at the latest.
  const uint64_t jiffies = (lifespan_ms * static_cast<uint64_t>(hz) + 999) / 1000;
  return static_cast<int64_t>((jiffies + 1) * 1'000'000'000ull / static_cast<uint64_t>(hz));
}

RdmaSysfsCollector::~RdmaSysfsCollector() = default;

double RdmaSysfsCollector::HwStatsRefreshesPerSecond(int64_t interval_ns, int64_t window_ns) {
  if (interval_ns <= 0) return 0;
  const int64_t reads = window_ns <= 0 ? 1 : (window_ns + interval_ns - 1) / interval_ns;
  return 1e9 / static_cast<double>(reads * interval_ns);
}

std::vector<ReadPlanRow> RdmaSysfsCollector::ReadPlan() const {
  std::shared_ptr<const Topology> topo;
  {
    std::lock_guard<std::mutex> lock(topo_mu_);
    topo = topo_;
  }
  std::vector<ReadPlanRow> rows;
  if (topo == nullptr) return rows;
  std::map<std::string, std::string> drivers;
  for (const PortInfo& p : ports_->List()) drivers[p.device] = p.driver;
  for (const DeviceEntry& d : topo->devices) {
    if (!d.present) continue;
    const uint32_t get_hw_stats = GetHwStatsCommands(drivers[d.name]);
    for (const auto& [port, dir] : d.ports) {
      const bool claimed = ports_->HwCountersClaimed(d.name, port);
      bool refresh_counted = false;
      for (Tier tier : {Tier::kHot, Tier::kMedium, Tier::kSlow}) {
        const int t = static_cast<int>(tier);
        uint32_t hw = 0, pma = 0;
        int64_t window = 0;
        for (const CounterSpec& spec : d.files[t]) {
          if (spec.port != port) continue;
          if (spec.hw_counter) {
            ++hw;
            window = spec.stale_window_ns;
          } else {
            ++pma;
          }
        }
        const int64_t interval = absl::ToInt64Nanoseconds(intervals_[t]);
        const double per_second = interval > 0 ? 1e9 / static_cast<double>(interval) : 0;
        if (hw > 0 && !claimed) {
          ReadPlanRow r{.collector = std::string(kName),
                        .device = d.name,
                        .port = port,
                        .read = "hw_counters files",
                        .tier = std::string(TierName(tier)),
                        .values = hw,
                        .reads_per_second = per_second,
                        .syscalls_per_second = hw * per_second,
                        .queries_per_second = 0,
                        .note = "+ values x K per read with K counter objects bound on the port"};
          // The driver is asked at most once per staleness window for the
          // whole port (counted on the fastest tier that reads it).
          if (!refresh_counted) {
            r.queries_per_second = get_hw_stats * HwStatsRefreshesPerSecond(interval, window);
            refresh_counted = true;
          }
          rows.push_back(std::move(r));
        }
        if (pma > 0) {
          // --ib-pma-mad on an InfiniBand port: two MADs (a send and a
          // receive each) for the whole port; else one MAD per file.
          const bool mads = pma_transport_ != nullptr && PortIsInfiniBand(d.files[t], port);
          rows.push_back({.collector = std::string(kName),
                          .device = d.name,
                          .port = port,
                          .read = mads ? "PMA MADs (PortCountersExtended + PortCounters)"
                                       : "counters/ files (IB PMA)",
                          .tier = std::string(TierName(tier)),
                          .values = pma,
                          .reads_per_second = per_second,
                          .syscalls_per_second = (mads ? 4 : pma) * per_second,
                          .queries_per_second = (mads ? 2 : pma) * per_second,
                          .note = mads ? "--ib-pma-mad; counters/ files where the MADs fail"
                                       : "one PerfMgt MAD per file"});
        }
      }
    }
  }
  return rows;
}

std::vector<Tier> RdmaSysfsCollector::Tiers() const {
  return {Tier::kHot, Tier::kMedium, Tier::kSlow, Tier::kConfig};
}

absl::Status RdmaSysfsCollector::Discover(PollContext& ctx) {
  Rescan(ctx, /*refresh_attributes=*/false);
  return absl::OkStatus();
}

absl::Status RdmaSysfsCollector::Poll(PollContext& ctx) {
  const Tier tier = ctx.tier();
  if (tier == Tier::kSlow || tier == Tier::kConfig) Rescan(ctx, tier == Tier::kConfig);
  TierState& ts = tiers_[static_cast<int>(tier)];
  if (generation_.load(std::memory_order_acquire) != ts.generation) SyncTier(ts, ctx);
  PollTier(ts, ctx);
  return absl::OkStatus();
}

size_t RdmaSysfsCollector::OpenFilesForTest(Tier tier) const {
  size_t n = 0;
  for (const TierFile& f : tiers_[static_cast<int>(tier)].files) n += f.file.is_open() ? 1 : 0;
  return n;
}

// ---------------------------------------------------------------------------
// Tier side: runs on the tier's thread, touches only its TierState.

void RdmaSysfsCollector::PollTier(TierState& ts, PollContext& ctx) {
  const uint64_t claims = ports_->HwCountersClaimsGeneration();
  if (claims != ts.claims_generation) {
    ts.claims_generation = claims;
    for (TierFile& f : ts.files) {
      f.claimed =
          f.spec->hw_counter && ports_->HwCountersClaimed(ts.devices[f.device].name, f.spec->port);
    }
  }
  ts.readings.clear();
  const int64_t now = ctx.ts_ns();
  if (pma_transport_ != nullptr) ReadPmaMads(ts, ctx);
  for (TierFile& f : ts.files) {
    if (!f.file.is_open() || f.claimed) continue;
    if (f.spec->pma_mad && !ts.pma_values.empty()) {
      // The port's counters came in this tick's MADs: no file read.
      auto port = ts.pma_values.find(std::make_pair(f.device, f.spec->port));
      if (port != ts.pma_values.end()) {
        auto v = std::find_if(port->second.begin(), port->second.end(),
                              [&](const PmaCounter& c) { return f.spec->name == c.name; });
        if (v != port->second.end()) {
          ts.readings.push_back({f.id, v->value});
          continue;
        }
      }
    }
    PortBackoff* backoff = nullptr;
    if (!ts.backoff.empty()) [[unlikely]] {
      auto it = ts.backoff.find(std::make_pair(f.device, f.spec->port));
      if (it != ts.backoff.end()) {
        backoff = &it->second;
        // Backing off: not read until the retry time (a clock stepped back
        // ends the wait).
        if (backoff->delay_ns > 0 && now < backoff->retry_ns && now >= backoff->since_ns) continue;
      }
    }
    absl::StatusOr<uint64_t> v = f.file.Read();
    if (v.ok() && backoff != nullptr) [[unlikely]] {
      if (backoff->delay_ns > 0) {
        Log(LogLevel::kInfo, kName, "port reads recovered; backoff ended",
            {{"device", ts.devices[f.device].name},
             {"port", absl::StrCat(f.spec->port)},
             {"tier", std::string(TierName(ctx.tier()))},
             {"failures", absl::StrCat(backoff->failures)}});
      }
      ts.backoff.erase(std::make_pair(f.device, f.spec->port));
    }
    if (v.ok()) [[likely]] {
      TierDevice& dev = ts.devices[f.device];
      if (!f.spec->hw_counter) {
        ++dev.tick_pma_mads;  // one PerfMgt MAD per counters/ file read
      } else if (dev.last_refresh_ns != nullptr) {
        // The kernel asks the driver on a read past its lifespan cache; the
        // tiers share the estimate of when that last happened for the port.
        std::atomic<int64_t>& last = dev.last_refresh_ns[f.spec->port_slot];
        int64_t seen = last.load(std::memory_order_relaxed);
        if ((seen == INT64_MIN || now - seen >= f.spec->stale_window_ns || now < seen) &&
            last.compare_exchange_strong(seen, now, std::memory_order_relaxed)) {
          dev.tick_hw_stats += dev.get_hw_stats_commands;
        }
      }
      if (*v == UINT64_MAX && f.spec->all_ones_invalid) [[unlikely]] {
        // The driver's "invalid" marker (ionic): no sample, the series is blind.
        ctx.Error(UnparsableError("0xFFFFFFFFFFFFFFFF is the driver's invalid marker, not a value"),
                  f.spec->path);
        continue;
      }
      if (f.spec->stale_window_ns > 0) {
        // The kernel's cached value inside its lifespan: no sample; the next
        // fresh reading closes the interval over both ticks.
        // (A tick stamped before the last appended one -- the realtime clock
        // stepped back -- is never taken as cached.)
        const int64_t since = now - f.last_ts_ns;
        if (f.has_last && *v == f.last_raw && since >= 0 && since < f.spec->stale_window_ns) {
          if (prometheus::Counter* c = ts.devices[f.device].cached_reads; c != nullptr) {
            c->Increment();
          }
          continue;
        }
        f.has_last = true;
        f.last_raw = *v;
        f.last_ts_ns = now;
      }
      ts.readings.push_back({f.id, *v});
      continue;
    }
    const CollectorErrorCode code = CollectorErrorCodeOf(v.status());
    switch (code) {
      case CollectorErrorCode::kNotFound: {
        const TierDevice& d = ts.devices[f.device];
        ctx.Error(
            absl::Status(v.status().code(),
                         absl::StrCat("device vanished (", v.status().message(), " reading ",
                                      f.spec->path, "); its series are absent until it returns")),
            d.name);
        CloseDevice(ts, f.device);
        rescan_requested_.store(true, std::memory_order_release);
        break;
      }
      case CollectorErrorCode::kUnsupported:
      case CollectorErrorCode::kPermissionDenied:
        ctx.Error(absl::Status(v.status().code(),
                               absl::StrCat(v.status().message(),
                                            "; not read again until the device is rediscovered")),
                  f.spec->path);
        f.disabled = true;
        f.file.Close();
        break;
      case CollectorErrorCode::kIo:
        ctx.Error(v.status(), f.spec->path);
        NoteIoFailure(ts, f, ctx, v.status());
        break;
      default:
        ctx.Error(v.status(), f.spec->path);
        break;
    }
  }
  ctx.AppendReadings(ts.readings);
  for (TierDevice& d : ts.devices) {
    if (d.tick_hw_stats > 0 && d.hw_stats != nullptr) {
      d.hw_stats->Increment(static_cast<double>(d.tick_hw_stats));
    }
    if (d.tick_pma_mads > 0 && d.pma_mads != nullptr) {
      d.pma_mads->Increment(static_cast<double>(d.tick_pma_mads));
    }
    d.tick_hw_stats = 0;
    d.tick_pma_mads = 0;
  }
}

bool RdmaSysfsCollector::PortIsInfiniBand(const std::vector<CounterSpec>& specs, uint32_t port) {
  return std::any_of(specs.begin(), specs.end(),
                     [&](const CounterSpec& s) { return s.port == port && s.pma_mad; });
}

void RdmaSysfsCollector::ReadPmaMads(TierState& ts, PollContext& ctx) {
  ts.pma_values.clear();
  if (pma_wait_ticks_ > 0) {
    --pma_wait_ticks_;
    return;
  }
  // The InfiniBand ports with PMA counters on this tier, once each.
  std::vector<std::pair<uint32_t, uint32_t>> ports;
  for (const TierFile& f : ts.files) {
    if (!f.spec->pma_mad || !f.file.is_open()) continue;
    const auto key = std::make_pair(f.device, f.spec->port);
    if (std::find(ports.begin(), ports.end(), key) == ports.end()) ports.push_back(key);
  }
  for (const auto& [device, port] : ports) {
    TierDevice& dev = ts.devices[device];
    std::vector<PmaCounter> values;
    absl::Status failed;
    bool host_wide = false;  // the transport cannot send at all on this host
    for (uint16_t attr : {kPmaAttrPortCountersExtended, kPmaAttrPortCounters}) {
      const uint64_t tid = ++pma_transaction_;
      absl::StatusOr<std::vector<uint8_t>> reply = pma_transport_->Query(
          dev.name, port, BuildPmaGet(attr, static_cast<uint8_t>(port), tid), kPmaTimeout);
      const absl::Status& sent = reply.status();
      host_wide = absl::IsUnimplemented(sent) || absl::IsPermissionDenied(sent);
      // What reached the device: every MAD sent, answered or not.
      if (!host_wide && !absl::IsNotFound(sent) && !absl::IsFailedPrecondition(sent)) {
        ++dev.tick_pma_mads;
      }
      if (host_wide) {
        failed = sent;
        break;
      }
      if (reply.ok()) {
        absl::StatusOr<std::vector<PmaCounter>> counters = ParsePmaGetResp(*reply, attr, tid);
        if (counters.ok()) {
          // The extended attribute's 64-bit data and packet counters win
          // over PortCounters' 32-bit ones (as the kernel's files show).
          for (const PmaCounter& c : *counters) {
            const bool known = std::any_of(values.begin(), values.end(), [&](const PmaCounter& v) {
              return std::strcmp(v.name, c.name) == 0;
            });
            if (!known) values.push_back(c);
          }
          continue;
        }
        reply = counters.status();
      }
      if (absl::IsUnimplemented(reply.status()) && attr == kPmaAttrPortCountersExtended) {
        // The MAD status "unsupported" (the transport's Unimplemented is
        // host_wide above): a PMA without the extended counters;
        // PortCounters still answers.
        continue;
      }
      failed = reply.status();
      break;
    }
    if (failed.ok()) {
      ts.pma_values.emplace(std::make_pair(device, port), std::move(values));
      continue;
    }
    if (host_wide) {
      // This host cannot send MADs at all: files for every port, said once.
      Log(LogLevel::kWarn, kName,
          "--ib-pma-mad: PMA MADs unavailable; reading counters/ files (one MAD per file)",
          {{"error", std::string(failed.message())},
           {"retry_after_slow_ticks", absl::StrCat(kPmaRetryTicks)}});
      pma_wait_ticks_ = kPmaRetryTicks;
      ts.pma_values.clear();
      return;
    }
    // This port, this tick: its files instead.
    ctx.Error(failed, absl::StrCat(dev.name, "/", port, " PMA MADs"));
  }
}

void RdmaSysfsCollector::NoteIoFailure(TierState& ts, const TierFile& f, PollContext& ctx,
                                       const absl::Status& error) {
  PortBackoff& b = ts.backoff[std::make_pair(f.device, f.spec->port)];
  ++b.failures;
  if (b.failures < kBackoffAfterFailures) return;
  const bool starting = b.delay_ns == 0;
  b.delay_ns = starting ? kBackoffFirstNs : std::min(2 * b.delay_ns, kBackoffMaxNs);
  b.since_ns = ctx.ts_ns();
  b.retry_ns = b.since_ns + b.delay_ns;
  if (starting) {
    // One line per change (here, and "recovered" when a read succeeds): a
    // restricted function whose every read fails (and logs in the kernel)
    // must not flood either log.
    Log(LogLevel::kWarn, kName,
        "port reads fail repeatedly; retried with exponential backoff (1 s doubling to 5 min)",
        {{"device", ts.devices[f.device].name},
         {"port", absl::StrCat(f.spec->port)},
         {"tier", std::string(TierName(ctx.tier()))},
         {"path", f.spec->path},
         {"error", std::string(error.message())}});
  }
}

void RdmaSysfsCollector::CloseDevice(TierState& ts, uint32_t device) {
  for (TierFile& f : ts.files) {
    if (f.device != device || !f.file.is_open()) continue;
    f.file.Close();
    store_->SetPresent(f.id, false);
  }
}

void RdmaSysfsCollector::SyncTier(TierState& ts, PollContext& ctx) {
  std::shared_ptr<const Topology> topo;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(topo_mu_);
    topo = topo_;
    generation = generation_.load(std::memory_order_acquire);
  }
  const int t = static_cast<int>(ctx.tier());

  // Old files by (incarnation, path): kept open across generations.
  absl::flat_hash_map<std::pair<uint64_t, absl::string_view>, size_t> old_index;
  for (size_t i = 0; i < ts.files.size(); ++i) {
    const TierFile& f = ts.files[i];
    old_index.emplace(
        std::make_pair(ts.devices[f.device].incarnation, absl::string_view(f.spec->path)), i);
  }
  std::vector<TierFile> old_files = std::move(ts.files);
  std::vector<bool> carried(old_files.size(), false);
  std::vector<TierFile> files;
  std::vector<TierDevice> devices;
  absl::flat_hash_set<SeriesId> live;

  if (topo != nullptr) {
    for (const DeviceEntry& d : topo->devices) {
      if (!d.present) {
        for (const CounterSpec& spec : d.files[t]) store_->SetPresent(spec.id, false);
        continue;
      }
      const uint32_t di = static_cast<uint32_t>(devices.size());
      TierDevice& td = devices.emplace_back();
      td.name = d.name;
      td.incarnation = d.incarnation;
      if (metrics_ != nullptr) {
        td.cached_reads = &metrics_->Counter(kCachedReads).Add({{"device", d.name}});
        td.hw_stats = &metrics_->Counter(DeviceQueriesMetric())
                           .Add({{"device", d.name}, {"kind", "hw_stats"}});
        td.pma_mads = &metrics_->Counter(DeviceQueriesMetric())
                           .Add({{"device", d.name}, {"kind", "pma_mad"}});
      }
      td.last_refresh_ns = d.last_refresh_ns.get();
      td.get_hw_stats_commands = d.get_hw_stats_commands;
      bool open_failed = false;
      for (const CounterSpec& spec : d.files[t]) {
        TierFile f;
        f.spec = &spec;
        f.id = spec.id;
        f.device = di;
        auto it = old_index.find(std::make_pair(d.incarnation, absl::string_view(spec.path)));
        if (it != old_index.end()) {
          TierFile& old = old_files[it->second];
          f.file = std::move(old.file);
          f.disabled = old.disabled;
          f.has_last = old.has_last;
          f.last_raw = old.last_raw;
          f.last_ts_ns = old.last_ts_ns;
          carried[it->second] = true;
        }
        if (!f.file.is_open() && !f.disabled) {
          absl::StatusOr<CounterFile> opened = CounterFile::Open(spec.path);
          if (opened.ok()) {
            f.file = *std::move(opened);
            store_->SetPresent(spec.id, true);
          } else {
            const CollectorErrorCode code = CollectorErrorCodeOf(opened.status());
            if (code == CollectorErrorCode::kNotFound) {
              // Report once per device and sync, not per file.
              if (!open_failed) ctx.Error(opened.status(), d.name);
              open_failed = true;
              store_->SetPresent(spec.id, false);
            } else {
              ctx.Error(opened.status(), spec.path);
              if (code == CollectorErrorCode::kUnsupported ||
                  code == CollectorErrorCode::kPermissionDenied) {
                f.disabled = true;
              }
            }
          }
        }
        live.insert(spec.id);
        files.push_back(std::move(f));
      }
      if (open_failed) rescan_requested_.store(true, std::memory_order_release);
    }
  }
  // Series whose file left the topology (a device came back with fewer files).
  for (size_t i = 0; i < old_files.size(); ++i) {
    if (!carried[i] && !live.contains(old_files[i].spec->id)) {
      store_->SetPresent(old_files[i].spec->id, false);
    }
  }
  old_files.clear();  // closes what was not carried, before the old topology goes
  ts.files = std::move(files);
  ts.readings.reserve(ts.files.size());
  ts.devices = std::move(devices);
  ts.backoff.clear();  // device indices changed; a rediscovered port is tried again
  ts.topo = std::move(topo);
  ts.generation = generation;
  ts.claims_generation = UINT64_MAX;  // the files changed: re-check their claims
}

// ---------------------------------------------------------------------------
// Rescan side: serialised by rescan_mu_, publishes immutable topologies.

void RdmaSysfsCollector::Rescan(PollContext& ctx, bool refresh_attributes) {
  std::lock_guard<std::mutex> rescan_lock(rescan_mu_);
  std::shared_ptr<const Topology> cur;
  {
    std::lock_guard<std::mutex> lock(topo_mu_);
    cur = topo_;
  }

  // The device directories and their identities: one directory listing and
  // one fstatat per entry relative to the listed directory (no path walk from
  // the root per device).
  std::map<std::string, DeviceEntry::Identity> on_disk;
  DIR* dir = ::opendir(root_.c_str());
  if (dir == nullptr) {
    const absl::Status st = ErrnoToStatus(errno, absl::StrCat("opendir ", root_));
    if (!absl::IsNotFound(st)) {
      ctx.Error(st, root_);
      return;  // keep the current topology: do not declare everything gone on EACCES
    }
  }
  if (dir != nullptr) {
    absl::Status failed;
    errno = 0;
    while (struct dirent* e = ::readdir(dir)) {
      const absl::string_view n(e->d_name);
      if (n == "." || n == "..") continue;
      if (!Watched(n)) continue;  // --rdma-device-include / --rdma-device-exclude
      struct stat st;
      if (::fstatat(::dirfd(dir), e->d_name, &st, 0) != 0) {
        // Listed but not stat-able: gone since the listing (ENOENT) is a
        // vanished device; anything else (EACCES when the directory lost its
        // search permission after the listing) says nothing about the
        // devices: keep the current topology, as for a failed listing.
        if (errno == ENOENT) {
          errno = 0;
          continue;
        }
        failed = ErrnoToStatus(errno, absl::StrCat("stat ", root_, "/", n));
        break;
      }
      if (S_ISDIR(st.st_mode)) {
        on_disk[std::string(n)] = {static_cast<uint64_t>(st.st_dev),
                                   static_cast<uint64_t>(st.st_ino),
                                   int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec};
      }
      errno = 0;
    }
    if (failed.ok() && errno != 0) failed = ErrnoToStatus(errno, absl::StrCat("readdir ", root_));
    ::closedir(dir);
    if (!failed.ok()) {
      ctx.Error(failed, root_);
      return;
    }
  }

  auto same = [&](const DeviceEntry& d) {
    auto it = on_disk.find(d.name);
    return it != on_disk.end() && it->second == d.identity;
  };
  bool changed = rescan_requested_.exchange(false, std::memory_order_acq_rel) || cur == nullptr;
  absl::flat_hash_set<std::string> covered;
  if (cur != nullptr) {
    for (const DeviceEntry& d : cur->devices) {
      if (!d.present) continue;
      if (same(d)) {
        covered.insert(d.name);
      } else {
        changed = true;
      }
    }
  }
  for (const auto& [name, disk] : on_disk) {
    if (!covered.contains(name)) changed = true;
  }

  if (changed) {
    auto next = std::make_shared<Topology>();
    absl::flat_hash_set<std::string> rebuilt;
    for (const auto& [name, disk] : on_disk) {
      if (!covered.contains(name)) rebuilt.insert(name);
    }
    if (cur != nullptr) {
      for (const DeviceEntry& d : cur->devices) {
        if (d.present && covered.contains(d.name)) {
          next->devices.push_back(d);
          continue;
        }
        if (rebuilt.contains(d.name) && !d.present) continue;  // superseded by the new incarnation
        DeviceEntry gone = d;
        if (d.present) {
          gone.present = false;
          ctx.Error(absl::NotFoundError(on_disk.contains(d.name)
                                            ? "device replaced; rediscovering it"
                                            : "device vanished; its series are absent until "
                                              "it returns"),
                    d.name);
          SetPortsPresent(d, false);
        }
        if (!rebuilt.contains(d.name)) next->devices.push_back(std::move(gone));
      }
    }
    for (const auto& [name, disk] : on_disk) {
      if (covered.contains(name)) continue;
      DeviceEntry d = BuildDevice(ctx, name, disk);
      size_t n = 0;
      for (const auto& f : d.files) n += f.size();
      Log(LogLevel::kInfo, kName, "device discovered",
          {{"device", name},
           {"ports", absl::StrCat(d.ports.size())},
           {"counters", absl::StrCat(n)}});
      next->devices.push_back(std::move(d));
    }
    std::sort(next->devices.begin(), next->devices.end(),
              [](const DeviceEntry& a, const DeviceEntry& b) { return a.name < b.name; });
    std::lock_guard<std::mutex> lock(topo_mu_);
    topo_ = next;
    generation_.fetch_add(1, std::memory_order_acq_rel);
    cur = std::move(next);
  }
  if (refresh_attributes) RefreshPortInfo(*cur);
}

void RdmaSysfsCollector::SetPortsPresent(const DeviceEntry& d, bool present) {
  for (const auto& [port, dir] : d.ports) {
    auto it = port_info_.find(std::make_pair(d.name, port));
    if (it == port_info_.end()) continue;
    it->second.present = present;
    ports_->Upsert(it->second);
  }
}

void RdmaSysfsCollector::RefreshPortInfo(const Topology& topo) {
  for (const DeviceEntry& d : topo.devices) {
    if (!d.present) continue;
    for (const auto& [port, dir] : d.ports) {
      PortInfo info = ReadPortInfo(d.name, port, dir);
      PortInfo& cached = port_info_[std::make_pair(d.name, port)];
      if (cached.device == info.device && cached.port == info.port &&
          cached.netdev == info.netdev && cached.link_layer == info.link_layer &&
          cached.state == info.state && cached.rate == info.rate && cached.driver == info.driver &&
          cached.fw_ver == info.fw_ver && cached.present) {
        continue;
      }
      cached = info;
      ports_->Upsert(info);
    }
  }
}

PortInfo RdmaSysfsCollector::ReadPortInfo(const std::string& device, uint32_t port,
                                          const std::string& port_dir) const {
  PortInfo info;
  info.device = device;
  info.port = port;
  info.netdev = FindNetdev(root_ + "/" + device, port_dir, port);
  info.link_layer = ReadAttribute(port_dir + "/link_layer").value_or("");
  info.state = StripEnumPrefix(ReadAttribute(port_dir + "/state").value_or(""));
  info.rate = ReadAttribute(port_dir + "/rate").value_or("");
  const std::string dev_dir = root_ + "/" + device;
  info.driver = RdmaDriverOf(KernelDriver(dev_dir), device);
  info.fw_ver = ReadAttribute(dev_dir + "/fw_ver").value_or("");
  info.present = true;
  return info;
}

RdmaSysfsCollector::DeviceEntry RdmaSysfsCollector::BuildDevice(
    PollContext& ctx, const std::string& name, const DeviceEntry::Identity& identity) {
  DeviceEntry d;
  d.name = name;
  d.incarnation = next_incarnation_++;
  d.identity = identity;
  const std::string dev_dir = root_ + "/" + name;
  for (const auto& [port, port_name] : NumericEntries(dev_dir + "/ports")) {
    const std::string port_dir = dev_dir + "/ports/" + port_name;
    d.ports.emplace_back(port, port_dir);
    PortInfo info = ReadPortInfo(name, port, port_dir);
    port_info_[std::make_pair(name, port)] = info;
    ports_->Upsert(info);
    d.get_hw_stats_commands = GetHwStatsCommands(info.driver);

    // The data/packet counters are 64-bit with the PMA extended-width group
    // (unicast/multicast files present) or the "noietf" group (no such files,
    // but values above 2^32-1 show it); otherwise 32-bit and saturating.
    const std::string counters_dir = port_dir + "/counters";
    bool wide_data = FileExists(counters_dir + "/unicast_xmit_packets") ||
                     FileExists(counters_dir + "/unicast_rcv_packets") ||
                     FileExists(counters_dir + "/multicast_xmit_packets") ||
                     FileExists(counters_dir + "/multicast_rcv_packets");
    for (const char* n :
         {"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"}) {
      if (wide_data) break;
      auto f = CounterFile::Open(counters_dir + "/" + n);
      if (!f.ok()) continue;
      absl::StatusOr<uint64_t> v = f->Read();
      wide_data = v.ok() && *v > UINT32_MAX;
    }
    // IB counters/ files that are empty or fail with EINVAL (bnxt_re, ionic keep
    // their counters in hw_counters): not read, reported once per port.
    size_t unreadable_counters = 0;
    struct Candidate {
      SeriesKey key;
      Signal signal;
      std::string path;
      Tier tier;
      bool wide;  // 64-bit data (for the counters/ vs counters_ext/ choice)
      bool all_ones_invalid;
    };
    std::vector<Candidate> candidates;
    // The kernel's hw_counters cache (see the header comment): its window.
    int64_t stale_window_ns = 0;
    if (absl::StatusOr<std::string> ls = ReadAttribute(port_dir + "/hw_counters/lifespan");
        ls.ok()) {
      uint64_t ms = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*ls), &ms) && ms > 0 && ms <= 60'000) {
        stale_window_ns = StaleWindowNs(ms, kernel_hz_);
      }
    }
    for (absl::string_view source : kSources) {
      const std::string dir = port_dir + "/" + std::string(source);
      auto files = ListDir(dir);
      if (!files.ok()) continue;  // no such group on this device: no data, not an error
      for (const std::string& file : *files) {
        if (source == "hw_counters" && file == "lifespan") continue;  // a setting
        SeriesKey key{std::string(source), file, name, port, info.netdev};
        std::optional<Signal> sig = MapCounter(key, info.driver);
        const std::string path = dir + "/" + file;
        if (!sig.has_value()) {
          Log(LogLevel::kDebug, kName, "counter file not in the signal table; skipped",
              {{"path", path}});
          continue;
        }
        if (source != "hw_counters") {
          absl::StatusOr<std::string> probe = ReadAttribute(path);
          if ((probe.ok() && probe->empty()) ||
              (!probe.ok() &&
               CollectorErrorCodeOf(probe.status()) == CollectorErrorCode::kUnsupported)) {
            ++unreadable_counters;
            continue;
          }
        }
        bool wide = true;
        if (source == "counters" && !wide_data && IsPmaDataCounter(file)) {
          sig->semantics = CounterSemantics{CounterKind::kSaturating, 32};
          wide = false;
        }
        Tier tier = Tier::kSlow;
        if (source == "hw_counters") {
          tier = hot_counters_.contains(file) || hot_signals_.contains(SignalIdentity(*sig))
                     ? Tier::kHot
                     : Tier::kMedium;
        }
        const bool all_ones_invalid = sig->all_ones_invalid;
        candidates.push_back({std::move(key), *std::move(sig), path, tier, wide, all_ones_invalid});
      }
    }
    if (unreadable_counters > 0) {
      ctx.Error(absl::UnimplementedError(absl::StrCat(
                    unreadable_counters,
                    " IB counters/ files are empty or fail with EINVAL: not read (the port's "
                    "bytes and packets come from its hw_counters where the driver has them)")),
                port_dir);
    }
    // Two files feeding the same exported series (counters/ and counters_ext/ on
    // old mlx4 kernels): keep the 64-bit one, preferring counters/.
    std::map<std::string, size_t> by_labels;
    std::vector<bool> keep(candidates.size(), true);
    for (size_t i = 0; i < candidates.size(); ++i) {
      std::string id = candidates[i].signal.family->name;
      for (const std::string& v : candidates[i].signal.label_values)
        absl::StrAppend(&id, "\x1f", v);
      auto [it, inserted] = by_labels.emplace(id, i);
      if (inserted) continue;
      Candidate& first = candidates[it->second];
      Candidate& second = candidates[i];
      const bool prefer_second = !first.wide && second.wide;
      const size_t drop = prefer_second ? it->second : i;
      keep[drop] = false;
      if (prefer_second) it->second = i;
      Log(LogLevel::kDebug, kName, "duplicate counter for one series; skipped",
          {{"path", candidates[drop].path}, {"kept", candidates[it->second].path}});
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!keep[i]) continue;
      Candidate& c = candidates[i];
      SeriesId id = store_->Register(c.key, c.signal);
      const bool hw = c.key.source == "hw_counters";
      // counters/ of an InfiniBand port: what --ib-pma-mad reads in two MADs.
      const bool pma_mad = c.key.source == "counters" && info.link_layer == "InfiniBand";
      d.files[static_cast<int>(c.tier)].push_back(
          {std::move(c.path), id, port, hw, c.all_ones_invalid, hw ? stale_window_ns : 0,
           static_cast<uint32_t>(d.ports.size() - 1), pma_mad, c.key.name});
    }
  }
  d.last_refresh_ns.reset(new std::atomic<int64_t>[d.ports.size()]);
  for (size_t i = 0; i < d.ports.size(); ++i) d.last_refresh_ns[i].store(INT64_MIN);
  return d;
}

}  // namespace fabricscope
