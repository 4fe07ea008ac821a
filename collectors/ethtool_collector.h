// The ethtool collector (medium tier): the Ethernet-side congestion and link
// health counters of RoCE netdevs -- per-priority PFC pause frames, pause time
// and transitions, pause-storm events, physical-port and buffer discards,
// FEC and PHY errors, link flaps. See ../shared/reference/counters.md
// sections 3 and 4.
//
// Which netdevs: the netdevs of the RDMA ports in PortInventory (written by
// rdma_sysfs), the interfaces matching --netdev-include, and with
// --ethtool-dir=DIR every file DIR/<netdev>. The set is rescanned at most once
// per `rescan` (1 s) from within the medium tier.
//
// Per netdev, from the stats source (collectors/ethtool_stats_source.h):
//  - `ethtool -S` names: resolved through the signal table only when the name
//    set changes (first read, PFC toggled, file rewritten with other names);
//    each tick then copies out just the mapped indexes. Names that map to
//    nothing (per-ring counters, ...) get no series. When two names of one
//    netdev map to the same label set, the one whose signal rule comes first
//    wins (rx_global_pause over rx_pause_ctrl_phy, rx_pcs_symbol_err_phy over
//    rx_symbol_err_phy).
//  - pause-time estimates: an XOFF frame counter whose signal has
//    pause_quanta (ice, i40e: no pause-time counter exists) also feeds a
//    derived series, source "pause_estimate" (core/signals.h, "Pause-time
//    estimates"), from the same raw value, when the link rate is known and
//    no ethtool -S name of the netdev provides that priority's and
//    direction's pause time. The link rate: the netdev's RDMA port's rate,
//    else the netdev's own link speed (EthtoolStatsSource::LinkSpeedMbps:
//    ETHTOOL_GLINKSETTINGS, or the sysfs speed attribute with --ethtool-dir),
//    asked only of netdevs that have such frames and no RDMA port rate, at
//    their first resolve and then at each rescan. A changed link rate
//    re-resolves the netdev (the rate is part of the estimate's key). A
//    speed the source cannot tell (kUnsupported) is counted once and not
//    asked again for that netdev; a netdev without a speed (link down,
//    SPEED_UNKNOWN, no such sysfs file) gets no estimate until it has one.
//  - ethtool netlink pause and FEC stats (source "ethtool_netlink"): only for
//    the label sets no `ethtool -S` name provides, and a request the device or
//    kernel does not support is asked once, counted once (kUnsupported) and
//    not asked again for that netdev.
// Series keys: source "ethtool"/"ethtool_netlink", the raw name, the netdev
// and the device/port of the RDMA port it belongs to ("" / 0 otherwise).
//
// Errors: a vanished netdev or file is counted once (kNotFound), its series
// are marked absent and it is picked up again when it returns; unparsable or
// truncated content counts kParse and exports nothing for that tick (the last
// good values stay).
//
// Thread-safety: Discover and Poll run on one thread at a time (medium tier
// only).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "collectors/collector.h"
#include "collectors/ethtool_stats_source.h"
#include "core/clock.h"
#include "core/signals.h"

namespace fabricscope {

class EthtoolCollector final : public Collector {
 public:
  static constexpr char kDescription[] =
      "ethtool -S (ETHTOOL_GSTATS) and ethtool netlink pause/FEC stats of RoCE netdevs: PFC, "
      "pause time, discards, FEC (medium tier; --ethtool-dir reads text files instead)";

  struct Options {
    absl::Duration rescan = absl::Seconds(1);
    NetdevFilter netdev_include;  // extra interfaces of the host (empty filter: none)
  };

  static absl::StatusOr<std::unique_ptr<Collector>> Create(const CollectorContext& ctx);

  // `store`, `ports` and `clock` outlive the collector.
  EthtoolCollector(Store* store, const PortInventory* ports, Clock* clock,
                   std::unique_ptr<EthtoolStatsSource> source, Options options);

  absl::string_view name() const override { return "ethtool"; }
  std::vector<Tier> Tiers() const override { return {Tier::kMedium}; }
  absl::Status Discover(PollContext& ctx) override;
  absl::Status Poll(PollContext& ctx) override;

  // Introspection for tests and the benchmark.
  size_t MappedCount(const std::string& netdev) const;
  // Names the source reported for `netdev` at its last successful read.
  size_t NameCount(const std::string& netdev) const;
  size_t NetdevCount() const { return devices_.size(); }

 private:
  struct Mapped {
    uint32_t index;
    SeriesId id;
  };
  struct Device {
    std::string netdev;
    std::string rdma_device;
    uint32_t port = 0;
    double link_bps = 0;  // the RDMA port's link rate, 0 when unknown
    // The netdev's own link speed, asked only while wants_speed and link_bps
    // is 0 (the RDMA port's rate comes first); 0 when unknown.
    uint32_t speed_mbps = 0;
    bool wants_speed = false;  // it has XOFF frames to estimate pause time from
    bool speed_asked = false;  // since the last rescan
    bool speed_unsupported = false;
    std::unique_ptr<EthtoolStatsReader> reader;
    bool listed = true;     // in the last rescan
    bool present = true;    // false after a NotFound, until a read succeeds
    bool resolved = false;  // Remap ran for the current reader
    bool stats_unsupported = false;
    bool pause_unsupported = false;
    bool fec_unsupported = false;
    std::vector<Mapped> mapped;
    std::vector<SeriesId> mapped_ids;                    // == ids of `mapped`
    absl::flat_hash_set<std::string> claimed;            // label sets of ethtool -S series
    absl::flat_hash_map<std::string, SeriesId> netlink;  // name -> series
  };

  void Rescan(PollContext& ctx);
  void PollDevice(PollContext& ctx, Device& dev);
  void Remap(PollContext& ctx, Device& dev);
  // Asks the source for dev's link speed; true when it changed.
  bool AskSpeed(PollContext& ctx, Device& dev);
  // The rate the pause-time estimates use, bits per second (0: none).
  static double EstimateRateBps(const Device& dev);
  void PollStandard(PollContext& ctx, Device& dev);
  void AppendNetlink(PollContext& ctx, Device& dev, const std::string& name, uint64_t value);
  void MarkAbsent(Device& dev);
  std::optional<Signal> Resolve(const SeriesKey& key);

  Store* const store_;
  const PortInventory* const ports_;
  Clock* const clock_;
  std::unique_ptr<EthtoolStatsSource> source_;
  const Options options_;
  std::optional<SteadyTime> last_scan_;
  absl::flat_hash_map<std::string, std::unique_ptr<Device>> devices_;
  // Names known to map to nothing (most of a 751-name mlx5 set): skips the
  // regex table on re-resolve.
  absl::flat_hash_set<std::string> unmapped_;
};

}  // namespace fabricscope
