#include "collectors/rdma_netlink.h"

#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectors/netlink_transaction.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

constexpr int kMaxAttr = RDMA_NLDEV_ATTR_MAX - 1;
using AttrTable = nlattr* [RDMA_NLDEV_ATTR_MAX];

bool GetU32(const nlattr* a, uint32_t* out) {
  if (a == nullptr || nla_len(a) < static_cast<int>(sizeof(uint32_t))) return false;
  memcpy(out, nla_data(a), sizeof(uint32_t));
  return true;
}

bool GetU64(const nlattr* a, uint64_t* out) {
  if (a == nullptr || nla_len(a) < static_cast<int>(sizeof(uint64_t))) return false;
  memcpy(out, nla_data(a), sizeof(uint64_t));
  return true;
}

// A NUL-terminated (or not) string attribute, cut at kRdmaNlMaxName bytes.
bool GetName(const nlattr* a, std::string* out) {
  if (a == nullptr || nla_len(a) <= 0) return false;
  const char* p = static_cast<const char*>(nla_data(a));
  size_t n = strnlen(p, static_cast<size_t>(nla_len(a)));
  if (n == 0) return false;
  out->assign(p, std::min(n, kRdmaNlMaxName));
  return true;
}

absl::Status ParseNested(AttrTable tb, const nlattr* nest) {
  memset(tb, 0, sizeof(AttrTable));
  if (nla_parse_nested(tb, kMaxAttr, const_cast<nlattr*>(nest), nullptr) < 0) {
    return UnparsableError("malformed rdma netlink nest");
  }
  return absl::OkStatus();
}

// Calls f(tb) with the top-level attributes of each message in `replies`.
template <typename F>
absl::Status ForEachMessage(const std::vector<uint8_t>& replies, F f) {
  int n = static_cast<int>(replies.size());
  auto* h = reinterpret_cast<nlmsghdr*>(const_cast<uint8_t*>(replies.data()));
  for (; nlmsg_ok(h, n); h = nlmsg_next(h, &n)) {
    AttrTable tb = {};
    if (nlmsg_parse(h, 0, tb, kMaxAttr, nullptr) < 0) {
      return UnparsableError("malformed rdma netlink message");
    }
    if (absl::Status s = f(tb); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// STAT_HWCOUNTERS { HWCOUNTER_ENTRY { ENTRY_NAME, ENTRY_VALUE } ... }.
absl::Status ParseHwCounters(const nlattr* nest, std::vector<RdmaNlCounter>* out) {
  if (nest == nullptr) return absl::OkStatus();
  const nlattr* pos;
  int rem;
  nla_for_each_nested(pos, nest, rem) {
    if (nla_type(pos) != RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY) continue;
    if (out->size() >= kRdmaNlMaxCounters) {
      return UnparsableError(
          absl::StrCat("more than ", kRdmaNlMaxCounters, " hardware counters in one nest"));
    }
    AttrTable etb;
    if (absl::Status s = ParseNested(etb, pos); !s.ok()) return s;
    RdmaNlCounter c;
    if (!GetName(etb[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME], &c.name) ||
        !GetU64(etb[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE], &c.value)) {
      return UnparsableError("hardware counter entry without a name or a 64-bit value");
    }
    out->push_back(std::move(c));
  }
  return absl::OkStatus();
}

nl_msg* NewRequest(int cmd, int flags) {
  return nlmsg_alloc_simple(static_cast<int>(RdmaNlType(cmd)), NLM_F_REQUEST | flags);
}

nl_msg* Finish(nl_msg* msg, bool ok) {
  if (ok) return msg;
  nlmsg_free(msg);
  return nullptr;
}

nl_msg* PortRequest(int cmd, uint32_t device_index, uint32_t port) {
  nl_msg* msg = NewRequest(cmd, 0);
  if (msg == nullptr) return nullptr;
  return Finish(msg, nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, device_index) == 0 &&
                         nla_put_u32(msg, RDMA_NLDEV_ATTR_PORT_INDEX, port) == 0);
}

class KernelRdmaNetlinkTransport final : public RdmaNetlinkTransport {
 public:
  explicit KernelRdmaNetlinkTransport(nl_sock* sock) : sock_(sock) {}
  ~KernelRdmaNetlinkTransport() override { nl_socket_free(sock_); }

  absl::Status Exchange(nl_msg* request, std::vector<uint8_t>* replies) override {
    return NetlinkTransact(sock_, request, nlmsg_hdr(request)->nlmsg_type, "rdma netlink", replies);
  }

 private:
  nl_sock* const sock_;
};

}  // namespace

int RdmaNlType(int cmd) { return RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd); }

nl_msg* BuildRdmaDeviceDump() { return NewRequest(RDMA_NLDEV_CMD_GET, NLM_F_DUMP); }

nl_msg* BuildRdmaStatGet(uint32_t device_index, uint32_t port) {
  return PortRequest(RDMA_NLDEV_CMD_STAT_GET, device_index, port);
}

nl_msg* BuildRdmaStatGetStatus(uint32_t device_index, uint32_t port) {
  return PortRequest(RDMA_NLDEV_CMD_STAT_GET_STATUS, device_index, port);
}

nl_msg* BuildRdmaQpCounterDump(uint32_t device_index) {
  nl_msg* msg = NewRequest(RDMA_NLDEV_CMD_STAT_GET, NLM_F_DUMP);
  if (msg == nullptr) return nullptr;
  return Finish(msg, nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, device_index) == 0 &&
                         nla_put_u32(msg, RDMA_NLDEV_ATTR_STAT_RES, RDMA_NLDEV_ATTR_RES_QP) == 0);
}

nl_msg* BuildRdmaSetOptionalCounters(uint32_t device_index, uint32_t port,
                                     const std::vector<uint32_t>& indexes) {
  nl_msg* msg = PortRequest(RDMA_NLDEV_CMD_STAT_SET, device_index, port);
  if (msg == nullptr) return nullptr;
  nlattr* nest = nla_nest_start(msg, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
  bool ok = nest != nullptr;
  for (size_t i = 0; ok && i < indexes.size(); ++i) {
    ok = nla_put_u32(msg, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX, indexes[i]) == 0;
  }
  return Finish(msg, ok && nla_nest_end(msg, nest) == 0);
}

nl_msg* BuildRdmaSetAutoPid(uint32_t device_index, uint32_t port) {
  nl_msg* msg = PortRequest(RDMA_NLDEV_CMD_STAT_SET, device_index, port);
  if (msg == nullptr) return nullptr;
  return Finish(
      msg, nla_put_u32(msg, RDMA_NLDEV_ATTR_STAT_RES, RDMA_NLDEV_ATTR_RES_QP) == 0 &&
               nla_put_u32(msg, RDMA_NLDEV_ATTR_STAT_MODE, RDMA_COUNTER_MODE_AUTO) == 0 &&
               nla_put_u32(msg, RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK, RDMA_COUNTER_MASK_PID) == 0);
}

absl::StatusOr<std::vector<RdmaNlDevice>> ParseRdmaDeviceDump(const std::vector<uint8_t>& replies) {
  std::vector<RdmaNlDevice> out;
  absl::Status s = ForEachMessage(replies, [&](AttrTable tb) -> absl::Status {
    RdmaNlDevice d;
    if (!GetU32(tb[RDMA_NLDEV_ATTR_DEV_INDEX], &d.index) ||
        !GetName(tb[RDMA_NLDEV_ATTR_DEV_NAME], &d.name)) {
      return UnparsableError("rdma device message without an index or a name");
    }
    GetU32(tb[RDMA_NLDEV_ATTR_PORT_INDEX], &d.ports);
    if (out.size() >= kRdmaNlMaxObjects) return UnparsableError("too many rdma devices");
    out.push_back(std::move(d));
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<RdmaNlPortStats> ParseRdmaStatGet(const std::vector<uint8_t>& replies) {
  RdmaNlPortStats out;
  bool seen = false;
  absl::Status s = ForEachMessage(replies, [&](AttrTable tb) -> absl::Status {
    if (seen) return absl::OkStatus();  // a doit answers with one message
    seen = true;
    GetU32(tb[RDMA_NLDEV_ATTR_DEV_INDEX], &out.device_index);
    GetU32(tb[RDMA_NLDEV_ATTR_PORT_INDEX], &out.port);
    if (tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS] == nullptr) {
      return absl::UnimplementedError("the port reports no hardware counters over netlink");
    }
    return ParseHwCounters(tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS], &out.counters);
  });
  if (!s.ok()) return s;
  if (!seen) return UnparsableError("empty rdma netlink statistics reply");
  return out;
}

absl::StatusOr<std::vector<RdmaNlCounterStatus>> ParseRdmaStatStatus(
    const std::vector<uint8_t>& replies) {
  std::vector<RdmaNlCounterStatus> out;
  bool seen = false;
  absl::Status s = ForEachMessage(replies, [&](AttrTable tb) -> absl::Status {
    if (seen) return absl::OkStatus();
    seen = true;
    const nlattr* nest = tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS];
    if (nest == nullptr) return absl::OkStatus();
    const nlattr* pos;
    int rem;
    nla_for_each_nested(pos, nest, rem) {
      if (nla_type(pos) != RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY) continue;
      if (out.size() >= kRdmaNlMaxCounters) {
        return UnparsableError("too many counters in a statistics status reply");
      }
      AttrTable etb;
      if (absl::Status ps = ParseNested(etb, pos); !ps.ok()) return ps;
      RdmaNlCounterStatus c;
      if (!GetName(etb[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME], &c.name) ||
          !GetU32(etb[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX], &c.index)) {
        return UnparsableError("counter status entry without a name or an index");
      }
      const nlattr* dyn = etb[RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC];
      c.optional = dyn != nullptr;
      c.enabled = !c.optional || (nla_len(dyn) >= 1 && nla_get_u8(const_cast<nlattr*>(dyn)) != 0);
      out.push_back(std::move(c));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (!seen) return UnparsableError("empty rdma netlink statistics status reply");
  return out;
}

absl::StatusOr<std::vector<RdmaNlQpCounter>> ParseRdmaQpCounterDump(
    const std::vector<uint8_t>& replies) {
  std::vector<RdmaNlQpCounter> out;
  absl::Status s = ForEachMessage(replies, [&](AttrTable tb) -> absl::Status {
    const nlattr* table = tb[RDMA_NLDEV_ATTR_STAT_COUNTER];
    if (table == nullptr) return absl::OkStatus();
    const nlattr* pos;
    int rem;
    nla_for_each_nested(pos, table, rem) {
      if (nla_type(pos) != RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY) continue;
      if (out.size() >= kRdmaNlMaxObjects) return UnparsableError("too many counter objects");
      AttrTable etb;
      if (absl::Status ps = ParseNested(etb, pos); !ps.ok()) return ps;
      RdmaNlQpCounter c;
      if (!GetU32(etb[RDMA_NLDEV_ATTR_PORT_INDEX], &c.port) ||
          !GetU32(etb[RDMA_NLDEV_ATTR_STAT_COUNTER_ID], &c.id)) {
        return UnparsableError("counter object without a port or an id");
      }
      GetU32(etb[RDMA_NLDEV_ATTR_RES_PID], &c.pid);
      GetName(etb[RDMA_NLDEV_ATTR_RES_KERN_NAME], &c.kern_name);
      if (const nlattr* qps = etb[RDMA_NLDEV_ATTR_RES_QP]; qps != nullptr) {
        const nlattr* q;
        int qrem;
        nla_for_each_nested(q, qps, qrem) {
          if (nla_type(q) == RDMA_NLDEV_ATTR_RES_QP_ENTRY) ++c.qps;
        }
      }
      if (absl::Status hs = ParseHwCounters(etb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS], &c.counters);
          !hs.ok()) {
        return hs;
      }
      out.push_back(std::move(c));
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::unique_ptr<RdmaNetlinkTransport>> MakeKernelRdmaNetlinkTransport() {
  nl_sock* sock = nl_socket_alloc();
  if (sock == nullptr) return absl::UnimplementedError("rdma netlink: cannot allocate a socket");
  int err = nl_connect(sock, NETLINK_RDMA);
  if (err < 0) {
    nl_socket_free(sock);
    return absl::UnimplementedError(
        absl::StrCat("rdma netlink (NETLINK_RDMA) not available: ", nl_geterror(err)));
  }
  // Answers are synchronous, but a lost one must not block a tier thread.
  timeval tv{.tv_sec = 1, .tv_usec = 0};
  setsockopt(nl_socket_get_fd(sock), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  nl_socket_disable_auto_ack(sock);  // no ACK left queued after a reply
  nl_socket_enable_msg_peek(sock);   // a dump message larger than a page is read whole
  return std::unique_ptr<RdmaNetlinkTransport>(new KernelRdmaNetlinkTransport(sock));
}

}  // namespace fabricscope
