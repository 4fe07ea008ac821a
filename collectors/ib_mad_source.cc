#include "collectors/ib_mad_source.h"

#include <errno.h>
#include <glob.h>
#include <infiniband/umad.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "collectors/ib_mad.h"
#include "collectors/ib_pma.h"
#include "core/clock.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

// ---------------------------------------------------------------------------
// The libibumad transport.

constexpr char kUmadAbiFile[] = "/sys/class/infiniband_mad/abi_version";
constexpr char kUmadDeviceGlob[] = "/dev/infiniband/umad*";

bool AnyUmadDevice() {
  glob_t g;
  const int rc = glob(kUmadDeviceGlob, 0, nullptr, &g);
  const bool any = rc == 0 && g.gl_pathc > 0;
  globfree(&g);
  return any;
}

// ErrnoToStatus, except that nothing here may read as "no umad support at
// all" (Unimplemented is the source-wide signal; EINVAL from a umad call is
// not that).
absl::Status PortErrnoStatus(int err, absl::string_view context) {
  absl::Status s = fabricscope::ErrnoToStatus(err, context);
  if (absl::IsUnimplemented(s)) return absl::InternalError(s.message());
  return s;
}

uint64_t TransactionIdOf(const uint8_t* mad) { return LoadMadField(mad + 8, 8); }

// One MAD class over libibumad: directed-route SMPs (class 0x81, QP0, the
// permissive LID) or LID-routed GMPs to the port's own agent (class 0x04
// PerfMgt: QP1, the GSI Q_Key, the port's LID as the destination).
class UmadTransport final : public SmpTransport {
 public:
  UmadTransport(uint8_t mgmt_class, uint8_t class_version, bool lid_routed)
      : mgmt_class_(mgmt_class), class_version_(class_version), lid_routed_(lid_routed) {}
  UmadTransport(const UmadTransport&) = delete;
  UmadTransport& operator=(const UmadTransport&) = delete;
  ~UmadTransport() override {
    for (auto& [key, open] : ports_) Close(open);
  }

  absl::StatusOr<std::vector<uint8_t>> Query(const std::string& device, uint32_t port,
                                             absl::Span<const uint8_t> request,
                                             absl::Duration timeout) override {
    if (request.size() != kMadSize) {
      return absl::InvalidArgumentError(absl::StrCat("MAD of ", request.size(), " bytes"));
    }
    const std::string where = absl::StrCat(device, "/", port);
    auto it = ports_.find({device, port});
    if (it == ports_.end()) {
      absl::StatusOr<OpenPort> opened = Open(device, port, where);
      if (opened.ok() && lid_routed_ && opened->lid == 0) {
        Close(*opened);
        return absl::FailedPreconditionError(
            absl::StrCat(where, " has no LID (no subnet manager assigned one): no GMP"));
      }
      if (!opened.ok()) return opened.status();
      it = ports_.emplace(std::make_pair(device, port), *opened).first;
    }
    absl::StatusOr<std::vector<uint8_t>> reply = Exchange(it->second, request, timeout, where);
    if (!reply.ok() && !absl::IsDeadlineExceeded(reply.status())) {
      Close(it->second);
      ports_.erase(it);
    }
    return reply;
  }

 private:
  struct OpenPort {
    int fd = -1;
    int agent = -1;
    int lid = 0;  // the port's base LID (LID-routed classes)
  };

  static void Close(OpenPort& open) {
    if (open.fd < 0) return;
    if (open.agent >= 0) umad_unregister(open.fd, open.agent);
    umad_close_port(open.fd);
    open = OpenPort{};
  }

  absl::StatusOr<OpenPort> Open(const std::string& device, uint32_t port,
                                const std::string& where) const {
    if (umad_init() < 0) {
      return absl::UnimplementedError("umad_init failed: no InfiniBand MAD support");
    }
    if (access(kUmadAbiFile, R_OK) != 0) {
      return absl::UnimplementedError(absl::StrCat("no kernel umad support (", kUmadAbiFile, ": ",
                                                   strerror(errno), "; ib_umad not loaded?)"));
    }
    if (!AnyUmadDevice()) {
      return absl::UnimplementedError(
          absl::StrCat("no umad device (", kUmadDeviceGlob, " matches nothing)"));
    }
    errno = 0;
    const int fd = umad_open_port(device.c_str(), static_cast<int>(port));
    if (fd < 0) {
      // -EIO with open()'s errno when the device node cannot be opened;
      // -ENODEV / -EINVAL when no umad device belongs to the port.
      const int err = fd == -EIO && errno != 0 ? errno : -fd;
      if (err == EACCES || err == EPERM) {
        return absl::PermissionDeniedError(
            absl::StrCat("umad_open_port(", where, "): ", strerror(err)));
      }
      if (err == ENODEV || err == EINVAL || err == ENOENT) {
        return absl::NotFoundError(absl::StrCat("no umad device for ", where));
      }
      return PortErrnoStatus(err, absl::StrCat("umad_open_port(", where, ")"));
    }
    errno = 0;
    const int agent = umad_register(fd, mgmt_class_, class_version_, 0, nullptr);
    const std::string registered =
        absl::StrFormat("umad_register(%s, class 0x%02x)", where, mgmt_class_);
    if (agent < 0) {
      const int err = errno != 0 ? errno : -agent;
      umad_close_port(fd);
      if (err == EACCES || err == EPERM) {
        return absl::PermissionDeniedError(absl::StrCat(registered, ": ", strerror(err)));
      }
      return PortErrnoStatus(err, registered);
    }
    OpenPort open{fd, agent, 0};
    if (lid_routed_) {
      umad_port_t p{};
      if (umad_get_port(device.c_str(), static_cast<int>(port), &p) == 0) {
        open.lid = p.base_lid;
        umad_release_port(&p);
      }
    }
    return open;
  }

  // One request, one reply.
  absl::StatusOr<std::vector<uint8_t>> Exchange(const OpenPort& open,
                                                absl::Span<const uint8_t> request,
                                                absl::Duration timeout,
                                                const std::string& where) const {
    // struct ib_user_mad (umad_size() bytes, 8-aligned) then the MAD.
    const size_t words = (umad_size() + kMadSize + 7) / 8;
    std::vector<uint64_t> send_buf(words, 0);
    std::vector<uint64_t> recv_buf(words, 0);
    memcpy(umad_get_mad(send_buf.data()), request.data(), kMadSize);
    if (lid_routed_) {
      // To the port's own agent: its LID, QP1, the GSI Q_Key.
      umad_set_addr(send_buf.data(), open.lid, 1, 0, static_cast<int>(kGsiQkey));
    } else {
      // Directed route from the local port: the permissive LID, QP0, Q_Key 0.
      umad_set_addr(send_buf.data(), kPermissiveLid, 0, 0, 0);
    }
    const int timeout_ms =
        static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 1, 60'000));
    errno = 0;
    int rc = umad_send(open.fd, open.agent, send_buf.data(), kMadSize, timeout_ms, 0);
    if (rc < 0) {
      return PortErrnoStatus(errno != 0 ? errno : -rc, absl::StrCat("umad_send(", where, ")"));
    }
    const uint64_t tid = TransactionIdOf(request.data());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      int length = static_cast<int>(kMadSize);
      errno = 0;
      rc = umad_recv(open.fd, recv_buf.data(), &length, static_cast<int>(left.count()));
      if (rc == -ETIMEDOUT) break;
      if (rc < 0) {
        return PortErrnoStatus(errno != 0 ? errno : -rc, absl::StrCat("umad_recv(", where, ")"));
      }
      if (rc != open.agent) continue;
      const auto* mad = static_cast<const uint8_t*>(umad_get_mad(recv_buf.data()));
      if (length < 16 || !SameMadTransaction(TransactionIdOf(mad), tid)) {
        continue;  // a late reply or timeout notice of an earlier query
      }
      if (const int status = umad_status(recv_buf.data()); status != 0) {
        // The kernel hands the request back with ETIMEDOUT when no reply came.
        if (status == ETIMEDOUT) break;
        return PortErrnoStatus(status, absl::StrCat("MAD on ", where));
      }
      return std::vector<uint8_t>(mad, mad + std::min<int>(length, kMadSize));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("no MAD reply on ", where, " within ", timeout_ms, " ms"));
  }

  const uint8_t mgmt_class_;
  const uint8_t class_version_;
  const bool lid_routed_;
  std::map<std::pair<std::string, uint32_t>, OpenPort> ports_;
};

// ---------------------------------------------------------------------------
// The source.

bool IsSourceWide(const absl::Status& s) {
  return absl::IsUnimplemented(s) || absl::IsPermissionDenied(s);
}

class IbMadSource final : public LinkPartnerSource {
 public:
  IbMadSource(IbMadSourceOptions options, std::unique_ptr<SmpTransport> transport, Clock* clock)
      : options_(std::move(options)), transport_(std::move(transport)), clock_(clock) {
    // Low 32 bits distinct from one process to the next.
    next_tid_ = static_cast<uint64_t>(clock_->RealtimeNs()) & 0xffffffffu;
  }

  absl::string_view name() const override { return "ib_mad"; }

  absl::StatusOr<std::vector<LinkPartner>> Partners(
      const std::vector<PortInfo>& ports, const std::vector<std::string>& extra_netdevs) override {
    ++calls_;
    if (!unavailable_.ok()) {
      if (options_.unavailable_retry_calls <= 0 ||
          calls_ - unavailable_call_ < options_.unavailable_retry_calls) {
        return unavailable_;
      }
      unavailable_ = absl::OkStatus();
    }

    std::vector<const PortInfo*> eligible;
    for (const PortInfo& p : ports) {
      if (p.present && p.link_layer == "InfiniBand" && p.state == "ACTIVE") {
        eligible.push_back(&p);
      }
    }
    std::sort(eligible.begin(), eligible.end(), [](const PortInfo* a, const PortInfo* b) {
      return std::tie(a->device, a->port) < std::tie(b->device, b->port);
    });
    // Forget ports that are gone or no longer eligible.
    for (auto it = states_.begin(); it != states_.end();) {
      const bool kept = std::any_of(eligible.begin(), eligible.end(), [&](const PortInfo* p) {
        return p->device == it->first.first && p->port == it->first.second;
      });
      it = kept ? std::next(it) : states_.erase(it);
    }

    const SteadyTime deadline =
        clock_->SteadyNow() + absl::ToChronoNanoseconds(options_.call_budget);
    const size_t n = eligible.size();
    const size_t first = n == 0 ? 0 : next_first_ % n;
    next_first_ = 0;
    size_t not_asked = 0;
    for (size_t k = 0; k < n; ++k) {
      const PortInfo& p = *eligible[(first + k) % n];
      PortState& st = states_[{p.device, p.port}];
      if (clock_->SteadyNow() >= deadline) {
        if (not_asked == 0) next_first_ = (first + k) % n;
        ++not_asked;
        continue;  // keeps its previous partner, asked first next call
      }
      bool source_wide = false;
      absl::StatusOr<Peer> peer = Ask(p, deadline, &source_wide);
      if (!peer.ok()) {
        if (source_wide) {
          unavailable_ = peer.status();
          unavailable_call_ = calls_;
          states_.clear();
          descriptions_.clear();
          return unavailable_;
        }
        ReportPortError(peer.status(), absl::StrCat(p.device, "/", p.port));
        if (st.has_partner && ++st.failed_calls > options_.keep_partner_failed_calls) {
          st = PortState{};
        }
        continue;
      }
      st.has_partner = true;
      st.failed_calls = 0;
      st.node_guid = peer->node_guid;
      st.partner = LinkPartner{.device = p.device,
                               .port = p.port,
                               .netdev = p.netdev,
                               .source = "ib_mad",
                               .chassis_id = FormatIbGuid(peer->node_guid),
                               .system_name = peer->description,
                               .port_id = absl::StrCat(peer->local_port_num),
                               .port_description = IbNodeTypeName(peer->node_type)};
    }
    if (not_asked > 0) {
      ReportPortError(absl::DeadlineExceededError(absl::StrCat(
                          "call budget of ", absl::FormatDuration(options_.call_budget),
                          " spent: ", not_asked, " of ", n, " ports not asked this call")),
                      "ib_mad");
    }

    std::vector<LinkPartner> out;
    for (const PortInfo* p : eligible) {
      auto it = states_.find({p->device, p->port});
      if (it == states_.end() || !it->second.has_partner) continue;
      it->second.partner.netdev = p->netdev;
      out.push_back(it->second.partner);
    }
    // Keep the descriptions of the peers some port still has.
    for (auto it = descriptions_.begin(); it != descriptions_.end();) {
      const bool used = std::any_of(states_.begin(), states_.end(), [&](const auto& kv) {
        return kv.second.has_partner && kv.second.node_guid == it->first;
      });
      it = used ? std::next(it) : descriptions_.erase(it);
    }
    return out;
  }

 private:
  struct PortState {
    bool has_partner = false;
    int failed_calls = 0;  // consecutive, while has_partner
    uint64_t node_guid = 0;
    LinkPartner partner;
  };
  struct Description {
    std::string text;
    int64_t fetched_call = 0;
  };
  struct Peer {
    uint64_t node_guid = 0;
    uint8_t node_type = 0;
    uint8_t local_port_num = 0;
    std::string description;
  };

  void ReportPortError(const absl::Status& status, absl::string_view key) {
    if (options_.port_error) options_.port_error(status, key);
  }

  // One SMP; `*source_wide` is set when the transport says umad is not
  // usable at all.
  absl::StatusOr<std::vector<uint8_t>> Send(const PortInfo& p, uint16_t attribute, uint64_t tid,
                                            SteadyTime deadline, bool* source_wide) {
    const SteadyTime now = clock_->SteadyNow();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("call budget of ", absl::FormatDuration(options_.call_budget), " spent"));
    }
    const absl::Duration timeout =
        std::min(options_.query_timeout, absl::FromChrono(deadline - now));
    const std::vector<uint8_t> request =
        BuildNeighborSmpGet(attribute, static_cast<uint8_t>(p.port), tid);
    absl::StatusOr<std::vector<uint8_t>> reply =
        transport_->Query(p.device, p.port, request, timeout);
    if (!reply.ok() && IsSourceWide(reply.status())) *source_wide = true;
    return reply;
  }

  absl::StatusOr<Peer> Ask(const PortInfo& p, SteadyTime deadline, bool* source_wide) {
    if (p.port == 0 || p.port > 254) {
      return absl::InvalidArgumentError(absl::StrCat("port number ", p.port, " out of 1..254"));
    }
    const uint64_t info_tid = NextTid();
    absl::StatusOr<std::vector<uint8_t>> info_reply =
        Send(p, kSmpAttrNodeInfo, info_tid, deadline, source_wide);
    if (!info_reply.ok()) return info_reply.status();
    absl::StatusOr<IbNodeInfo> info = ParseNodeInfoResp(*info_reply, info_tid);
    if (!info.ok()) return info.status();

    Peer peer;
    peer.node_guid = info->node_guid;
    peer.node_type = info->node_type;
    peer.local_port_num = info->local_port_num;
    auto cached = descriptions_.find(info->node_guid);
    if (cached != descriptions_.end() &&
        calls_ - cached->second.fetched_call < options_.description_refresh_calls) {
      peer.description = cached->second.text;
      return peer;
    }
    const uint64_t desc_tid = NextTid();
    absl::StatusOr<std::vector<uint8_t>> desc_reply =
        Send(p, kSmpAttrNodeDescription, desc_tid, deadline, source_wide);
    absl::StatusOr<std::string> desc =
        desc_reply.ok() ? ParseNodeDescriptionResp(*desc_reply, desc_tid) : desc_reply.status();
    if (!desc.ok()) {
      if (*source_wide || cached == descriptions_.end()) return desc.status();
      // A stale description beats none; asked again next call.
      ReportPortError(desc.status(), absl::StrCat(p.device, "/", p.port));
      peer.description = cached->second.text;
      return peer;
    }
    peer.description = std::string(absl::StripAsciiWhitespace(*desc));
    descriptions_[info->node_guid] = Description{peer.description, calls_};
    return peer;
  }

  uint64_t NextTid() {
    ++next_tid_;
    if (static_cast<uint32_t>(next_tid_) == 0) ++next_tid_;
    return next_tid_ & 0xffffffffu;
  }

  const IbMadSourceOptions options_;
  const std::unique_ptr<SmpTransport> transport_;
  Clock* const clock_;
  int64_t calls_ = 0;
  absl::Status unavailable_;  // OK while the transport is usable
  int64_t unavailable_call_ = 0;
  uint64_t next_tid_ = 0;
  size_t next_first_ = 0;  // where the next call starts (after a spent budget)
  std::map<std::pair<std::string, uint32_t>, PortState> states_;
  std::map<uint64_t, Description> descriptions_;  // by NodeGUID
};

}  // namespace

std::unique_ptr<SmpTransport> MakeUmadSmpTransport() {
  return std::make_unique<UmadTransport>(kMgmtClassSubnDirectedRoute, kSmpClassVersion,
                                         /*lid_routed=*/false);
}

std::unique_ptr<SmpTransport> MakeUmadPmaTransport() {
  return std::make_unique<UmadTransport>(kMgmtClassPerfMgt, kPerfMgtClassVersion,
                                         /*lid_routed=*/true);
}

std::unique_ptr<LinkPartnerSource> MakeIbMadSource(IbMadSourceOptions options,
                                                   std::unique_ptr<SmpTransport> transport,
                                                   Clock* clock) {
  return std::make_unique<IbMadSource>(std::move(options), std::move(transport), clock);
}

std::unique_ptr<LinkPartnerSource> MakeIbMadSource(IbMadSourceOptions options) {
  return MakeIbMadSource(std::move(options), MakeUmadSmpTransport(), RealClock::Get());
}

}  // namespace fabricscope
