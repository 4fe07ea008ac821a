// The dcb_config collector (config tier, 10 s): the RoCE congestion
// configuration that decides how the counters must be read
// (../shared/reference/counters.md section 6), as gauges:
//
//  - fabricscope_pfc_enabled{netdev,priority}: dcbnl RTM_GETDCB with
//    DCB_CMD_IEEE_GET -> DCB_ATTR_IEEE -> DCB_ATTR_IEEE_PFC (struct ieee_pfc,
//    pfc_en bitmap), for the netdevs of RDMA ports, --netdev-include matches
//    and netdevs with a vendor ECN tree. With --dcb-dir=DIR (tests and the
//    simulator: netdevs the kernel does not have) the bitmap comes from
//    DIR/<netdev> instead, the text of iproute2's `dcb pfc show dev <netdev>`.
//  - fabricscope_ecn_enabled{netdev,priority,role}: the MLNX_OFED tree
//    <sysfs-root>/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio> when present.
//  - fabricscope_hw_counters_lifespan_seconds{device,port}:
//    <sysfs-root>/class/infiniband/<dev>/ports/<p>/hw_counters/lifespan (ms).
//
// Absence of a source is not an error (no ECN tree, no lifespan file). A
// netdev whose driver has no dcbnl (veth, virtio) answers EOPNOTSUPP: that is
// remembered, counted once (kUnsupported; EINVAL likewise, core/errors.h) and
// not asked again while the netdev stays; a netdev unknown to the kernel
// likewise (kNotFound). The dcbnl exchange is collectors/netlink_transaction.h;
// the sysfs files are read through collectors/sysfs_reader.h. Garbage in a
// sysfs file or a malformed dcbnl reply counts kParse. Series not refreshed
// in a tick (source gone) are marked absent.
//
// Thread-safety: Discover and Poll run on one thread at a time (config tier).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "collectors/collector.h"

struct nlmsghdr;

namespace fabricscope {

// Where PFC configuration comes from (seam for tests).
class DcbSource {
 public:
  virtual ~DcbSource() = default;
  // The IEEE pfc_en bitmap (bit p = PFC on priority p). UnimplementedError
  // when the device has no dcbnl / no IEEE PFC, NotFoundError when the netdev
  // does not exist, UnparsableError (DataLoss) for a malformed reply.
  virtual absl::StatusOr<uint8_t> PfcEnabled(const std::string& netdev) = 0;
};

// dcbnl over rtnetlink (libnl). One socket, used from one thread.
std::unique_ptr<DcbSource> MakeKernelDcbSource();

// A directory of `dcb pfc show dev <netdev>` text files, DIR/<netdev>, re-read
// on every call (the simulator writes them; a test can change them):
// NotFoundError when the file does not exist (like a netdev the kernel does
// not know), UnparsableError for text ParseDcbPfcShowText rejects.
std::unique_ptr<DcbSource> MakeDirDcbSource(std::string dir);

// Parses the text of iproute2's `dcb pfc show dev <netdev>`:
//   pfc-cap 8 macsec-bypass off delay 0
//   prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off
// into the pfc_en bitmap. Only the prio-pfc line counts (other lines, such
// as the statistics of `dcb -s`, are ignored); it must name each priority
// 0..7 exactly once as on or off. UnparsableError otherwise. Exposed for tests.
absl::StatusOr<uint8_t> ParseDcbPfcShowText(absl::string_view text);

// Parses a DCB_CMD_IEEE_GET reply message; exposed for tests.
absl::StatusOr<uint8_t> ParseDcbIeeeGetReply(const nlmsghdr* reply);

class DcbConfigCollector final : public Collector {
 public:
  static constexpr char kDescription[] =
      "PFC enabled priorities (dcbnl), RoCE ECN enable per priority (vendor sysfs), "
      "hw_counters lifespan (config tier)";

  static absl::StatusOr<std::unique_ptr<Collector>> Create(const CollectorContext& ctx);

  // `store` and `ports` outlive the collector.
  DcbConfigCollector(Store* store, const PortInventory* ports, std::string sysfs_root,
                     NetdevFilter netdev_include, std::unique_ptr<DcbSource> dcb);

  absl::string_view name() const override { return "dcb_config"; }
  std::vector<Tier> Tiers() const override { return {Tier::kConfig}; }
  absl::Status Discover(PollContext& ctx) override;
  absl::Status Poll(PollContext& ctx) override;

 private:
  struct Owner {
    std::string device;
    uint32_t port = 0;
  };
  void Put(PollContext& ctx, const std::string& name, const Owner& owner, const std::string& netdev,
           uint64_t raw);
  void PollEcn(PollContext& ctx, const std::string& netdev, const Owner& owner);

  Store* const store_;
  const PortInventory* const ports_;
  const std::string sysfs_root_;
  const NetdevFilter include_;  // --netdev-include
  std::unique_ptr<DcbSource> dcb_;
  // Netdevs whose dcbnl answered unsupported / not found: not asked again
  // while they stay in the set.
  absl::flat_hash_set<std::string> dcb_skip_;
  absl::flat_hash_set<SeriesId> live_;  // series appended in the last poll
  absl::flat_hash_set<SeriesId> seen_;  // series appended in the current poll
};

}  // namespace fabricscope
