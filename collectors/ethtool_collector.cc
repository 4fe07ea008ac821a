#include "collectors/ethtool_collector.h"

#include <net/if.h>

#include <algorithm>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/log.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

constexpr absl::string_view kSourceStats = "ethtool";
constexpr absl::string_view kSourceNetlink = "ethtool_netlink";

// Identity of an exported sample: family + label values.
std::string LabelSetKey(const Signal& s) {
  return absl::StrCat(s.family->name, "{", absl::StrJoin(s.label_values, "\x1f"), "}");
}

// Index of the first rule matching `key` (the table's match order).
size_t RuleRank(const SeriesKey& key) {
  const auto& rules = SignalRules();
  for (size_t i = 0; i < rules.size(); ++i) {
    const SignalRule& r = rules[i];
    if (r.source != key.source) continue;
    if (r.regex ? std::regex_match(key.name, std::regex(std::string(r.pattern)))
                : r.pattern == key.name) {
      return i;
    }
  }
  return rules.size();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collector>> EthtoolCollector::Create(const CollectorContext& ctx) {
  if (ctx.options == nullptr || ctx.store == nullptr || ctx.ports == nullptr ||
      ctx.clock == nullptr) {
    return absl::InvalidArgumentError(
        "ethtool needs a config, a store, a port inventory and a clock");
  }
  std::unique_ptr<EthtoolStatsSource> source =
      ctx.options->ethtool_dir.empty()
          ? MakeKernelEthtoolSource()
          : MakeDirEthtoolSource(ctx.options->ethtool_dir, ctx.options->sysfs_root);
  Options options;
  options.netdev_include = ctx.options->netdev_include;
  return std::make_unique<EthtoolCollector>(ctx.store, ctx.ports, ctx.clock, std::move(source),
                                            options);
}

EthtoolCollector::EthtoolCollector(Store* store, const PortInventory* ports, Clock* clock,
                                   std::unique_ptr<EthtoolStatsSource> source, Options options)
    : store_(store),
      ports_(ports),
      clock_(clock),
      source_(std::move(source)),
      options_(std::move(options)) {}

size_t EthtoolCollector::MappedCount(const std::string& netdev) const {
  auto it = devices_.find(netdev);
  return it == devices_.end() ? 0 : it->second->mapped.size();
}

size_t EthtoolCollector::NameCount(const std::string& netdev) const {
  auto it = devices_.find(netdev);
  return it == devices_.end() ? 0 : it->second->reader->names().size();
}

absl::Status EthtoolCollector::Discover(PollContext& ctx) {
  Rescan(ctx);
  return absl::OkStatus();
}

absl::Status EthtoolCollector::Poll(PollContext& ctx) {
  const SteadyTime now = clock_->SteadyNow();
  const bool rescan =
      !last_scan_ || now - *last_scan_ >= absl::ToChronoNanoseconds(options_.rescan);
  if (rescan) Rescan(ctx);
  for (auto& [netdev, dev] : devices_) {
    if (!dev->listed || dev->stats_unsupported) continue;
    // An absent netdev is retried at the rescan rate, not every tick.
    if (!dev->present && !rescan) continue;
    PollDevice(ctx, *dev);
  }
  return absl::OkStatus();
}

void EthtoolCollector::Rescan(PollContext& ctx) {
  last_scan_ = clock_->SteadyNow();
  struct Owner {
    std::string device;
    uint32_t port = 0;
    double link_bps = 0;
  };
  absl::flat_hash_map<std::string, Owner> wanted;
  for (const PortInfo& p : ports_->List()) {
    if (!p.present || p.netdev.empty()) continue;
    wanted.try_emplace(p.netdev, Owner{p.device, p.port, ParseLinkRateBps(p.rate)});
  }
  absl::StatusOr<std::vector<std::string>> listed = source_->ListNetdevs();
  if (!listed.ok()) {
    ctx.Error(listed.status(), "ethtool-dir");
  } else {
    for (const std::string& n : *listed) wanted.try_emplace(n, Owner{});
  }
  if (!options_.netdev_include.empty()) {
    if (struct if_nameindex* ifs = if_nameindex(); ifs != nullptr) {
      for (struct if_nameindex* i = ifs; i->if_index != 0 && i->if_name != nullptr; ++i) {
        if (options_.netdev_include.Matches(i->if_name)) wanted.try_emplace(i->if_name, Owner{});
      }
      if_freenameindex(ifs);
    }
  }
  for (auto& [netdev, dev] : devices_) {
    if (!wanted.contains(netdev) && dev->listed) {
      dev->listed = false;
      MarkAbsent(*dev);
    }
  }
  for (auto& [netdev, owner] : wanted) {
    auto it = devices_.find(netdev);
    if (it == devices_.end()) {
      auto dev = std::make_unique<Device>();
      dev->netdev = netdev;
      dev->rdma_device = owner.device;
      dev->port = owner.port;
      dev->link_bps = owner.link_bps;
      dev->reader = source_->Open(netdev);
      devices_.emplace(netdev, std::move(dev));
      continue;
    }
    Device& dev = *it->second;
    if (!dev.listed) {
      // Back after it vanished: read it from scratch (its names may differ).
      dev.listed = true;
      dev.present = true;
      dev.stats_unsupported = dev.pause_unsupported = dev.fec_unsupported = false;
      dev.speed_unsupported = false;
      dev.reader = source_->Open(netdev);
      dev.resolved = false;
      dev.mapped.clear();
      dev.mapped_ids.clear();
      dev.claimed.clear();
      dev.netlink.clear();
    }
    if (dev.rdma_device != owner.device || dev.port != owner.port) {
      // The RDMA port showed up (or moved) after we first saw the netdev: the
      // series keys carry device/port, so re-register under the new owner.
      MarkAbsent(dev);
      dev.rdma_device = owner.device;
      dev.port = owner.port;
      dev.mapped.clear();
      dev.mapped_ids.clear();
      dev.claimed.clear();
      dev.netlink.clear();
      dev.reader = source_->Open(netdev);
      dev.resolved = false;
    }
    if (dev.link_bps != owner.link_bps) {
      // The pause-time estimates' scale (and key) follow the link rate.
      dev.link_bps = owner.link_bps;
      dev.resolved = false;
    }
    // The speed is asked again at every rescan: here, or by the remap pending.
    dev.speed_asked = false;
    if (dev.resolved && dev.present && dev.wants_speed && dev.link_bps <= 0 && AskSpeed(ctx, dev)) {
      dev.resolved = false;
    }
  }
}

bool EthtoolCollector::AskSpeed(PollContext& ctx, Device& dev) {
  if (dev.speed_unsupported) return false;
  dev.speed_asked = true;
  absl::StatusOr<uint32_t> speed = source_->LinkSpeedMbps(dev.netdev);
  uint32_t mbps = 0;
  if (speed.ok()) {
    mbps = *speed;
  } else if (CollectorErrorCodeOf(speed.status()) == CollectorErrorCode::kUnsupported) {
    dev.speed_unsupported = true;  // counted once, not asked again
    ctx.Error(speed.status(), dev.netdev);
  } else if (CollectorErrorCodeOf(speed.status()) != CollectorErrorCode::kNotFound) {
    ctx.Error(speed.status(), dev.netdev);  // a vanished netdev is counted by its stats read
  }
  const bool changed = mbps != dev.speed_mbps;
  dev.speed_mbps = mbps;
  return changed;
}

double EthtoolCollector::EstimateRateBps(const Device& dev) {
  return dev.link_bps > 0 ? dev.link_bps : dev.speed_mbps * 1e6;
}

void EthtoolCollector::MarkAbsent(Device& dev) {
  for (SeriesId id : dev.mapped_ids) store_->SetPresent(id, false);
  for (const auto& [name, id] : dev.netlink) store_->SetPresent(id, false);
}

void EthtoolCollector::PollDevice(PollContext& ctx, Device& dev) {
  bool names_changed = false;
  absl::Status s = dev.reader->Read(&names_changed);
  if (!s.ok()) {
    const CollectorErrorCode code = CollectorErrorCodeOf(s);
    if (code == CollectorErrorCode::kNotFound) {
      if (dev.present) {
        ctx.Error(s, dev.netdev);
        dev.present = false;
        MarkAbsent(dev);
      }
      return;
    }
    if (code == CollectorErrorCode::kUnsupported) {
      dev.stats_unsupported = true;  // not asked again until the netdev comes back
      ctx.Error(s, dev.netdev);
      return;
    }
    ctx.Error(s, dev.netdev);  // last good values stay
    return;
  }
  if (!dev.present) {
    dev.present = true;
    for (SeriesId id : dev.mapped_ids) store_->SetPresent(id, true);
    for (const auto& [name, id] : dev.netlink) store_->SetPresent(id, true);
  }
  if (names_changed || !dev.resolved) Remap(ctx, dev);
  absl::Span<const uint64_t> values = dev.reader->values();
  for (const Mapped& m : dev.mapped) {
    if (m.index < values.size()) ctx.Append(m.id, values[m.index]);
  }
  if (source_->HasStandardStats()) PollStandard(ctx, dev);
}

std::optional<Signal> EthtoolCollector::Resolve(const SeriesKey& key) {
  if (unmapped_.contains(key.name)) return std::nullopt;
  std::optional<Signal> sig = MapCounter(key);
  if (!sig) unmapped_.insert(key.name);
  return sig;
}

void EthtoolCollector::Remap(PollContext& ctx, Device& dev) {
  const std::vector<std::string>& names = dev.reader->names();
  struct Candidate {
    uint32_t index;
    SeriesKey key;
    Signal signal;
  };
  absl::flat_hash_map<std::string, Candidate> winners;
  for (uint32_t i = 0; i < names.size(); ++i) {
    SeriesKey key{std::string(kSourceStats), names[i], dev.rdma_device, dev.port, dev.netdev};
    std::optional<Signal> sig = Resolve(key);
    if (!sig) continue;
    std::string set = LabelSetKey(*sig);
    auto it = winners.find(set);
    if (it == winners.end()) {
      winners.emplace(std::move(set), Candidate{i, std::move(key), std::move(*sig)});
    } else if (RuleRank(key) < RuleRank(it->second.key)) {
      it->second = Candidate{i, std::move(key), std::move(*sig)};
    }
  }
  std::vector<Mapped> mapped;
  std::vector<SeriesId> ids;
  absl::flat_hash_set<std::string> claimed;
  for (auto& [set, c] : winners) {
    SeriesId id = store_->Register(c.key, c.signal);
    if (id == kInvalidSeries) continue;  // store budget exhausted (counted by the store)
    store_->SetPresent(id, true);
    mapped.push_back({c.index, id});
    ids.push_back(id);
    claimed.insert(set);
  }
  // Pause time estimated from XOFF frames where the netdev counts no pause time.
  dev.wants_speed = std::any_of(winners.begin(), winners.end(),
                                [](const auto& w) { return w.second.signal.pause_quanta > 0; });
  if (dev.wants_speed && dev.link_bps <= 0 && !dev.speed_asked) AskSpeed(ctx, dev);
  const double rate_bps = EstimateRateBps(dev);
  for (const auto& [set, c] : winners) {
    if (c.signal.pause_quanta == 0 || rate_bps <= 0) continue;
    std::optional<SeriesKey> key = PauseEstimateKey(c.key, rate_bps);
    std::optional<Signal> sig = key ? MapCounter(*key) : std::nullopt;
    if (!sig || winners.contains(LabelSetKey(*sig))) continue;
    SeriesId id = store_->Register(*key, *sig);
    if (id == kInvalidSeries) continue;
    store_->SetPresent(id, true);
    mapped.push_back({c.index, id});
    ids.push_back(id);
  }
  std::sort(mapped.begin(), mapped.end(),
            [](const Mapped& a, const Mapped& b) { return a.index < b.index; });
  absl::flat_hash_set<SeriesId> keep(ids.begin(), ids.end());
  for (SeriesId id : dev.mapped_ids) {
    if (!keep.contains(id)) store_->SetPresent(id, false);  // name gone (PFC disabled)
  }
  // Netlink series now provided by an ethtool -S name step aside.
  for (auto it = dev.netlink.begin(); it != dev.netlink.end();) {
    auto snap = store_->Get(it->second);
    if (snap && snap->signal != nullptr && claimed.contains(LabelSetKey(*snap->signal))) {
      store_->SetPresent(it->second, false);
      dev.netlink.erase(it++);
    } else {
      ++it;
    }
  }
  dev.mapped = std::move(mapped);
  dev.mapped_ids = std::move(ids);
  dev.claimed = std::move(claimed);
  dev.resolved = true;
  Log(LogLevel::kInfo, "ethtool", "resolved ethtool names",
      {{"netdev", dev.netdev},
       {"names", absl::StrCat(names.size())},
       {"mapped", absl::StrCat(dev.mapped.size())}});
}

void EthtoolCollector::AppendNetlink(PollContext& ctx, Device& dev, const std::string& name,
                                     uint64_t value) {
  auto it = dev.netlink.find(name);
  if (it == dev.netlink.end()) {
    SeriesKey key{std::string(kSourceNetlink), name, dev.rdma_device, dev.port, dev.netdev};
    std::optional<Signal> sig = Resolve(key);
    if (!sig || dev.claimed.contains(LabelSetKey(*sig))) return;
    SeriesId id = store_->Register(key, *sig);
    if (id == kInvalidSeries) return;
    store_->SetPresent(id, true);
    it = dev.netlink.emplace(name, id).first;
  }
  ctx.Append(it->second, value);
}

void EthtoolCollector::PollStandard(PollContext& ctx, Device& dev) {
  const std::string pause_rx =
      absl::StrCat(families::kPfcPauseFrames.name, "{", dev.netdev, "\x1fglobal\x1frx}");
  const std::string pause_tx =
      absl::StrCat(families::kPfcPauseFrames.name, "{", dev.netdev, "\x1fglobal\x1ftx}");
  if (!dev.pause_unsupported &&
      !(dev.claimed.contains(pause_rx) && dev.claimed.contains(pause_tx))) {
    absl::StatusOr<PauseStats> p = source_->ReadPause(dev.netdev);
    if (p.ok()) {
      if (p->rx_frames) AppendNetlink(ctx, dev, "pause_rx_frames", *p->rx_frames);
      if (p->tx_frames) AppendNetlink(ctx, dev, "pause_tx_frames", *p->tx_frames);
    } else {
      const CollectorErrorCode code = CollectorErrorCodeOf(p.status());
      if (code == CollectorErrorCode::kUnsupported) dev.pause_unsupported = true;
      if (code != CollectorErrorCode::kNotFound) {
        ctx.Error(p.status(), absl::StrCat(dev.netdev, "/pause"));
      }
    }
  }
  if (!dev.fec_unsupported) {
    absl::StatusOr<FecStats> f = source_->ReadFec(dev.netdev);
    if (f.ok()) {
      auto put = [&](absl::string_view base, const std::vector<uint64_t>& v, bool lanes) {
        if (v.empty()) return;
        AppendNetlink(ctx, dev, std::string(base), v[0]);
        if (!lanes) return;
        for (size_t l = 1; l < v.size(); ++l) {
          AppendNetlink(ctx, dev, absl::StrCat(base, "_lane", l - 1), v[l]);
        }
      };
      put("fec_corrected", f->corrected, true);
      put("fec_uncorrectable", f->uncorrectable, true);
      put("fec_corrected_bits", f->corrected_bits, false);
    } else {
      const CollectorErrorCode code = CollectorErrorCodeOf(f.status());
      if (code == CollectorErrorCode::kUnsupported) dev.fec_unsupported = true;
      if (code != CollectorErrorCode::kNotFound) {
        ctx.Error(f.status(), absl::StrCat(dev.netdev, "/fec"));
      }
    }
  }
}

}  // namespace fabricscope
