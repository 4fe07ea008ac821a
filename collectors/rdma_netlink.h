// The RDMA netlink protocol (NETLINK_RDMA, client RDMA_NL_NLDEV; the UAPI in
// <rdma/rdma_netlink.h>), as far as the rdma_netlink collector speaks it: the
// requests it builds, the parsers of the kernel's replies, and the transport
// seam (STYLE.md "OS seams") that carries one request/response exchange.
//
// Requests (message type RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd); replies carry
// the same type):
//   RDMA_NLDEV_CMD_GET             dump: every device (DEV_INDEX, DEV_NAME,
//                                  PORT_INDEX = number of ports)
//   RDMA_NLDEV_CMD_STAT_GET        doit with DEV_INDEX + PORT_INDEX: every
//                                  hardware counter of the port, enabled
//                                  optional ones included, in one reply
//                                  (STAT_HWCOUNTERS { HWCOUNTER_ENTRY {
//                                  ENTRY_NAME, ENTRY_VALUE } ... })
//   RDMA_NLDEV_CMD_STAT_GET        dump with DEV_INDEX + STAT_RES = RES_QP:
//                                  the device's counter objects (STAT_COUNTER
//                                  { STAT_COUNTER_ENTRY { PORT_INDEX,
//                                  STAT_COUNTER_ID, RES_PID | RES_KERN_NAME,
//                                  STAT_HWCOUNTERS, RES_QP } ... })
//   RDMA_NLDEV_CMD_STAT_GET_STATUS doit with DEV_INDEX + PORT_INDEX (kernel
//                                  >= 6.0): every counter with its
//                                  HWCOUNTER_INDEX; optional ones carry
//                                  HWCOUNTER_DYNAMIC = 1 when enabled
//   RDMA_NLDEV_CMD_STAT_SET        with STAT_HWCOUNTERS { HWCOUNTER_INDEX ... }:
//                                  the optional counters to have enabled (the
//                                  others are disabled); with STAT_RES =
//                                  RES_QP, STAT_MODE = AUTO and
//                                  STAT_AUTO_MODE_MASK = RDMA_COUNTER_MASK_PID:
//                                  bind QPs to counters per process. Both need
//                                  CAP_NET_ADMIN (EPERM otherwise).
//
// Parsers take the reply buffer NetlinkTransact (collectors/
// netlink_transaction.h) fills: the answer's messages back to back. They are
// pure, bounded (kRdmaNlMaxCounters entries per nest, kRdmaNlMaxObjects
// devices or counter objects, names cut at kRdmaNlMaxName bytes) and return
// UnparsableError (DataLoss) for a message or nest that does not parse;
// fuzz/fuzz_netlink.cc feeds them raw bytes.
//
// Thread-safety: the parsers and builders are pure; a transport is used by
// one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct nl_msg;

namespace fabricscope {

inline constexpr size_t kRdmaNlMaxCounters = 1024;  // per STAT_HWCOUNTERS nest
inline constexpr size_t kRdmaNlMaxObjects = 4096;   // devices / counter objects per answer
inline constexpr size_t kRdmaNlMaxName = 64;        // counter, device, kernel names

// The nlmsg_type of a request (and its reply) for `cmd`.
int RdmaNlType(int cmd);

struct RdmaNlDevice {
  uint32_t index = 0;
  std::string name;
  uint32_t ports = 0;  // PORT_INDEX of a device message: the number of ports
};

struct RdmaNlCounter {
  std::string name;
  uint64_t value = 0;
};

// One port's counters: the reply to a STAT_GET doit.
struct RdmaNlPortStats {
  uint32_t device_index = 0;
  uint32_t port = 0;
  std::vector<RdmaNlCounter> counters;
};

// One counter entry of a STAT_GET_STATUS reply.
struct RdmaNlCounterStatus {
  std::string name;
  uint32_t index = 0;
  bool optional = false;  // HWCOUNTER_DYNAMIC present
  bool enabled = false;   // HWCOUNTER_DYNAMIC = 1 (always true for a mandatory counter)
};

// One counter object of a STAT_GET dump with STAT_RES = RES_QP: the QPs bound
// to it belong to `pid` (0 and `kern_name` set for a kernel consumer).
struct RdmaNlQpCounter {
  uint32_t port = 0;
  uint32_t id = 0;
  uint32_t pid = 0;
  std::string kern_name;
  uint32_t qps = 0;  // RES_QP_ENTRY count
  std::vector<RdmaNlCounter> counters;
};

// Request builders: a new message (owned by the caller, nlmsg_free) or null
// when it cannot be allocated. `dump` adds NLM_F_DUMP.
nl_msg* BuildRdmaDeviceDump();
nl_msg* BuildRdmaStatGet(uint32_t device_index, uint32_t port);
nl_msg* BuildRdmaQpCounterDump(uint32_t device_index);
nl_msg* BuildRdmaStatGetStatus(uint32_t device_index, uint32_t port);
nl_msg* BuildRdmaSetOptionalCounters(uint32_t device_index, uint32_t port,
                                     const std::vector<uint32_t>& indexes);
nl_msg* BuildRdmaSetAutoPid(uint32_t device_index, uint32_t port);

// Reply parsers (see the header comment).
absl::StatusOr<std::vector<RdmaNlDevice>> ParseRdmaDeviceDump(const std::vector<uint8_t>& replies);
absl::StatusOr<RdmaNlPortStats> ParseRdmaStatGet(const std::vector<uint8_t>& replies);
absl::StatusOr<std::vector<RdmaNlCounterStatus>> ParseRdmaStatStatus(
    const std::vector<uint8_t>& replies);
absl::StatusOr<std::vector<RdmaNlQpCounter>> ParseRdmaQpCounterDump(
    const std::vector<uint8_t>& replies);

// One request/response exchange on NETLINK_RDMA. The kernel transport is a
// libnl socket and NetlinkTransact (1 s receive timeout); the tests' serves
// requests from a fake device table and feeds its reply bytes through
// ScanNetlinkReplies, so the collector's whole path runs without a kernel
// RDMA stack.
class RdmaNetlinkTransport {
 public:
  virtual ~RdmaNetlinkTransport() = default;
  // Sends `request` (owned by the caller) and fills *replies with the answer
  // (NetlinkTransact's statuses: the kernel's errno through ErrnoToStatus).
  virtual absl::Status Exchange(nl_msg* request, std::vector<uint8_t>* replies) = 0;
};

// Creates one transport; the collector makes one per polled tier.
using RdmaNetlinkTransportFactory =
    std::function<absl::StatusOr<std::unique_ptr<RdmaNetlinkTransport>>()>;

// The kernel transport: a NETLINK_RDMA socket. UnimplementedError when the
// kernel has no RDMA netlink (ib_core not loaded: EPROTONOSUPPORT).
absl::StatusOr<std::unique_ptr<RdmaNetlinkTransport>> MakeKernelRdmaNetlinkTransport();

}  // namespace fabricscope
