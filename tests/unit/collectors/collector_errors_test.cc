// The one error mapping, end to end: errno -> absl::Status (core/errors.h,
// ErrnoToStatus) -> `code` label of fabricscope_collector_errors_total
// (CollectorErrorCodeOf, applied by PollContext::Error, counted by the
// scheduler), and "garbage" -> parse for every reader of outside input
// (sysfs counter file, sysfs attribute, `ethtool -S` text, netlink replies).
#include <linux/dcbnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collectors/collector.h"
#include "collectors/dcb_config_collector.h"
#include "collectors/ethtool_netlink.h"
#include "collectors/ethtool_stats_source.h"
#include "collectors/netlink_transaction.h"
#include "collectors/sysfs_reader.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/metrics.h"
#include "daemon/scheduler.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "tests/unit/collectors/ethtool_test_util.h"

namespace fabricscope {
namespace collector_errors_test {
namespace {

using ethtool_test::TempDir;
using ethtool_test::WriteFile;

// Reports every status it is given, once per poll, through PollContext::Error.
class ReportingCollector final : public Collector {
 public:
  explicit ReportingCollector(std::vector<absl::Status> statuses)
      : statuses_(std::move(statuses)) {}
  absl::string_view name() const override { return "reporting"; }
  std::vector<Tier> Tiers() const override { return {Tier::kHot}; }
  absl::Status Discover(PollContext&) override { return absl::OkStatus(); }
  absl::Status Poll(PollContext& ctx) override {
    for (const absl::Status& s : statuses_) ctx.Error(s, "key");
    return absl::OkStatus();
  }

 private:
  std::vector<absl::Status> statuses_;
};

// The `code` labels fabricscope_collector_errors_total counted when a
// collector reports `status` once, through the real scheduler.
std::map<std::string, double> LabelsCounted(const absl::Status& status) {
  FakeClock clock;
  Store store;
  MetricsRegistry metrics;
  ReportingCollector c({status});
  Scheduler s(
      &clock, &store, &metrics,
      {absl::Milliseconds(10), absl::Milliseconds(100), absl::Seconds(1), absl::Seconds(10)});
  s.Add(&c);
  s.PollOnce(Tier::kHot);
  std::map<std::string, double> out;
  for (const auto& f : metrics.registry()->Collect()) {
    if (f.name != "fabricscope_collector_errors_total") continue;
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name == "code" && m.counter.value != 0) out[l.value] += m.counter.value;
      }
    }
  }
  return out;
}

struct Row {
  int err;
  const char* name;
  absl::StatusCode status;
  const char* label;
};

// The table of core/errors.h, as seen on the metric.
constexpr Row kErrnoTable[] = {
    {ENOENT, "ENOENT", absl::StatusCode::kNotFound, "not_found"},
    {ENODEV, "ENODEV", absl::StatusCode::kNotFound, "not_found"},
    {ENXIO, "ENXIO", absl::StatusCode::kNotFound, "not_found"},
    {ENOTDIR, "ENOTDIR", absl::StatusCode::kNotFound, "not_found"},
    {EACCES, "EACCES", absl::StatusCode::kPermissionDenied, "permission_denied"},
    {EPERM, "EPERM", absl::StatusCode::kPermissionDenied, "permission_denied"},
    {EOPNOTSUPP, "EOPNOTSUPP", absl::StatusCode::kUnimplemented, "unsupported"},
    {ENOTSUP, "ENOTSUP", absl::StatusCode::kUnimplemented, "unsupported"},
    {EPROTONOSUPPORT, "EPROTONOSUPPORT", absl::StatusCode::kUnimplemented, "unsupported"},
    {EAFNOSUPPORT, "EAFNOSUPPORT", absl::StatusCode::kUnimplemented, "unsupported"},
    {ENOSYS, "ENOSYS", absl::StatusCode::kUnimplemented, "unsupported"},
    {ENOTTY, "ENOTTY", absl::StatusCode::kUnimplemented, "unsupported"},
    {EINVAL, "EINVAL", absl::StatusCode::kUnimplemented, "unsupported"},
    {EAGAIN, "EAGAIN", absl::StatusCode::kUnavailable, "io"},
    {EINTR, "EINTR", absl::StatusCode::kUnavailable, "io"},
    {EBUSY, "EBUSY", absl::StatusCode::kUnavailable, "io"},
    {ETIMEDOUT, "ETIMEDOUT", absl::StatusCode::kDeadlineExceeded, "io"},
    {ENOMEM, "ENOMEM", absl::StatusCode::kResourceExhausted, "io"},
    {ENOBUFS, "ENOBUFS", absl::StatusCode::kResourceExhausted, "io"},
    {EPROTO, "EPROTO", absl::StatusCode::kDataLoss, "parse"},
    {EBADMSG, "EBADMSG", absl::StatusCode::kDataLoss, "parse"},
    {EIO, "EIO", absl::StatusCode::kInternal, "io"},
    {ENOSPC, "ENOSPC", absl::StatusCode::kInternal, "io"},
    {EBADF, "EBADF", absl::StatusCode::kInternal, "io"},
};

TEST(CollectorErrorsTest, ErrnoToCodeLabel) {
  for (const Row& row : kErrnoTable) {
    const absl::Status s = ErrnoToStatus(row.err, "read /sys/x");
    EXPECT_EQ(s.code(), row.status) << row.name;
    EXPECT_NE(std::string(s.message()).find("read /sys/x: "), std::string::npos) << row.name;
    EXPECT_EQ(CollectorErrorCodeName(CollectorErrorCodeOf(s)), row.label) << row.name;
    const std::map<std::string, double> counted = LabelsCounted(s);
    EXPECT_EQ(counted, (std::map<std::string, double>{{row.label, 1}})) << row.name;
  }
}

TEST(CollectorErrorsTest, StatusToCodeLabel) {
  EXPECT_EQ(CollectorErrorCodeOf(absl::NotFoundError("")), CollectorErrorCode::kNotFound);
  EXPECT_EQ(CollectorErrorCodeOf(absl::PermissionDeniedError("")),
            CollectorErrorCode::kPermissionDenied);
  EXPECT_EQ(CollectorErrorCodeOf(UnparsableError("")), CollectorErrorCode::kParse);
  EXPECT_EQ(CollectorErrorCodeOf(absl::UnimplementedError("")), CollectorErrorCode::kUnsupported);
  // Bad arguments are not garbage input (core/errors.h): io, not parse.
  EXPECT_EQ(CollectorErrorCodeOf(absl::InvalidArgumentError("")), CollectorErrorCode::kIo);
  EXPECT_EQ(CollectorErrorCodeOf(absl::InternalError("")), CollectorErrorCode::kIo);
  EXPECT_EQ(CollectorErrorCodeOf(absl::UnavailableError("")), CollectorErrorCode::kIo);
  for (int c = 0; c <= 16; ++c) {
    EXPECT_NE(CollectorErrorCodeOf(absl::Status(static_cast<absl::StatusCode>(c), "x")),
              CollectorErrorCode::kPoll)
        << "kPoll is the scheduler's alone";
  }
}

// "Garbage in a counter file" is parse whoever reads it.
TEST(CollectorErrorsTest, GarbageIsParseForEveryReader) {
  TempDir dir;
  std::vector<std::pair<std::string, absl::Status>> got;

  // sysfs counter file (rdma_sysfs).
  WriteFile(dir.path() + "/counter", "12x4\n");
  absl::StatusOr<CounterFile> f = CounterFile::Open(dir.path() + "/counter");
  ASSERT_TRUE(f.ok()) << f.status();
  got.emplace_back("sysfs counter file", f->Read().status());
  // sysfs attribute (dcb_config: ECN enable, lifespan).
  WriteFile(dir.path() + "/lifespan", "ten\n");
  got.emplace_back("sysfs attribute", ReadUintAttribute(dir.path() + "/lifespan").status());

  // `ethtool -S` text (--ethtool-dir): garbage, and a file cut mid-write.
  WriteFile(dir.path() + "/eth0", "NIC statistics:\n     rx_packets: lots\n");
  WriteFile(dir.path() + "/eth1", "NIC statistics:\n     rx_packets: 12");
  std::unique_ptr<EthtoolStatsSource> source = MakeDirEthtoolSource(dir.path());
  bool changed = false;
  got.emplace_back("ethtool text", source->Open("eth0")->Read(&changed));
  got.emplace_back("ethtool text, truncated", source->Open("eth1")->Read(&changed));

  // Netlink replies: a dcbnl reply too short for its family header, one
  // whose IEEE_PFC attribute is short, a genl reply too short for its
  // header, and an NLMSG_ERROR whose error field is not a negated errno.
  {
    nlmsghdr bare{};
    bare.nlmsg_len = sizeof bare;
    bare.nlmsg_type = RTM_GETDCB;
    got.emplace_back("dcbnl reply, short", ParseDcbIeeeGetReply(&bare).status());

    nl_msg* msg = nlmsg_alloc_simple(RTM_GETDCB, 0);
    ASSERT_NE(msg, nullptr);
    dcbmsg d{};
    ASSERT_EQ(nlmsg_append(msg, &d, sizeof d, NLMSG_ALIGNTO), 0);
    nlattr* ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
    const uint8_t one = 1;
    ASSERT_EQ(nla_put(msg, DCB_ATTR_IEEE_PFC, 1, &one), 0);
    nla_nest_end(msg, ieee);
    got.emplace_back("dcbnl reply, short PFC", ParseDcbIeeeGetReply(nlmsg_hdr(msg)).status());
    nlmsg_free(msg);

    std::vector<uint8_t> reply(sizeof(nlmsghdr));
    nlmsghdr h{};
    h.nlmsg_len = sizeof h;
    memcpy(reply.data(), &h, sizeof h);
    got.emplace_back(
        "ethtool genl reply, short",
        EthtoolReplyStatsNest(&reply, ETHTOOL_A_PAUSE_MAX, ETHTOOL_A_PAUSE_STATS).status());

    struct {
      nlmsghdr hdr;
      nlmsgerr err;
    } e{};
    e.hdr.nlmsg_len = sizeof e;
    e.hdr.nlmsg_type = NLMSG_ERROR;
    e.hdr.nlmsg_seq = 5;
    e.err.error = INT_MIN;
    std::vector<uint8_t> replies;
    NetlinkScan scan = ScanNetlinkReplies(reinterpret_cast<unsigned char*>(&e), sizeof e, 5,
                                          RTM_GETDCB, "dcbnl", &replies);
    ASSERT_EQ(scan.kind, NetlinkScan::kError);
    got.emplace_back("netlink error field", scan.error);
  }

  for (const auto& [reader, status] : got) {
    EXPECT_TRUE(IsUnparsable(status)) << reader << ": " << status;
    EXPECT_EQ(LabelsCounted(status), (std::map<std::string, double>{{"parse", 1}})) << reader;
  }
}

}  // namespace
}  // namespace collector_errors_test
}  // namespace fabricscope
