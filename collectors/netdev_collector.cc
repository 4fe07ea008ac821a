#include "collectors/netdev_collector.h"

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectors/netlink_util.h"
#include "core/errors.h"
#include "core/log.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

constexpr absl::string_view kComponent = "netdev";
constexpr int kRecvTimeoutMs = 100;

// What one netlink exchange produced; filled by the libnl callbacks.
struct Exchange {
  uint32_t seq = 0;  // the request's sequence number; other replies are stale
  // Single-link request.
  int want_ifindex = 0;
  bool got_link = false;
  std::string name;
  bool has_stats = false;
  rtnl_link_stats64 stats{};
  // Dump.
  std::vector<std::pair<int, std::string>> links;
  // NLMSG_ERROR from the kernel (positive errno), 0 if none.
  int kernel_errno = 0;
};

// Reads IFLA_IFNAME (and IFLA_STATS64 for a single-link request) of one
// RTM_NEWLINK message without building an rtnl_link object.
int OnValid(nl_msg* msg, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  nlmsghdr* hdr = nlmsg_hdr(msg);
  if (hdr->nlmsg_seq != ex->seq || hdr->nlmsg_type != RTM_NEWLINK) return NL_SKIP;
  if (!nlmsg_valid_hdr(hdr, sizeof(ifinfomsg))) return NL_SKIP;
  const auto* ifi = static_cast<const ifinfomsg*>(nlmsg_data(hdr));
  nlattr* name_attr = nlmsg_find_attr(hdr, sizeof(ifinfomsg), IFLA_IFNAME);
  std::string name;
  if (name_attr != nullptr && nla_len(name_attr) > 0) {
    const char* p = static_cast<const char*>(nla_data(name_attr));
    name.assign(p, strnlen(p, static_cast<size_t>(nla_len(name_attr))));
  }
  if (ex->want_ifindex == 0) {  // dump
    if (!name.empty()) ex->links.emplace_back(ifi->ifi_index, std::move(name));
    return NL_OK;
  }
  if (ifi->ifi_index != ex->want_ifindex) return NL_SKIP;
  ex->got_link = true;
  ex->name = std::move(name);
  nlattr* stats = nlmsg_find_attr(hdr, sizeof(ifinfomsg), IFLA_STATS64);
  // The first eight fields (the ones we read) exist in every kernel's struct;
  // newer kernels append more.
  constexpr size_t kNeeded = 8 * sizeof(uint64_t);
  if (stats != nullptr && static_cast<size_t>(nla_len(stats)) >= kNeeded) {
    std::memcpy(&ex->stats, nla_data(stats),
                std::min(sizeof(ex->stats), static_cast<size_t>(nla_len(stats))));
    ex->has_stats = true;
  }
  return NL_OK;
}

int OnError(sockaddr_nl*, nlmsgerr* err, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  ex->kernel_errno = NetlinkErrno(err->error);
  return NL_STOP;
}

int AcceptAnySeq(nl_msg*, void*) { return NL_OK; }

// Sends `msg` (consumed) and receives the reply into `ex`. Returns a libnl
// error code (<0) for a local failure, 0 otherwise (kernel errors land in
// ex->kernel_errno).
int Transact(nl_sock* sock, nl_msg* msg, Exchange* ex) {
  int rc = nl_send_auto(sock, msg);
  if (rc >= 0) ex->seq = nlmsg_hdr(msg)->nlmsg_seq;
  nlmsg_free(msg);
  if (rc < 0) return rc;
  nl_cb* cb = nl_cb_alloc(NL_CB_DEFAULT);
  if (cb == nullptr) return -NLE_NOMEM;
  nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, OnValid, ex);
  nl_cb_err(cb, NL_CB_CUSTOM, OnError, ex);
  // Our own seq check in OnValid skips stale replies of an earlier request.
  nl_cb_set(cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, AcceptAnySeq, nullptr);
  rc = nl_recvmsgs(sock, cb);
  nl_cb_put(cb);
  return rc < 0 ? rc : 0;
}

}  // namespace

const std::array<absl::string_view, NetdevCollector::kNumStats>& NetdevCollector::StatNames() {
  static constexpr std::array<absl::string_view, kNumStats> kNames = {
      "rx_bytes",   "tx_bytes",   "rx_packets", "tx_packets",
      "rx_dropped", "tx_dropped", "rx_errors",  "tx_errors"};
  return kNames;
}

absl::StatusOr<std::unique_ptr<Collector>> NetdevCollector::Create(const CollectorContext& ctx) {
  auto c = CreateWithOptions(ctx, Options{});
  if (!c.ok()) return c.status();
  return std::unique_ptr<Collector>(std::move(*c));
}

absl::StatusOr<std::unique_ptr<NetdevCollector>> NetdevCollector::CreateWithOptions(
    const CollectorContext& ctx, Options options) {
  if (ctx.options == nullptr || ctx.store == nullptr || ctx.ports == nullptr) {
    return absl::InvalidArgumentError(
        "netdev collector needs a config, a store and a port inventory");
  }
  return std::unique_ptr<NetdevCollector>(new NetdevCollector(ctx, options));
}

NetdevCollector::NetdevCollector(const CollectorContext& ctx, Options options)
    : cctx_(ctx), options_(options), include_(ctx.options->netdev_include) {}

NetdevCollector::~NetdevCollector() { CloseSocket(); }

absl::Status NetdevCollector::EnsureSocket() {
  if (sock_ != nullptr) return absl::OkStatus();
  nl_sock* sock = nl_socket_alloc();
  if (sock == nullptr) return absl::ResourceExhaustedError("netdev: nl_socket_alloc failed");
  int rc = nl_connect(sock, NETLINK_ROUTE);
  if (rc < 0) {
    nl_socket_free(sock);
    return absl::UnavailableError(
        absl::StrCat("netdev: connecting the rtnetlink socket: ", nl_geterror(rc)));
  }
  // Requests are answered by a reply (or NLMSG_ERROR); no extra ACK round.
  nl_socket_disable_auto_ack(sock);
  timeval tv{.tv_sec = 0, .tv_usec = kRecvTimeoutMs * 1000};
  setsockopt(nl_socket_get_fd(sock), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sock_ = sock;
  return absl::OkStatus();
}

void NetdevCollector::CloseSocket() {
  if (sock_ == nullptr) return;
  nl_close(sock_);
  nl_socket_free(sock_);
  sock_ = nullptr;
}

absl::Status NetdevCollector::Discover(PollContext& ctx) {
  absl::Status s = EnsureSocket();
  if (!s.ok()) return s;
  Clock* clock = cctx_.clock != nullptr ? cctx_.clock : RealClock::Get();
  last_rescan_ = clock->SteadyNow();
  return Rescan(ctx);
}

void NetdevCollector::RegisterSeries(Interface& iface) {
  for (int i = 0; i < kNumStats; ++i) {
    SeriesKey key{"netdev", std::string(StatNames()[i]), iface.device, iface.port, iface.name};
    std::optional<Signal> signal = MapCounter(key);
    // The signal table has netdev rules for every name in StatNames() (tested).
    if (!signal.has_value()) {
      Log(LogLevel::kError, kComponent, "no signal rule for netdev counter",
          {{"counter", key.name}});
      std::abort();
    }
    iface.ids[i] = cctx_.store->Register(key, *signal);
  }
  iface.registered = true;
  SetPresent(iface, true);  // a re-registered key may have been marked absent
}

void NetdevCollector::SetPresent(Interface& iface, bool present) {
  iface.present = present;
  if (!iface.registered) return;
  for (SeriesId id : iface.ids) cctx_.store->SetPresent(id, present);
}

absl::Status NetdevCollector::Rescan(PollContext& ctx) {
  // Which RDMA port each netdev belongs to (first port wins).
  absl::flat_hash_map<std::string, std::pair<std::string, uint32_t>> rdma;
  std::vector<PortInfo> ports = cctx_.ports->List();
  std::sort(ports.begin(), ports.end(), [](const PortInfo& a, const PortInfo& b) {
    return std::tie(a.device, a.port) < std::tie(b.device, b.port);
  });
  for (const PortInfo& p : ports) {
    if (p.present && !p.netdev.empty()) rdma.try_emplace(p.netdev, p.device, p.port);
  }

  // The kernel's interfaces: one dump, names and indexes only. A dump that
  // raced with a link change (NLM_F_DUMP_INTR) is retried once.
  Exchange ex;
  int rc = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    nl_msg* msg = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_DUMP);
    if (msg == nullptr) return absl::ResourceExhaustedError("netdev: nlmsg_alloc failed");
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    if (nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
        nla_put_u32(msg, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS) < 0) {
      nlmsg_free(msg);
      return absl::ResourceExhaustedError("netdev: building the RTM_GETLINK dump failed");
    }
    ex = Exchange{};
    rc = Transact(sock_, msg, &ex);
    if (rc != -NLE_DUMP_INTR) break;
  }
  if (rc < 0 || ex.kernel_errno != 0) {
    ctx.Error(rc < 0
                  ? absl::InternalError(absl::StrCat("RTM_GETLINK dump failed: ", nl_geterror(rc)))
                  : ErrnoToStatus(ex.kernel_errno, "RTM_GETLINK dump failed"),
              "rescan");
    CloseSocket();  // drop whatever is left of the dump; reopened next tick
    return absl::OkStatus();
  }
  absl::flat_hash_map<std::string, int> kernel;
  for (auto& [index, name] : ex.links) kernel.emplace(std::move(name), index);

  // Wanted: RDMA netdevs (found or not) and regex matches.
  absl::flat_hash_set<std::string> wanted;
  for (const auto& [name, where] : rdma) wanted.insert(name);
  if (!include_.empty()) {
    for (const auto& [name, index] : kernel) {
      if (include_.Matches(name)) wanted.insert(name);
    }
  }

  for (const std::string& name : wanted) {
    auto k = kernel.find(name);
    Interface* iface = nullptr;
    if (auto it = by_name_.find(name); it != by_name_.end()) iface = it->second;
    if (k == kernel.end()) {
      // Not (or no longer) in this kernel. A polled one is reported below;
      // one never seen is no data.
      if (iface == nullptr && missing_logged_.insert(name).second) {
        auto r = rdma.find(name);
        Log(LogLevel::kDebug, kComponent, "RDMA port netdev not in this network namespace; no data",
            {{"netdev", name},
             {"device", r == rdma.end() ? "" : r->second.first},
             {"port", r == rdma.end() ? "" : absl::StrCat(r->second.second)}});
      }
      continue;
    }
    std::string device;
    uint32_t port = 0;
    if (auto r = rdma.find(name); r != rdma.end()) std::tie(device, port) = r->second;
    if (iface == nullptr) {
      auto owned = std::make_unique<Interface>();
      owned->name = name;
      iface = owned.get();
      interfaces_.push_back(std::move(owned));
      by_name_.emplace(name, iface);
    }
    if (iface->registered && (iface->device != device || iface->port != port)) {
      // The interface moved to (or off) an RDMA port: the old series end.
      SetPresent(*iface, false);
      iface->registered = false;
    }
    iface->device = device;
    iface->port = port;
    const bool was_absent = iface->registered && !iface->present;
    if (!iface->registered) {
      RegisterSeries(*iface);
    } else if (!iface->present) {
      SetPresent(*iface, true);
    }
    if (was_absent) {
      Log(LogLevel::kInfo, kComponent, "interface is back",
          {{"netdev", name}, {"ifindex", absl::StrCat(k->second)}});
    }
    iface->ifindex = k->second;
  }

  for (auto& iface : interfaces_) {
    if (iface->ifindex == 0) continue;
    if (!kernel.contains(iface->name)) {
      // Polled until now and gone from the kernel, whichever way it was
      // wanted (a regex cannot match a name that no longer exists).
      MarkVanished(ctx, *iface, "interface vanished");
    } else if (!wanted.contains(iface->name)) {
      // Still there but no longer wanted (RDMA port gone, regex changed).
      Log(LogLevel::kInfo, kComponent, "interface no longer watched", {{"netdev", iface->name}});
      iface->ifindex = 0;
      SetPresent(*iface, false);
    }
  }
  return absl::OkStatus();
}

void NetdevCollector::MarkVanished(PollContext& ctx, Interface& iface, absl::string_view detail) {
  ctx.Error(absl::NotFoundError(detail), iface.name);
  iface.ifindex = 0;
  SetPresent(iface, false);
}

void NetdevCollector::PollInterface(PollContext& ctx, Interface& iface) {
  nl_msg* msg = nullptr;
  int rc = rtnl_link_build_get_request(iface.ifindex, nullptr, &msg);
  if (rc < 0) {
    ctx.Error(absl::InternalError(absl::StrCat("building RTM_GETLINK failed: ", nl_geterror(rc))),
              iface.name);
    return;
  }
  // libnl asks for RTEXT_FILTER_VF: on an SR-IOV PF that adds per-VF info and
  // stats to every reply (a firmware query per VF on mlx5). We want none of it.
  if (nlattr* mask = nlmsg_find_attr(nlmsg_hdr(msg), sizeof(ifinfomsg), IFLA_EXT_MASK)) {
    const uint32_t none = 0;
    std::memcpy(nla_data(mask), &none, sizeof(none));
  }
  Exchange ex;
  ex.want_ifindex = iface.ifindex;
  rc = Transact(sock_, msg, &ex);
  const bool gone = ex.kernel_errno == ENODEV || (ex.got_link && ex.name != iface.name);
  if (gone) {
    MarkVanished(ctx, iface,
                 ex.kernel_errno == ENODEV
                     ? "interface vanished"
                     : absl::StrCat("interface vanished (its ifindex now names ", ex.name, ")"));
    return;
  }
  if (rc < 0 || ex.kernel_errno != 0 || !ex.got_link) {
    ctx.Error(rc < 0 ? absl::InternalError(absl::StrCat("RTM_GETLINK failed: ", nl_geterror(rc)))
              : ex.kernel_errno != 0
                  ? ErrnoToStatus(ex.kernel_errno, "RTM_GETLINK failed")
                  : absl::DeadlineExceededError(
                        "RTM_GETLINK failed: no reply within the receive timeout"),
              iface.name);
    CloseSocket();  // a late reply must not be read as the next one's
    return;
  }
  if (!ex.has_stats) {
    ctx.Error(absl::UnimplementedError("reply has no IFLA_STATS64"), iface.name);
    return;
  }
  const rtnl_link_stats64& s = ex.stats;
  const uint64_t values[kNumStats] = {s.rx_bytes,   s.tx_bytes,   s.rx_packets, s.tx_packets,
                                      s.rx_dropped, s.tx_dropped, s.rx_errors,  s.tx_errors};
  for (int i = 0; i < kNumStats; ++i) ctx.Append(iface.ids[i], values[i]);
}

absl::Status NetdevCollector::Poll(PollContext& ctx) {
  absl::Status s = EnsureSocket();
  if (!s.ok()) return s;
  Clock* clock = cctx_.clock != nullptr ? cctx_.clock : RealClock::Get();
  const SteadyTime now = clock->SteadyNow();
  if (!last_rescan_.has_value() ||
      now - *last_rescan_ >= absl::ToChronoNanoseconds(options_.rescan_interval)) {
    last_rescan_ = now;
    s = Rescan(ctx);
    if (!s.ok()) return s;
  }
  for (auto& iface : interfaces_) {
    if (iface->ifindex == 0) continue;
    if (sock_ == nullptr) {
      s = EnsureSocket();
      if (!s.ok()) return s;
    }
    PollInterface(ctx, *iface);
  }
  return absl::OkStatus();
}

int NetdevCollector::NetlinkFdForTest() const {
  return sock_ == nullptr ? -1 : nl_socket_get_fd(sock_);
}

std::vector<std::string> NetdevCollector::WatchedForTest() const {
  std::vector<std::string> out;
  for (const auto& iface : interfaces_) {
    if (iface->ifindex != 0) out.push_back(iface->name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fabricscope
