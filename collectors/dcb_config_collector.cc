#include "collectors/dcb_config_collector.h"

#include <linux/dcbnl.h>
#include <net/if.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "collectors/netlink_transaction.h"
#include "collectors/sysfs_reader.h"
#include "core/errors.h"
#include "core/signals.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

constexpr absl::string_view kSource = "dcb_config";

class KernelDcbSource final : public DcbSource {
 public:
  ~KernelDcbSource() override {
    if (sock_ != nullptr) nl_socket_free(sock_);
  }

  absl::StatusOr<uint8_t> PfcEnabled(const std::string& netdev) override {
    if (sock_ == nullptr) {
      sock_ = nl_socket_alloc();
      if (sock_ == nullptr) return absl::InternalError("nl_socket_alloc failed");
      if (int err = nl_connect(sock_, NETLINK_ROUTE); err < 0) {
        nl_socket_free(sock_);
        sock_ = nullptr;
        return absl::InternalError(absl::StrCat("rtnetlink connect: ", nl_geterror(err)));
      }
      nl_socket_disable_auto_ack(sock_);
      timeval tv{.tv_sec = 1, .tv_usec = 0};
      setsockopt(nl_socket_get_fd(sock_), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    nl_msg* msg = nlmsg_alloc_simple(RTM_GETDCB, NLM_F_REQUEST);
    if (msg == nullptr) return absl::InternalError("nlmsg_alloc failed");
    dcbmsg d{};
    d.dcb_family = AF_UNSPEC;
    d.cmd = DCB_CMD_IEEE_GET;
    if (nlmsg_append(msg, &d, sizeof(d), NLMSG_ALIGNTO) < 0 ||
        nla_put_string(msg, DCB_ATTR_IFNAME, netdev.c_str()) < 0) {
      nlmsg_free(msg);
      return absl::InternalError("cannot build the dcbnl request");
    }
    absl::Status s =
        NetlinkTransact(sock_, msg, RTM_GETDCB, absl::StrCat("dcbnl IEEE_GET ", netdev), &reply_);
    nlmsg_free(msg);
    if (!s.ok()) return s;
    if (reply_.empty()) return absl::InternalError("no dcbnl reply");
    return ParseDcbIeeeGetReply(reinterpret_cast<const nlmsghdr*>(reply_.data()));
  }

 private:
  nl_sock* sock_ = nullptr;
  std::vector<uint8_t> reply_;  // the last answer (NetlinkTransact's buffer)
};

class DirDcbSource final : public DcbSource {
 public:
  explicit DirDcbSource(std::string dir) : dir_(std::move(dir)) {}

  absl::StatusOr<uint8_t> PfcEnabled(const std::string& netdev) override {
    const std::string path = absl::StrCat(dir_, "/", netdev);
    absl::StatusOr<std::string> text = ReadAttribute(path);  // bounded (4 KiB)
    if (!text.ok()) return text.status();
    absl::StatusOr<uint8_t> pfc = ParseDcbPfcShowText(*text);
    if (!pfc.ok()) return UnparsableError(absl::StrCat(path, ": ", pfc.status().message()));
    return pfc;
  }

 private:
  const std::string dir_;
};

// Reads a small decimal sysfs file (collectors/sysfs_reader.h); nullopt when
// it does not exist (a missing source is not an error).
absl::StatusOr<std::optional<uint64_t>> ReadUint(const std::string& path) {
  absl::StatusOr<uint64_t> v = ReadUintAttribute(path);
  if (absl::IsNotFound(v.status())) return std::optional<uint64_t>();
  if (!v.ok()) return v.status();
  return std::optional<uint64_t>(*v);
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

absl::StatusOr<uint8_t> ParseDcbIeeeGetReply(const nlmsghdr* reply) {
  nlattr* tb[DCB_ATTR_MAX + 1] = {};
  if (nlmsg_parse(const_cast<nlmsghdr*>(reply), sizeof(dcbmsg), tb, DCB_ATTR_MAX, nullptr) < 0) {
    return UnparsableError("malformed dcbnl reply");
  }
  if (tb[DCB_ATTR_IEEE] == nullptr) return absl::UnimplementedError("no DCB_ATTR_IEEE in reply");
  nlattr* ieee[DCB_ATTR_IEEE_MAX + 1] = {};
  if (nla_parse_nested(ieee, DCB_ATTR_IEEE_MAX, tb[DCB_ATTR_IEEE], nullptr) < 0) {
    return UnparsableError("malformed DCB_ATTR_IEEE nest");
  }
  const nlattr* pfc = ieee[DCB_ATTR_IEEE_PFC];
  if (pfc == nullptr) return absl::UnimplementedError("no IEEE PFC configuration");
  if (nla_len(pfc) < static_cast<int>(offsetof(ieee_pfc, pfc_en) + 1)) {
    return UnparsableError("short DCB_ATTR_IEEE_PFC");
  }
  ieee_pfc v{};
  memcpy(&v, nla_data(pfc), std::min<size_t>(sizeof(v), nla_len(pfc)));
  return v.pfc_en;
}

absl::StatusOr<uint8_t> ParseDcbPfcShowText(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> tokens = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (tokens.empty() || tokens[0] != "prio-pfc") continue;
    uint8_t bitmap = 0;
    uint8_t seen = 0;
    for (size_t i = 1; i < tokens.size(); ++i) {
      const absl::string_view token = tokens[i];
      const size_t colon = token.find(':');
      int prio = -1;
      if (colon == absl::string_view::npos || !absl::SimpleAtoi(token.substr(0, colon), &prio) ||
          prio < 0 || prio > 7) {
        return UnparsableError(
            absl::StrCat("prio-pfc: bad entry \"", absl::CEscape(token.substr(0, 32)), "\""));
      }
      const absl::string_view state = token.substr(colon + 1);
      if (state != "on" && state != "off") {
        return UnparsableError(absl::StrCat("prio-pfc: priority ", prio, " is \"",
                                            absl::CEscape(state.substr(0, 32)),
                                            "\", not on or off"));
      }
      const uint8_t bit = static_cast<uint8_t>(1u << prio);
      if (seen & bit) return UnparsableError(absl::StrCat("prio-pfc: priority ", prio, " twice"));
      seen |= bit;
      if (state == "on") bitmap |= bit;
    }
    if (seen != 0xff) return UnparsableError("prio-pfc: not every priority 0..7 listed");
    return bitmap;
  }
  return UnparsableError("no prio-pfc line");
}

std::unique_ptr<DcbSource> MakeKernelDcbSource() { return std::make_unique<KernelDcbSource>(); }

std::unique_ptr<DcbSource> MakeDirDcbSource(std::string dir) {
  return std::make_unique<DirDcbSource>(std::move(dir));
}

absl::StatusOr<std::unique_ptr<Collector>> DcbConfigCollector::Create(const CollectorContext& ctx) {
  if (ctx.options == nullptr || ctx.store == nullptr || ctx.ports == nullptr) {
    return absl::InvalidArgumentError("dcb_config needs a config, a store and a port inventory");
  }
  return std::make_unique<DcbConfigCollector>(
      ctx.store, ctx.ports, ctx.options->sysfs_root, ctx.options->netdev_include,
      ctx.options->dcb_dir.empty() ? MakeKernelDcbSource()
                                   : MakeDirDcbSource(ctx.options->dcb_dir));
}

DcbConfigCollector::DcbConfigCollector(Store* store, const PortInventory* ports,
                                       std::string sysfs_root, NetdevFilter netdev_include,
                                       std::unique_ptr<DcbSource> dcb)
    : store_(store),
      ports_(ports),
      sysfs_root_(std::move(sysfs_root)),
      include_(std::move(netdev_include)),
      dcb_(std::move(dcb)) {}

absl::Status DcbConfigCollector::Discover(PollContext& ctx) { return absl::OkStatus(); }

void DcbConfigCollector::Put(PollContext& ctx, const std::string& name, const Owner& owner,
                             const std::string& netdev, uint64_t raw) {
  SeriesKey key{std::string(kSource), name, owner.device, owner.port, netdev};
  std::optional<SeriesId> id = store_->Find(key);
  if (!id) {
    std::optional<Signal> sig = MapCounter(key);
    if (!sig) return;
    SeriesId nid = store_->Register(key, *sig);
    if (nid == kInvalidSeries) return;
    id = nid;
  }
  if (!live_.contains(*id)) store_->SetPresent(*id, true);
  seen_.insert(*id);
  ctx.Append(*id, raw);
}

void DcbConfigCollector::PollEcn(PollContext& ctx, const std::string& netdev, const Owner& owner) {
  for (absl::string_view role : {"np", "rp"}) {
    const std::string dir =
        absl::StrCat(sysfs_root_, "/class/net/", netdev, "/ecn/roce_", role, "/enable");
    if (!IsDir(dir)) continue;
    for (int p = 0; p < 8; ++p) {
      const std::string path = absl::StrCat(dir, "/", p);
      absl::StatusOr<std::optional<uint64_t>> v = ReadUint(path);
      if (!v.ok()) {
        ctx.Error(v.status(), path);
        continue;
      }
      if (!v->has_value()) continue;
      Put(ctx, absl::StrCat("ecn_roce_", role, "_enable_", p), owner, netdev, **v != 0 ? 1 : 0);
    }
  }
}

absl::Status DcbConfigCollector::Poll(PollContext& ctx) {
  seen_.clear();
  std::map<std::string, Owner> netdevs;  // sorted: stable order
  std::vector<PortInfo> ports = ports_->List();
  for (const PortInfo& p : ports) {
    if (p.present && !p.netdev.empty()) netdevs.try_emplace(p.netdev, Owner{p.device, p.port});
  }
  if (!include_.empty()) {
    if (struct if_nameindex* ifs = if_nameindex(); ifs != nullptr) {
      for (struct if_nameindex* i = ifs; i->if_index != 0 && i->if_name != nullptr; ++i) {
        if (include_.Matches(i->if_name)) netdevs.try_emplace(i->if_name, Owner{});
      }
      if_freenameindex(ifs);
    }
  }
  // Netdevs that carry the vendor ECN tree are RoCE netdevs too.
  const std::string net_dir = sysfs_root_ + "/class/net";
  if (absl::StatusOr<std::vector<std::string>> names = ListDir(net_dir); names.ok()) {
    for (const std::string& name : *names) {
      if (name[0] == '.') continue;
      if (IsDir(absl::StrCat(net_dir, "/", name, "/ecn"))) netdevs.try_emplace(name, Owner{});
    }
  }

  for (auto it = dcb_skip_.begin(); it != dcb_skip_.end();) {
    if (!netdevs.contains(*it)) {
      dcb_skip_.erase(it++);  // gone: ask again if it comes back
    } else {
      ++it;
    }
  }
  for (const auto& [netdev, owner] : netdevs) {
    if (!dcb_skip_.contains(netdev)) {
      absl::StatusOr<uint8_t> pfc = dcb_->PfcEnabled(netdev);
      if (pfc.ok()) {
        for (int p = 0; p < 8; ++p) {
          Put(ctx, absl::StrCat("pfc_enabled_prio", p), owner, netdev, (*pfc >> p) & 1);
        }
      } else {
        const CollectorErrorCode code = CollectorErrorCodeOf(pfc.status());
        if (code == CollectorErrorCode::kUnsupported || code == CollectorErrorCode::kNotFound) {
          dcb_skip_.insert(netdev);
        }
        ctx.Error(pfc.status(), netdev);
      }
    }
    PollEcn(ctx, netdev, owner);
  }
  for (const PortInfo& p : ports) {
    if (!p.present) continue;
    const std::string path = absl::StrCat(sysfs_root_, "/class/infiniband/", p.device, "/ports/",
                                          p.port, "/hw_counters/lifespan");
    absl::StatusOr<std::optional<uint64_t>> v = ReadUint(path);
    if (!v.ok()) {
      ctx.Error(v.status(), path);
      continue;
    }
    if (v->has_value()) Put(ctx, "hw_counters_lifespan", Owner{p.device, p.port}, "", **v);
  }
  for (SeriesId id : live_) {
    if (!seen_.contains(id)) store_->SetPresent(id, false);
  }
  live_.swap(seen_);
  return absl::OkStatus();
}

}  // namespace fabricscope
