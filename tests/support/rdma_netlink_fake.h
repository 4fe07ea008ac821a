// A fake kernel RDMA netlink stack for tests and benchmarks: serves the
// requests of collectors/rdma_netlink.h from a device table, with replies laid
// out as the UAPI (<rdma/rdma_netlink.h>) and the kernel's nldev code lay them
// out (nested STAT_HWCOUNTERS / HWCOUNTER_ENTRY, STAT_COUNTER /
// STAT_COUNTER_ENTRY objects with RES_PID, STAT_GET_STATUS entries with
// HWCOUNTER_INDEX and HWCOUNTER_DYNAMIC), dumps as NLM_F_MULTI messages ended
// by NLMSG_DONE, errors as NLMSG_ERROR with -errno. Each reply is rendered
// into a receive buffer and walked by ScanNetlinkReplies, the receive side of
// the kernel transport, so the collector's whole path except the socket runs.
//
// Counter indexes as the kernel numbers them: a port's mandatory counters
// first, then its optional ones. STAT_SET of optional counters needs
// `privileged` (else EPERM, as without CAP_NET_ADMIN) and replaces the
// enabled set; an index that is not an optional counter is EINVAL.
//
// Device queries are accounted as the kernel issues them (the rules, with the
// kernel functions they come from, are in ARCHITECTURE.md, "What a read costs
// the device"): a STAT_GET of a port calls the driver's get_hw_stats once
// (`get_hw_stats_commands` firmware commands: 1-3 on mlx5) and, for each of
// the N counters it serves, rdma_counter_get_hwstat_value queries every
// counter object bound on that port (K): N x K; a dump of the QP counter
// objects queries each object of the device once. STAT_GET_STATUS and the
// device dump query nothing; a STAT_SET that changes the optional counters
// is one command per port (the driver's modify_hw_stat).
//
// Thread-safety: all methods are thread-safe (one mutex); transports made by
// NewTransport may be used from different threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "collectors/rdma_netlink.h"

namespace fabricscope {

struct FakeRdmaCounter {
  std::string name;
  uint64_t value = 0;
};

struct FakeRdmaOptionalCounter {
  std::string name;
  uint64_t value = 0;
  bool enabled = false;
};

// A counter object bound to a process's QPs (auto mode by PID).
struct FakeRdmaQpCounter {
  uint32_t id = 0;
  uint32_t pid = 0;
  uint32_t qps = 1;
  std::vector<FakeRdmaCounter> counters = {};
};

struct FakeRdmaPort {
  uint32_t port = 1;
  std::vector<FakeRdmaCounter> counters = {};
  std::vector<FakeRdmaOptionalCounter> optional = {};
  std::vector<FakeRdmaQpCounter> qp_counters = {};
  bool auto_pid = false;  // set by a STAT_SET of auto mode with the PID mask
  // A non-zero errno answers every STAT_GET of the port with it.
  int stat_get_errno = 0;
};

struct FakeRdmaDevice {
  uint32_t index = 0;
  std::string name;
  std::vector<FakeRdmaPort> ports = {};
  // Firmware commands per get_hw_stats call (mlx5: QUERY_Q_COUNTER, plus
  // QUERY_CONG_STATISTICS and PPCNT where the device supports them).
  uint32_t get_hw_stats_commands = 1;
};

// What the device was asked for, by kind (see the class comment).
struct FakeDeviceQueries {
  uint64_t get_hw_stats = 0;       // driver calls
  uint64_t hw_stats_commands = 0;  // their firmware commands
  uint64_t counter_object = 0;     // counter-object queries (QUERY_Q_COUNTER each)
  uint64_t config = 0;             // STAT_SET of optional counters
  uint64_t Total() const { return hw_stats_commands + counter_object + config; }
};

class FakeRdmaNetlinkKernel {
 public:
  FakeRdmaNetlinkKernel() = default;

  void AddDevice(FakeRdmaDevice device);
  // Sets a mandatory or optional counter's value (adds a mandatory one).
  void SetCounter(const std::string& device, uint32_t port, const std::string& name,
                  uint64_t value);
  void SetStatGetErrno(const std::string& device, uint32_t port, int err);
  void SetQpCounters(const std::string& device, uint32_t port,
                     std::vector<FakeRdmaQpCounter> counters);
  // Whether STAT_SET is allowed (CAP_NET_ADMIN); default false.
  void SetPrivileged(bool privileged);
  // A kernel without STAT_GET_STATUS (< 6.0): EOPNOTSUPP.
  void SetNoStatus(bool no_status);
  // Every request answers EOPNOTSUPP (an RDMA netlink without nldev stats).
  void SetUnsupported(bool unsupported);

  FakeRdmaPort Port(const std::string& device, uint32_t port) const;
  // Requests served per RDMA_NLDEV_CMD_* (index: the command).
  uint64_t Requests(int cmd) const;
  // Device queries the requests cost a device, and the total of all devices.
  FakeDeviceQueries DeviceQueries(const std::string& device) const;
  FakeDeviceQueries DeviceQueries() const;

  // Serves one request (the transport's Exchange).
  absl::Status Serve(nl_msg* request, std::vector<uint8_t>* replies);

  // A transport serving this kernel (it must outlive the transport).
  std::unique_ptr<RdmaNetlinkTransport> NewTransport();
  RdmaNetlinkTransportFactory Factory();

 private:
  FakeRdmaPort* FindPort(uint32_t device_index, uint32_t port) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  FakeRdmaPort* FindPort(const std::string& device, uint32_t port)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable std::mutex mu_;
  std::vector<FakeRdmaDevice> devices_ ABSL_GUARDED_BY(mu_);
  bool privileged_ ABSL_GUARDED_BY(mu_) = false;
  bool no_status_ ABSL_GUARDED_BY(mu_) = false;
  bool unsupported_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> requests_ ABSL_GUARDED_BY(mu_) = std::vector<uint64_t>(64, 0);
  std::vector<FakeDeviceQueries> queries_ ABSL_GUARDED_BY(mu_);  // parallel to devices_
};

}  // namespace fabricscope
