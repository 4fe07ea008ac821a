#include "exporters/metrics_profile.h"

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/signals.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace metrics_profile_test {
namespace {

using ::testing::HasSubstr;

prometheus::ClientMetric Metric(std::vector<std::pair<std::string, std::string>> labels) {
  prometheus::ClientMetric m;
  for (auto& [k, v] : labels) m.label.push_back({k, v});
  return m;
}

prometheus::MetricFamily Family(std::string name, std::vector<prometheus::ClientMetric> ms) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.metric = std::move(ms);
  return f;
}

std::vector<prometheus::MetricFamily> Sample() {
  return {
      Family("fabricscope_pfc_pause_seconds_total", {Metric({{"netdev", "eth2"}})}),
      Family("fabricscope_port_packets_total", {Metric({{"device", "mlx5_0"}})}),
      Family("fabricscope_peak_rate_per_second",
             {Metric({{"signal", "port_bytes"}}), Metric({{"signal", "discards:rx_prio_discards"}}),
              Metric({{"signal", "ecn_marked_packets"}})}),
      Family("fabricscope_microbursts_total", {Metric({{"signal", "rdma_requests"}})}),
      Family("fabricscope_fec_corrected_blocks_total",
             {Metric({{"netdev", "eth2"}, {"lane", ""}}),
              Metric({{"netdev", "eth2"}, {"lane", "0"}})}),
  };
}

std::vector<std::string> Names(const std::vector<prometheus::MetricFamily>& fs) {
  std::vector<std::string> v;
  for (const auto& f : fs) v.push_back(f.name);
  return v;
}

TEST(MetricsProfileTest, ParsesTheTwoProfilesAndNamesThemInTheError) {
  EXPECT_EQ(*ParseMetricsProfile("full"), MetricsProfile::kFull);
  EXPECT_EQ(*ParseMetricsProfile("fleet"), MetricsProfile::kFleet);
  EXPECT_EQ(MetricsProfileName(MetricsProfile::kFleet), "fleet");
  EXPECT_EQ(MetricsProfileName(MetricsProfile::kFull), "full");
  auto bad = ParseMetricsProfile("small");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'small'; one of full, fleet"));
}

TEST(MetricsProfileTest, FullKeepsEverything) {
  auto fs = Sample();
  ApplyMetricsProfile(MetricsProfile::kFull, &fs);
  ASSERT_EQ(fs.size(), 5u);
  EXPECT_EQ(fs[2].metric.size(), 3u);
  EXPECT_EQ(fs[4].metric.size(), 2u);
}

TEST(MetricsProfileTest, FleetDropsFamiliesSignalsAndLanes) {
  auto fs = Sample();
  ApplyMetricsProfile(MetricsProfile::kFleet, &fs);
  // port_packets is not read by any rule or panel; the microbursts family is
  // left without series (rdma_requests is not a congestion signal).
  EXPECT_EQ(Names(fs), (std::vector<std::string>{"fabricscope_pfc_pause_seconds_total",
                                                 "fabricscope_peak_rate_per_second",
                                                 "fabricscope_fec_corrected_blocks_total"}));
  ASSERT_EQ(fs[1].metric.size(), 2u);
  EXPECT_EQ(fs[1].metric[0].label[0].value, "discards:rx_prio_discards");
  EXPECT_EQ(fs[1].metric[1].label[0].value, "ecn_marked_packets");
  ASSERT_EQ(fs[2].metric.size(), 1u);
  EXPECT_EQ(fs[2].metric[0].label[1].value, "");
}

// fabricscope_ib_pma_saturated under fleet: only the counters that sit
// saturated (what FabricCounterSaturated reads); none left, no family.
TEST(MetricsProfileTest, FleetKeepsOnlySaturatedCounters) {
  prometheus::ClientMetric sat = Metric({{"device", "mlx5_0"}, {"counter", "port_xmit_wait"}});
  sat.gauge.value = 1;
  prometheus::ClientMetric clear = Metric({{"device", "mlx5_0"}, {"counter", "symbol_error"}});
  clear.gauge.value = 0;
  std::vector<prometheus::MetricFamily> fs = {Family("fabricscope_ib_pma_saturated", {sat, clear})};
  ApplyMetricsProfile(MetricsProfile::kFleet, &fs);
  ASSERT_EQ(fs.size(), 1u);
  ASSERT_EQ(fs[0].metric.size(), 1u);
  EXPECT_EQ(fs[0].metric[0].label[1].value, "port_xmit_wait");
  std::vector<prometheus::MetricFamily> none = {Family("fabricscope_ib_pma_saturated", {clear})};
  ApplyMetricsProfile(MetricsProfile::kFleet, &none);
  EXPECT_TRUE(none.empty());
  std::vector<prometheus::MetricFamily> full = {
      Family("fabricscope_ib_pma_saturated", {sat, clear})};
  ApplyMetricsProfile(MetricsProfile::kFull, &full);
  EXPECT_EQ(full[0].metric.size(), 2u);
}

// What the exporter registers: the self-metrics registry wrapped in a
// ProfiledCollectable exports only the kept families under fleet.
TEST(MetricsProfileTest, ProfiledCollectableFiltersTheRegistry) {
  MetricsRegistry metrics;
  metrics.Counter(families::kPortPackets).Add({{"device", "mlx5_0"}, {"port", "1"}}).Increment();
  metrics.Counter(families::kPfcPauseSeconds)
      .Add({{"netdev", "eth2"}, {"priority", "3"}, {"direction", "rx"}})
      .Increment();
  auto names = [&](MetricsProfile p) {
    std::vector<std::string> v;
    for (const auto& f : ProfiledCollectable(metrics.registry(), p).Collect()) {
      if (!f.metric.empty()) v.push_back(f.name);
    }
    return v;
  };
  EXPECT_THAT(names(MetricsProfile::kFull),
              ::testing::IsSupersetOf(
                  {"fabricscope_port_packets_total", "fabricscope_pfc_pause_seconds_total"}));
  EXPECT_THAT(names(MetricsProfile::kFleet),
              ::testing::ElementsAre("fabricscope_pfc_pause_seconds_total"));
}

TEST(MetricsProfileTest, FleetFamiliesAreDeclaredMetrics) {
  for (const std::string& name : FleetProfileFamilies()) {
    EXPECT_NE(FindMetric(name), nullptr) << name;
  }
}

std::string Read(const std::string& rel) {
  const char* src = std::getenv("FABRICSCOPE_SOURCE_DIR");
  std::ifstream in(std::string(src != nullptr ? src : ".") + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fleet profile keeps every family the shipped rules and dashboard read,
// and every congestion signal they select from the peak/microburst families.
TEST(MetricsProfileTest, FleetKeepsWhatTheShippedRulesAndDashboardRead) {
  const std::set<std::string> keep(FleetProfileFamilies().begin(), FleetProfileFamilies().end());
  int files = 0, names = 0;
  for (const char* rel :
       {"deploy/prometheus/fabricscope-recording.rules.yml",
        "deploy/prometheus/fabricscope-alerts.rules.yml",
        "deploy/prometheus/fabricscope-fleet.rules.yml", "deploy/grafana/fabricscope.json"}) {
    const std::string text = Read(rel);
    ASSERT_FALSE(text.empty()) << rel
                               << " (run from the source root or set FABRICSCOPE_SOURCE_DIR)";
    ++files;
    const std::regex re("fabricscope_[a-z0-9_]+");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
         ++it) {
      std::string name = it->str();
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s(suffix);
        if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
            keep.count(name.substr(0, name.size() - s.size())) > 0) {
          name = name.substr(0, name.size() - s.size());
        }
      }
      ++names;
      EXPECT_TRUE(keep.count(name) > 0) << rel << " reads " << name;
    }
  }
  EXPECT_EQ(files, 4);
  EXPECT_GT(names, 40);
  for (const char* s :
       {"ecn_marked_packets", "cnp_sent", "cnp_handled", "pfc_pause_frames", "pfc_pause_seconds",
        "discards:rx_prio_discards", "netdev_drops", "rx_buffer_passed_threshold"}) {
    EXPECT_TRUE(FleetKeepsSignal(s)) << s;
  }
  EXPECT_FALSE(FleetKeepsSignal("port_bytes"));
  EXPECT_FALSE(FleetKeepsSignal("rdma_errors:out_of_sequence"));
}

}  // namespace
}  // namespace metrics_profile_test
}  // namespace fabricscope
