#include "collectors/collector.h"

#include "core/metrics.h"

namespace fabricscope {
namespace {

const MetricSpec& kDeviceQueries = DefineMetric(
    {.name = "fabricscope_device_queries_total",
     .type = MetricType::kCounter,
     .help = "Device (firmware) queries and MADs the daemon's reads of an RDMA device cost, by "
             "kind: \"hw_stats\" = the driver's get_hw_stats, one per RDMA netlink STAT_GET "
             "of a port and, on the sysfs path, one per hw_counters read past the kernel's "
             "lifespan cache (estimated), counted as 3 firmware commands on mlx5 "
             "(QUERY_Q_COUNTER, QUERY_CONG_STATISTICS, PPCNT: the most it issues) and 1 on "
             "other drivers; \"counter_object\" = one query per counter object bound on the "
             "port for every counter a STAT_GET serves (N x K), and one per object in a dump "
             "of a device's counter objects; \"pma_mad\" = one PerfMgt MAD per IB PMA "
             "counters/ file read. See fabricscope_rdma_counter_objects for K and "
             "--device-query-budget.",
     .labels = {"device", "kind"},
     .component = "collectors"});

}  // namespace

const MetricSpec& DeviceQueriesMetric() { return kDeviceQueries; }

uint32_t GetHwStatsCommands(absl::string_view driver) { return driver == "mlx5" ? 3 : 1; }

absl::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kHot:
      return "hot";
    case Tier::kMedium:
      return "medium";
    case Tier::kSlow:
      return "slow";
    case Tier::kConfig:
      return "config";
  }
  return "unknown";
}

absl::string_view CollectorErrorCodeName(CollectorErrorCode code) {
  switch (code) {
    case CollectorErrorCode::kNotFound:
      return "not_found";
    case CollectorErrorCode::kPermissionDenied:
      return "permission_denied";
    case CollectorErrorCode::kParse:
      return "parse";
    case CollectorErrorCode::kIo:
      return "io";
    case CollectorErrorCode::kUnsupported:
      return "unsupported";
    case CollectorErrorCode::kPoll:
      return "poll";
  }
  return "unknown";
}

CollectorErrorCode CollectorErrorCodeOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return CollectorErrorCode::kNotFound;
    case absl::StatusCode::kPermissionDenied:
      return CollectorErrorCode::kPermissionDenied;
    case absl::StatusCode::kDataLoss:
      return CollectorErrorCode::kParse;
    case absl::StatusCode::kUnimplemented:
      return CollectorErrorCode::kUnsupported;
    default:
      return CollectorErrorCode::kIo;
  }
}

}  // namespace fabricscope
