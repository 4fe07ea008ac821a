#include "tests/support/rdma_netlink_fake.h"

#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <rdma/rdma_netlink.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectors/netlink_transaction.h"

namespace fabricscope {
namespace {

constexpr size_t kMsgSize = 1 << 16;

// The messages of one answer, rendered back to back as the kernel sends them.
class Answer {
 public:
  Answer(uint32_t seq, int type) : seq_(seq), type_(type) {}

  nl_msg* New(int flags) {
    nl_msg* m = nlmsg_alloc_size(kMsgSize);
    if (m != nullptr) nlmsg_put(m, 0, seq_, type_, 0, flags);
    return m;
  }
  void Add(nl_msg* m) {
    const nlmsghdr* h = nlmsg_hdr(m);
    const auto* p = reinterpret_cast<const uint8_t*>(h);
    bytes_.insert(bytes_.end(), p, p + h->nlmsg_len);
    bytes_.resize(NLMSG_ALIGN(bytes_.size()), 0);
    nlmsg_free(m);
  }
  void Done() {
    nl_msg* m = nlmsg_alloc_size(64);
    nlmsghdr* h = nlmsg_put(m, 0, seq_, NLMSG_DONE, sizeof(int), NLM_F_MULTI);
    memset(nlmsg_data(h), 0, sizeof(int));
    Add(m);
  }
  void Error(int err) {
    bytes_.clear();
    nl_msg* m = nlmsg_alloc_size(256);
    nlmsghdr* h = nlmsg_put(m, 0, seq_, NLMSG_ERROR, sizeof(nlmsgerr), 0);
    auto* e = static_cast<nlmsgerr*>(nlmsg_data(h));
    memset(e, 0, sizeof(*e));
    e->error = -err;
    Add(m);
  }
  // Walks the answer as the kernel transport walks a receive buffer.
  absl::Status Scan(std::vector<uint8_t>* replies) {
    replies->clear();
    std::vector<uint64_t> buf((bytes_.size() + 7) / 8);
    if (!bytes_.empty()) memcpy(buf.data(), bytes_.data(), bytes_.size());
    NetlinkScan scan =
        ScanNetlinkReplies(reinterpret_cast<unsigned char*>(buf.data()),
                           static_cast<int>(bytes_.size()), seq_, type_, "rdma netlink", replies);
    if (scan.kind == NetlinkScan::kError) return scan.error;
    if (scan.kind == NetlinkScan::kMore) {
      return absl::InternalError("rdma netlink: no complete netlink answer");
    }
    return absl::OkStatus();
  }

 private:
  const uint32_t seq_;
  const int type_;
  std::vector<uint8_t> bytes_;
};

bool PutEntry(nl_msg* m, const std::string& name, uint64_t value) {
  nlattr* e = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
  return e != nullptr &&
         nla_put_string(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, name.c_str()) == 0 &&
         nla_put_u64(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_VALUE, value) == 0 &&
         nla_nest_end(m, e) == 0;
}

class FakeTransport final : public RdmaNetlinkTransport {
 public:
  explicit FakeTransport(FakeRdmaNetlinkKernel* kernel) : kernel_(kernel) {}
  absl::Status Exchange(nl_msg* request, std::vector<uint8_t>* replies) override {
    return kernel_->Serve(request, replies);
  }

 private:
  FakeRdmaNetlinkKernel* const kernel_;
};

}  // namespace

void FakeRdmaNetlinkKernel::AddDevice(FakeRdmaDevice device) {
  std::lock_guard lock(mu_);
  devices_.push_back(std::move(device));
  queries_.emplace_back();
}

FakeRdmaPort* FakeRdmaNetlinkKernel::FindPort(uint32_t device_index, uint32_t port) {
  for (FakeRdmaDevice& d : devices_) {
    if (d.index != device_index) continue;
    for (FakeRdmaPort& p : d.ports) {
      if (p.port == port) return &p;
    }
  }
  return nullptr;
}

FakeRdmaPort* FakeRdmaNetlinkKernel::FindPort(const std::string& device, uint32_t port) {
  for (FakeRdmaDevice& d : devices_) {
    if (d.name == device) return FindPort(d.index, port);
  }
  return nullptr;
}

void FakeRdmaNetlinkKernel::SetCounter(const std::string& device, uint32_t port,
                                       const std::string& name, uint64_t value) {
  std::lock_guard lock(mu_);
  FakeRdmaPort* p = FindPort(device, port);
  if (p == nullptr) return;
  for (FakeRdmaCounter& c : p->counters) {
    if (c.name == name) {
      c.value = value;
      return;
    }
  }
  for (FakeRdmaOptionalCounter& c : p->optional) {
    if (c.name == name) {
      c.value = value;
      return;
    }
  }
  p->counters.push_back({name, value});
}

void FakeRdmaNetlinkKernel::SetStatGetErrno(const std::string& device, uint32_t port, int err) {
  std::lock_guard lock(mu_);
  if (FakeRdmaPort* p = FindPort(device, port); p != nullptr) p->stat_get_errno = err;
}

void FakeRdmaNetlinkKernel::SetQpCounters(const std::string& device, uint32_t port,
                                          std::vector<FakeRdmaQpCounter> counters) {
  std::lock_guard lock(mu_);
  if (FakeRdmaPort* p = FindPort(device, port); p != nullptr) p->qp_counters = std::move(counters);
}

void FakeRdmaNetlinkKernel::SetPrivileged(bool privileged) {
  std::lock_guard lock(mu_);
  privileged_ = privileged;
}

void FakeRdmaNetlinkKernel::SetNoStatus(bool no_status) {
  std::lock_guard lock(mu_);
  no_status_ = no_status;
}

void FakeRdmaNetlinkKernel::SetUnsupported(bool unsupported) {
  std::lock_guard lock(mu_);
  unsupported_ = unsupported;
}

FakeRdmaPort FakeRdmaNetlinkKernel::Port(const std::string& device, uint32_t port) const {
  std::lock_guard lock(mu_);
  FakeRdmaPort* p = const_cast<FakeRdmaNetlinkKernel*>(this)->FindPort(device, port);
  return p == nullptr ? FakeRdmaPort{} : *p;
}

uint64_t FakeRdmaNetlinkKernel::Requests(int cmd) const {
  std::lock_guard lock(mu_);
  return cmd >= 0 && static_cast<size_t>(cmd) < requests_.size() ? requests_[cmd] : 0;
}

FakeDeviceQueries FakeRdmaNetlinkKernel::DeviceQueries(const std::string& device) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].name == device) return queries_[i];
  }
  return {};
}

FakeDeviceQueries FakeRdmaNetlinkKernel::DeviceQueries() const {
  std::lock_guard lock(mu_);
  FakeDeviceQueries sum;
  for (const FakeDeviceQueries& q : queries_) {
    sum.get_hw_stats += q.get_hw_stats;
    sum.hw_stats_commands += q.hw_stats_commands;
    sum.counter_object += q.counter_object;
    sum.config += q.config;
  }
  return sum;
}

std::unique_ptr<RdmaNetlinkTransport> FakeRdmaNetlinkKernel::NewTransport() {
  return std::make_unique<FakeTransport>(this);
}

RdmaNetlinkTransportFactory FakeRdmaNetlinkKernel::Factory() {
  return
      [this]() -> absl::StatusOr<std::unique_ptr<RdmaNetlinkTransport>> { return NewTransport(); };
}

absl::Status FakeRdmaNetlinkKernel::Serve(nl_msg* request, std::vector<uint8_t>* replies) {
  std::lock_guard lock(mu_);
  nlmsghdr* rh = nlmsg_hdr(request);
  rh->nlmsg_seq = ++seq_;  // as nl_send_auto completes it
  const int type = rh->nlmsg_type;
  const int cmd = type & ((1 << 10) - 1);
  Answer answer(rh->nlmsg_seq, type);
  if (static_cast<size_t>(cmd) < requests_.size()) ++requests_[cmd];

  nlattr* tb[RDMA_NLDEV_ATTR_MAX] = {};
  if ((type >> 10) != RDMA_NL_NLDEV ||
      nlmsg_parse(rh, 0, tb, RDMA_NLDEV_ATTR_MAX - 1, nullptr) < 0) {
    answer.Error(EINVAL);
    return answer.Scan(replies);
  }
  if (unsupported_) {
    answer.Error(EOPNOTSUPP);
    return answer.Scan(replies);
  }
  const bool dump = (rh->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
  const uint32_t dev_index =
      tb[RDMA_NLDEV_ATTR_DEV_INDEX] ? nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]) : UINT32_MAX;
  const uint32_t port_index =
      tb[RDMA_NLDEV_ATTR_PORT_INDEX] ? nla_get_u32(tb[RDMA_NLDEV_ATTR_PORT_INDEX]) : 0;
  const FakeRdmaDevice* device = nullptr;
  FakeDeviceQueries* cost = nullptr;
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].index == dev_index) {
      device = &devices_[i];
      cost = &queries_[i];
    }
  }
  auto put_handle = [&](nl_msg* m) {
    return nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, device->index) == 0 &&
           nla_put_string(m, RDMA_NLDEV_ATTR_DEV_NAME, device->name.c_str()) == 0;
  };

  if (cmd == RDMA_NLDEV_CMD_GET && dump) {
    for (const FakeRdmaDevice& d : devices_) {
      nl_msg* m = answer.New(NLM_F_MULTI);
      nla_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, d.index);
      nla_put_string(m, RDMA_NLDEV_ATTR_DEV_NAME, d.name.c_str());
      nla_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, static_cast<uint32_t>(d.ports.size()));
      answer.Add(m);
    }
    answer.Done();
    return answer.Scan(replies);
  }
  if (device == nullptr) {  // the kernel: ib_device_get_by_index failed
    answer.Error(EINVAL);
    return answer.Scan(replies);
  }

  if (cmd == RDMA_NLDEV_CMD_STAT_GET && dump) {
    if (tb[RDMA_NLDEV_ATTR_STAT_RES] == nullptr ||
        nla_get_u32(tb[RDMA_NLDEV_ATTR_STAT_RES]) != RDMA_NLDEV_ATTR_RES_QP) {
      answer.Error(EINVAL);
      return answer.Scan(replies);
    }
    nl_msg* m = answer.New(NLM_F_MULTI);
    bool ok = put_handle(m);
    nlattr* table = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_COUNTER);
    for (const FakeRdmaPort& p : device->ports) {
      // fill_res_counter_entry: rdma_counter_query_stats per object.
      cost->counter_object += p.qp_counters.size();
      for (const FakeRdmaQpCounter& c : p.qp_counters) {
        nlattr* e = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY);
        ok = ok && e != nullptr && nla_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, p.port) == 0 &&
             nla_put_u32(m, RDMA_NLDEV_ATTR_STAT_COUNTER_ID, c.id) == 0 &&
             nla_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, c.pid) == 0 &&
             nla_put_u32(m, RDMA_NLDEV_ATTR_STAT_MODE, RDMA_COUNTER_MODE_AUTO) == 0 &&
             nla_put_u32(m, RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK, RDMA_COUNTER_MASK_PID) == 0;
        nlattr* hw = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
        for (const FakeRdmaCounter& h : c.counters) ok = ok && PutEntry(m, h.name, h.value);
        ok = ok && nla_nest_end(m, hw) == 0;
        nlattr* qps = nla_nest_start(m, RDMA_NLDEV_ATTR_RES_QP);
        for (uint32_t q = 0; q < c.qps; ++q) {
          nlattr* qe = nla_nest_start(m, RDMA_NLDEV_ATTR_RES_QP_ENTRY);
          ok = ok && nla_put_u32(m, RDMA_NLDEV_ATTR_RES_LQPN, 0x100 + c.id * 16 + q) == 0 &&
               nla_nest_end(m, qe) == 0;
        }
        ok = ok && nla_nest_end(m, qps) == 0 && nla_nest_end(m, e) == 0;
      }
    }
    ok = ok && nla_nest_end(m, table) == 0;
    if (!ok) {
      nlmsg_free(m);
      answer.Error(EMSGSIZE);
      return answer.Scan(replies);
    }
    answer.Add(m);
    answer.Done();
    return answer.Scan(replies);
  }

  FakeRdmaPort* port = FindPort(dev_index, port_index);
  if (port == nullptr) {
    answer.Error(EINVAL);
    return answer.Scan(replies);
  }
  switch (cmd) {
    case RDMA_NLDEV_CMD_STAT_GET: {
      if (port->stat_get_errno != 0) {
        answer.Error(port->stat_get_errno);
        break;
      }
      // stat_get_doit_default_counter: get_hw_stats, then per served counter
      // rdma_counter_get_hwstat_value over the port's bound objects.
      ++cost->get_hw_stats;
      cost->hw_stats_commands += device->get_hw_stats_commands;
      nl_msg* m = answer.New(0);
      bool ok = put_handle(m) && nla_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, port->port) == 0;
      nlattr* hw = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
      uint64_t served = 0;
      for (const FakeRdmaCounter& c : port->counters) {
        ok = ok && PutEntry(m, c.name, c.value);
        ++served;
      }
      for (const FakeRdmaOptionalCounter& c : port->optional) {
        if (!c.enabled) continue;
        ok = ok && PutEntry(m, c.name, c.value);
        ++served;
      }
      cost->counter_object += served * port->qp_counters.size();
      ok = ok && nla_nest_end(m, hw) == 0;
      if (!ok) {
        nlmsg_free(m);
        answer.Error(EMSGSIZE);
        break;
      }
      answer.Add(m);
      break;
    }
    case RDMA_NLDEV_CMD_STAT_GET_STATUS: {
      if (no_status_) {
        answer.Error(EOPNOTSUPP);
        break;
      }
      nl_msg* m = answer.New(0);
      bool ok = put_handle(m) && nla_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, port->port) == 0;
      nlattr* hw = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTERS);
      uint32_t index = 0;
      for (const FakeRdmaCounter& c : port->counters) {
        nlattr* e = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
        ok = ok &&
             nla_put_string(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, c.name.c_str()) == 0 &&
             nla_put_u32(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX, index++) == 0 &&
             nla_nest_end(m, e) == 0;
      }
      for (const FakeRdmaOptionalCounter& c : port->optional) {
        nlattr* e = nla_nest_start(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY);
        ok = ok &&
             nla_put_string(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY_NAME, c.name.c_str()) == 0 &&
             nla_put_u32(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_INDEX, index++) == 0 &&
             nla_put_u8(m, RDMA_NLDEV_ATTR_STAT_HWCOUNTER_DYNAMIC, c.enabled ? 1 : 0) == 0 &&
             nla_nest_end(m, e) == 0;
      }
      ok = ok && nla_nest_end(m, hw) == 0;
      if (!ok) {
        nlmsg_free(m);
        answer.Error(EMSGSIZE);
        break;
      }
      answer.Add(m);
      break;
    }
    case RDMA_NLDEV_CMD_STAT_SET: {
      if (!privileged_) {
        answer.Error(EPERM);
        break;
      }
      if (tb[RDMA_NLDEV_ATTR_STAT_MODE] != nullptr) {
        if (tb[RDMA_NLDEV_ATTR_STAT_RES] == nullptr ||
            nla_get_u32(tb[RDMA_NLDEV_ATTR_STAT_RES]) != RDMA_NLDEV_ATTR_RES_QP) {
          answer.Error(EINVAL);
          break;
        }
        const uint32_t mode = nla_get_u32(tb[RDMA_NLDEV_ATTR_STAT_MODE]);
        const uint32_t mask = tb[RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK]
                                  ? nla_get_u32(tb[RDMA_NLDEV_ATTR_STAT_AUTO_MODE_MASK])
                                  : 0;
        port->auto_pid = mode == RDMA_COUNTER_MODE_AUTO && (mask & RDMA_COUNTER_MASK_PID) != 0;
      }
      if (tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS] != nullptr) {
        const size_t base = port->counters.size();
        std::vector<bool> enable(port->optional.size(), false);
        nlattr* pos;
        int rem;
        bool ok = true;
        nla_for_each_nested(pos, tb[RDMA_NLDEV_ATTR_STAT_HWCOUNTERS], rem) {
          if (nla_len(pos) < 4) {
            ok = false;
            break;
          }
          const uint32_t i = nla_get_u32(pos);
          if (i < base || i >= base + port->optional.size()) {
            ok = false;
            break;
          }
          enable[i - base] = true;
        }
        if (!ok) {
          answer.Error(EINVAL);
          break;
        }
        for (size_t i = 0; i < enable.size(); ++i) port->optional[i].enabled = enable[i];
        ++cost->config;
      }
      nl_msg* m = answer.New(0);
      put_handle(m);
      nla_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, port->port);
      answer.Add(m);
      break;
    }
    default:
      answer.Error(EOPNOTSUPP);
      break;
  }
  return answer.Scan(replies);
}

}  // namespace fabricscope
