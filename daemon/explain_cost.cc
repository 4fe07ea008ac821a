#include "daemon/explain_cost.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectors/collector.h"
#include "collectors/registry.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

// Discovery only: samples go to the scratch store, errors are counted and the
// first few kept for the report.
class DiscoveryContext final : public PollContext {
 public:
  DiscoveryContext(Store* store, int64_t ts) : store_(store), ts_(ts) {}
  Tier tier() const override { return Tier::kConfig; }
  int64_t ts_ns() const override { return ts_; }
  void Append(SeriesId id, uint64_t raw) override { store_->Append(id, ts_, raw); }
  void RecordError(CollectorErrorCode code, absl::string_view key,
                   absl::string_view detail) override {
    if (errors.size() < 5) {
      errors.push_back(absl::StrCat(CollectorErrorCodeName(code), " ", key, ": ", detail));
    }
    ++error_count;
  }
  std::vector<std::string> errors;
  size_t error_count = 0;

 private:
  Store* store_;
  int64_t ts_;
};

std::string Number(double v) {
  if (v == 0) return "0";
  if (v < 10) return absl::StrFormat("%.2f", v);
  return absl::StrFormat("%.0f", v);
}

}  // namespace

absl::StatusOr<std::string> ExplainCost(const Config& config) {
  CollectorRegistry registry;
  if (auto s = RegisterAllCollectors(registry); !s.ok()) return s;
  absl::StatusOr<CollectorOptions> options = CollectorOptionsFromConfig(config);
  if (!options.ok()) return options.status();
  Store store;
  PortInventory ports;
  MetricsRegistry metrics;
  CollectorContext ctx{&*options, &store, &ports, RealClock::Get(), &metrics};
  auto collectors = registry.Create(config.collectors, ctx);
  if (!collectors.ok()) return collectors.status();
  DiscoveryContext discovery(&store, RealClock::Get()->RealtimeNs());
  std::vector<ReadPlanRow> rows;
  for (auto& c : *collectors) (void)c->Discover(discovery);
  for (auto& c : *collectors) {
    std::vector<ReadPlanRow> r = c->ReadPlan();
    rows.insert(rows.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
  }

  std::string out = absl::StrCat(
      "Read plan of the RDMA counters on this host (sysfs root ", options->sysfs_root,
      "): what each read costs the device, by the kernel's rules (ARCHITECTURE.md, \"What a "
      "read costs the device\").\nIntervals: hot ",
      absl::FormatDuration(config.hot_interval), ", medium ",
      absl::FormatDuration(config.medium_interval), ", slow ",
      absl::FormatDuration(config.slow_interval), ", config ",
      absl::FormatDuration(config.config_interval), ".\n\n");
  if (rows.empty()) {
    absl::StrAppend(&out,
                    "No RDMA device is read (none found, or the RDMA collectors are not enabled): "
                    "the daemon costs no device queries.\n");
  } else {
    const std::vector<std::string> header = {"DEVICE/PORT", "COLLECTOR", "READ",
                                             "TIER",        "VALUES",    "READS/S",
                                             "SYSCALLS/S",  "QUERIES/S", "NOTE"};
    std::vector<std::vector<std::string>> table = {header};
    struct Total {
      double queries = 0, syscalls = 0;
    };
    std::map<std::string, Total> per_device;
    Total all;
    for (const ReadPlanRow& r : rows) {
      table.push_back({r.port > 0 ? absl::StrCat(r.device, "/", r.port) : r.device, r.collector,
                       r.read, r.tier, absl::StrCat(r.values), Number(r.reads_per_second),
                       Number(r.syscalls_per_second), Number(r.queries_per_second), r.note});
      per_device[r.device].queries += r.queries_per_second;
      per_device[r.device].syscalls += r.syscalls_per_second;
      all.queries += r.queries_per_second;
      all.syscalls += r.syscalls_per_second;
    }
    std::vector<size_t> width(header.size(), 0);
    for (const auto& line : table) {
      for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
    }
    for (const auto& line : table) {
      std::string text;
      for (size_t i = 0; i < line.size(); ++i) {
        absl::StrAppend(&text, line[i]);
        if (i + 1 < line.size()) text.append(width[i] - line[i].size() + 2, ' ');
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      absl::StrAppend(&out, text, "\n");
    }
    std::string budget = "2000";
    if (const CollectorRegistry::Entry* e = registry.Find("rdma_netlink"); e != nullptr) {
      for (const OptionSpec& spec : e->options) {
        if (spec.name == "device-query-budget") budget = options->values.Render(spec);
      }
    }
    absl::StrAppend(&out,
                    "\nPer device (the rdma_netlink reads are kept within "
                    "--device-query-budget=",
                    budget, " queries/s per device, 0: none):\n");
    for (const auto& [device, t] : per_device) {
      absl::StrAppend(&out, "  ", device, ": ", Number(t.queries), " queries/s, ",
                      Number(t.syscalls), " syscalls/s\n");
    }
    absl::StrAppend(&out, "All devices: ", Number(all.queries), " queries/s, ",
                    Number(all.syscalls), " syscalls/s.\n");
  }
  if (discovery.error_count > 0) {
    absl::StrAppend(&out, "\nDiscovery reported ", discovery.error_count, " error(s)",
                    discovery.error_count > discovery.errors.size() ? ", the first:" : ":", "\n");
    for (const std::string& e : discovery.errors) absl::StrAppend(&out, "  ", e, "\n");
  }
  return out;
}

}  // namespace fabricscope
