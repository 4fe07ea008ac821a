// Golden of the store-backed exposition: a Store filled with fixed series and
// samples at fixed timestamps, rendered by RenderStoreFamilies (as of a fixed
// time) and serialized as /metrics serves it in the text format
// (exporters/exposition.h; the golden was recorded with prometheus-cpp's
// TextSerializer and still matches), compared with
// tests/golden/exporter_store.metrics.
//
// The store holds: counter families (IB port bytes, ECN marks), a gauge (PFC
// enabled), a saturating IB PMA counter that sticks at its maximum and one
// that does not, a wrapped 32-bit Q-counter, a 64-bit netdev counter that
// resets, PFC pause time for the pause-fraction peak (one priority half
// paused, the global one paused more than the whole interval: clamped to 1),
// a microburst, a series whose peak is stale (last sample older than the peak
// window), an absent series and an absent port (neither exported).
//
// Masked: fabricscope_store_bytes (the store's memory accounting follows the
// sizes of its internal structures, which differ between standard libraries)
// and fabricscope_store_seek_index_bytes (the readers' caches of the whole
// process: whatever other tests on this thread read before); the line
// stays, its value is replaced by <masked>.
//
// FABRICSCOPE_UPDATE_GOLDENS=1 in the environment rewrites the golden instead
// of comparing (tools/update-goldens.sh).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "core/series.h"
#include "core/signals.h"
#include "exporters/exposition.h"
#include "exporters/metrics_profile.h"
#include "exporters/prometheus_exporter.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace prometheus_exporter_golden_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // 2023-11-14T22:13:20Z
constexpr int64_t kTick = 100 * kMs;
constexpr int kTicks = 30;  // 3 s of 100 ms polls

std::string SourceDir() {
  const char* src = std::getenv("FABRICSCOPE_SOURCE_DIR");
  return src != nullptr ? src : ".";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Registers `key` through the signal table; fails the test if no rule maps it.
SeriesId Reg(Store* store, const SeriesKey& key) {
  std::optional<Signal> sig = MapCounter(key);
  EXPECT_TRUE(sig.has_value()) << key.source << "/" << key.name;
  return store->Register(key, *sig);
}

// The store and port inventory, filled deterministically; `*now_ns` is the
// render time.
void Fill(Store* store, PortInventory* ports, int64_t* now_ns) {
  // Port inventory: an IB port, a RoCE port, and a vanished one (not exported).
  ports->Upsert({"mlx5_0", 1, "", "InfiniBand", "ACTIVE", "100 Gb/sec (4X EDR)", true});
  ports->Upsert({"mlx5_1", 1, "eth0", "Ethernet", "ACTIVE", "100 Gb/sec (2X HDR)", true});
  ports->Upsert({"mlx5_2", 1, "eth9", "Ethernet", "DOWN", "40 Gb/sec (4X QDR)", false});
  // The topology: an LLDP partner on the RoCE port, an SMP partner on the IB
  // port, PCI placement, one GPU and its affinity to both devices.
  HostTopology topo;
  topo.partners = {
      {"mlx5_0", 1, "", "ib_mad", "0x98039b0300a1b2c3", "QM9700 spine02", "17", "switch"},
      {"mlx5_1", 1, "eth0", "lldp", "c0:ff:ee:00:00:01", "leaf07", "Ethernet1/12",
       "to \"gpu\" rack 3"}};
  topo.ports = {{"mlx5_0", 1, "", "0000:0c:00.0", 0}, {"mlx5_1", 1, "eth0", "0000:8a:00.0", 1}};
  topo.gpus = {{"0000:07:00.0", 0, "nvidia", "0x2330", 0}};
  topo.affinity = {{"0000:07:00.0", 0, "mlx5_0", PciRelation::kPxb},
                   {"0000:07:00.0", 0, "mlx5_1", PciRelation::kSys}};
  ports->SetTopology(std::move(topo));

  const SeriesId xmit = Reg(store, {"counters", "port_xmit_data", "mlx5_0", 1, ""});
  const SeriesId rcv = Reg(store, {"counters", "port_rcv_data", "mlx5_0", 1, ""});
  const SeriesId symbol = Reg(store, {"counters", "symbol_error", "mlx5_0", 1, ""});
  const SeriesId downed = Reg(store, {"counters", "link_downed", "mlx5_0", 1, ""});
  const SeriesId seq = Reg(store, {"hw_counters", "out_of_sequence", "mlx5_1", 1, "eth0"});
  const SeriesId ecn =
      Reg(store, {"hw_counters", "np_ecn_marked_roce_packets", "mlx5_1", 1, "eth0"});
  const SeriesId rx_bytes = Reg(store, {"netdev", "rx_bytes", "mlx5_1", 1, "eth0"});
  const SeriesId p3 = Reg(store, {"ethtool", "rx_prio3_pause_duration", "mlx5_1", 1, "eth0"});
  const SeriesId global = Reg(store, {"ethtool", "tx_global_pause_duration", "mlx5_1", 1, "eth0"});
  const SeriesId pfc3 = Reg(store, {"dcb_config", "pfc_enabled_prio3", "", 0, "eth0"});
  const SeriesId stale = Reg(store, {"netdev", "tx_bytes", "", 0, "eth1"});
  const SeriesId gone = Reg(store, {"netdev", "tx_packets", "", 0, "eth1"});

  // A series polled only during the first second: its peak is stale at render.
  for (int i = 0; i <= 10; ++i) store->Append(stale, kT0 + i * kTick, 5000u * i);
  // An absent series: samples, then its netdev vanished.
  store->Append(gone, kT0, 1);
  store->Append(gone, kT0 + kTick, 2);
  store->SetPresent(gone, false);

  int64_t t = 0;
  for (int i = 0; i <= kTicks; ++i) {
    // The first sample at 18 s, so that the stale series is older than the
    // 15 s peak window (plus one peak bucket) at render time.
    t = kT0 + 18 * kSec + i * kTick;
    // IB port bytes (octets/4): 1000 words per tick, 3000 in tick 7 (the peak).
    store->Append(xmit, t, 1000u * i + (i >= 7 ? 2000u : 0u));
    store->Append(rcv, t, 500u * i);
    // A 16-bit saturating PMA counter climbing to 65535 and sticking there.
    store->Append(symbol, t, std::min<uint64_t>(65535, 60000u + 400u * i));
    store->Append(downed, t, i >= 20 ? 3 : 2);
    // A 32-bit Q-counter wrapping at tick 10: +100 per tick throughout.
    store->Append(seq, t, (uint64_t{4294967295} - 1000 + 100u * i) & 0xffffffffu);
    // ECN marks: 10 per tick, 10000 in tick 25 (a microburst: 1e5/s, 100x
    // the trailing mean, above the 1e3/s floor).
    store->Append(ecn, t, 10u * i + (i >= 25 ? 9990u : 0u));
    // A netdev counter reset (driver reload) at tick 15.
    store->Append(rx_bytes, t, i < 15 ? 1'000'000u + 1000u * i : 1000u * (i - 15));
    // Priority 3 paused 50 ms of each 100 ms tick from tick 20 (fraction 0.5).
    store->Append(p3, t, i < 20 ? 0 : 50'000u * (i - 19));
    // Global pause: 150 ms reported within one 100 ms tick (fraction clamped to 1).
    store->Append(global, t, i < 28 ? 7'000u : 157'000u);
    store->Append(pfc3, t, 1);
  }
  *now_ns = t + 50 * kMs;
}

// The value of the exposition line that starts with `series` (name and labels),
// or NaN when there is none.
double ValueOf(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + 1 + series.size() + 1, nullptr);
}

std::string MaskStoreBytes(const std::string& text) {
  return std::regex_replace(
      text, std::regex("(\nfabricscope_store_(bytes|seek_index_bytes)) [^\n]*"), "$1 <masked>");
}

std::string Render(const Store& store, const PortInventory& ports, int64_t now_ns) {
  std::string text;
  WriteExposition(RenderStoreFamilies(store, &ports, now_ns), {}, ExpositionFormat::kText, &text);
  return MaskStoreBytes(text);
}

// What /metrics writes for the store: WriteStoreFamilies, straight from the
// snapshot.
std::string Streamed(const Store& store, const PortInventory& ports, int64_t now_ns,
                     ExpositionFormat format, MetricsProfile profile,
                     const std::vector<SeriesExemplar>& exemplars = {}) {
  std::string out;
  ExpositionWriter writer(format, exemplars, &out);
  WriteStoreFamilies(store, &ports, now_ns, profile, &writer);
  writer.Finish();
  return out;
}

TEST(PrometheusExporterGoldenTest, StoreRenderingMatchesGolden) {
  Store store;
  PortInventory ports;
  int64_t now_ns = 0;
  Fill(&store, &ports, &now_ns);
  const std::string got = Render(store, ports, now_ns);

  // The rendering is a function of the store and the render time only.
  EXPECT_EQ(got, Render(store, ports, now_ns));
  // A few facts the golden must show, so that a regenerated golden cannot
  // silently lose them.
  EXPECT_NE(got.find("fabricscope_ib_pma_saturated{device=\"mlx5_0\",port=\"1\","
                     "counter=\"symbol_error\"} 1\n"),
            std::string::npos);
  EXPECT_NE(got.find("fabricscope_series_resets_total{source=\"netdev\",device=\"mlx5_1\","
                     "port=\"1\",netdev=\"eth0\",counter=\"rx_bytes\"} 1\n"),
            std::string::npos);
  // 50 ms of pause in a 100 ms poll (microseconds scaled by 1e-6: not exact).
  EXPECT_NEAR(ValueOf(got,
                      "fabricscope_pfc_pause_fraction_peak{netdev=\"eth0\",priority=\"3\","
                      "direction=\"rx\"}"),
              0.5, 1e-9);
  EXPECT_EQ(ValueOf(got,
                    "fabricscope_pfc_pause_fraction_peak{netdev=\"eth0\","
                    "priority=\"global\",direction=\"tx\"}"),
            1.0);
  EXPECT_NE(got.find("fabricscope_microbursts_total{signal=\"ecn_marked_packets\","
                     "device=\"mlx5_1\",port=\"1\",netdev=\"\",priority=\"\","
                     "direction=\"\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(got.find("eth9"), std::string::npos) << "absent port exported";
  EXPECT_NE(got.find("fabricscope_link_partner_info{device=\"mlx5_1\",port=\"1\",netdev=\"eth0\","
                     "source=\"lldp\",partner_chassis_id=\"c0:ff:ee:00:00:01\","
                     "partner_system_name=\"leaf07\",partner_port_id=\"Ethernet1/12\","
                     "partner_port_description=\"to \\\"gpu\\\" rack 3\"} 1\n"),
            std::string::npos);
  EXPECT_NE(got.find("fabricscope_gpu_nic_affinity{gpu_bus_id=\"0000:07:00.0\",gpu_index=\"0\","
                     "device=\"mlx5_0\",relation=\"PXB\"} 1\n"),
            std::string::npos);
  EXPECT_EQ(got.find("fabricscope_netdev_packets_total"), std::string::npos)
      << "absent series exported";
  // The stale series: its total and microburst count stay, its peak does not.
  const std::string eth1 =
      "{signal=\"netdev_bytes\",device=\"\",port=\"\",netdev=\"eth1\",priority=\"\","
      "direction=\"tx\"}";
  EXPECT_EQ(ValueOf(got, "fabricscope_microbursts_total" + eth1), 0.0);
  EXPECT_EQ(got.find("fabricscope_peak_rate_per_second" + eth1), std::string::npos)
      << "stale peak exported";

  const std::string golden = SourceDir() + "/tests/golden/exporter_store.metrics";
  if (std::getenv("FABRICSCOPE_UPDATE_GOLDENS") != nullptr) {
    std::filesystem::create_directories(std::filesystem::path(golden).parent_path());
    std::ofstream(golden, std::ios::trunc) << got;
  }
  EXPECT_EQ(got, ReadFile(golden))
      << "differs from " << golden
      << " (if intended: FABRICSCOPE_UPDATE_GOLDENS=1 build/release/unit_tests "
         "--gtest_filter=PrometheusExporterGoldenTest.*, or tools/update-goldens.sh)";
}

TEST(PrometheusExporterGoldenTest, StreamedStoreRenderingMatchesGolden) {
  Store store;
  PortInventory ports;
  int64_t now_ns = 0;
  Fill(&store, &ports, &now_ns);
  const std::string golden = SourceDir() + "/tests/golden/exporter_store.metrics";
  EXPECT_EQ(MaskStoreBytes(
                Streamed(store, ports, now_ns, ExpositionFormat::kText, MetricsProfile::kFull)),
            ReadFile(golden));
}

// WriteStoreFamilies writes exactly what the families of RenderStoreFamilies
// (with the profile applied) write, in both formats and both profiles, with
// exemplars on store families.
TEST(PrometheusExporterGoldenTest, StreamedEqualsRenderedFamilies) {
  Store store;
  PortInventory ports;
  int64_t now_ns = 0;
  Fill(&store, &ports, &now_ns);
  const std::vector<SeriesExemplar> exemplars = {
      {"fabricscope_port_bytes_total",
       {{"direction", "tx"}, {"device", "mlx5_0"}, {"port", "1"}},
       {"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 0.25, kT0}},
      {"fabricscope_microbursts_total",
       {{"signal", "ecn_marked_packets"},
        {"device", "mlx5_1"},
        {"port", "1"},
        {"netdev", ""},
        {"priority", ""},
        {"direction", ""}},
       {"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 1, 0}},
      // A gauge: no exemplar in either path.
      {"fabricscope_store_series", {}, {"0af7651916cd43dd8448eb211c80319c", "", 1, 0}},
  };
  for (MetricsProfile profile : {MetricsProfile::kFull, MetricsProfile::kFleet}) {
    std::vector<prometheus::MetricFamily> families = RenderStoreFamilies(store, &ports, now_ns);
    ApplyMetricsProfile(profile, &families);
    for (ExpositionFormat format : {ExpositionFormat::kText, ExpositionFormat::kOpenMetrics}) {
      std::string want;
      WriteExposition(families, exemplars, format, &want);
      const std::string got = Streamed(store, ports, now_ns, format, profile, exemplars);
      EXPECT_EQ(got, want) << MetricsProfileName(profile) << " "
                           << (format == ExpositionFormat::kText ? "text" : "openmetrics");
      if (format == ExpositionFormat::kOpenMetrics && profile == MetricsProfile::kFull) {
        EXPECT_NE(
            got.find("fabricscope_port_bytes_total{device=\"mlx5_0\",port=\"1\","
                     "direction=\"tx\"} 128000 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\""),
            std::string::npos)
            << got;
        EXPECT_NE(got.find("} 1 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\",span_id="),
                  std::string::npos);
        EXPECT_EQ(got.find("fabricscope_store_series 1 #"), std::string::npos);
      }
    }
  }
  // The fleet profile dropped something (a peak of port_bytes), the full one did not.
  const std::string full =
      Streamed(store, ports, now_ns, ExpositionFormat::kText, MetricsProfile::kFull);
  const std::string fleet =
      Streamed(store, ports, now_ns, ExpositionFormat::kText, MetricsProfile::kFleet);
  EXPECT_NE(full.find("fabricscope_peak_rate_per_second{signal=\"port_bytes\""), std::string::npos);
  EXPECT_EQ(fleet.find("fabricscope_peak_rate_per_second{signal=\"port_bytes\""),
            std::string::npos);
  EXPECT_NE(fleet.find("fabricscope_peak_rate_per_second{signal=\"ecn_marked_packets\""),
            std::string::npos);
}

}  // namespace
}  // namespace prometheus_exporter_golden_test
}  // namespace fabricscope
