// The detectors, unchanged, on vendor NICs: the storm, ECN and retransmit cases of
// detectors_test.cc driven through the real collectors on a bnxt_re and an ionic
// fixture tree (tests/fixtures/vendors/sysfs) and their ethtool -S dumps (bnxt_en,
// ionic), with the counter files rewritten between polls; and the storm case on an
// E810 (irdma1 with the ice dump), whose pause time is estimated from XOFF frames.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "collectors/collector.h"
#include "collectors/ethtool_collector.h"
#include "collectors/ethtool_stats_source.h"
#include "collectors/rdma_sysfs_collector.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/detect/detectors.h"
#include "daemon/detect/event_log.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace vendor_detectors_test {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT0 = 1'700'000'000 * kSec;

std::string SourceDir() {
  const char* s = std::getenv("FABRICSCOPE_SOURCE_DIR");
  return s != nullptr ? s : ".";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

class Ctx final : public PollContext {
 public:
  Ctx(Store* store, Tier tier, int64_t ts) : store_(store), tier_(tier), ts_(ts) {}
  Tier tier() const override { return tier_; }
  int64_t ts_ns() const override { return ts_; }
  void Append(SeriesId id, uint64_t raw) override { store_->Append(id, ts_, raw); }
  void RecordError(CollectorErrorCode, absl::string_view key, absl::string_view detail) override {
    errors.push_back(absl::StrCat(key, ": ", detail));
  }
  std::vector<std::string> errors;

 private:
  Store* store_;
  Tier tier_;
  int64_t ts_;
};

// One vendor port: its RDMA device in the fixture tree, its netdev and ethtool dump.
struct Vendor {
  const char* device;
  const char* netdev;
  const char* dump;  // tests/fixtures/vendors/<dump>
  // Raw names: ECN marks, out-of-buffer drops, out-of-sequence, pause time rx/tx of prio 3.
  const char* marks;
  const char* drops;
  const char* oos;
  const char* pause_rx3;
  const char* pause_tx3;
};

const Vendor kBnxt{
    "bnxt_re0",         "bnxt0",          "bnxt_en_ethtool_S.txt",   "rx_ecn_marked_pkts",
    "rx_out_of_buffer", "oos_drop_count", "pfc_pri3_rx_duration_us", "pfc_pri3_tx_duration_us"};
const Vendor kIonic{"rocep132s0",
                    "enp132s0",
                    "ionic_ethtool_S.txt",
                    "rx_rdma_ecn_pkts",
                    "resp_rx_outof_buf",
                    "resp_rx_outouf_seq",
                    "rx_pripause_3_1us_count",
                    "tx_pripause_3_1us_count"};

using Fn = std::function<uint64_t(int64_t)>;  // raw value at t (ns since kT0)

class VendorDetectorsTest : public ::testing::TestWithParam<const Vendor*> {
 protected:
  VendorDetectorsTest() : clock_(kT0), events_(1000, &metrics_) {
    char tmpl[] = "/tmp/vendor_detectors.XXXXXX";
    tmp_ = mkdtemp(tmpl);
    // Only the vendor's device (the ethtool directory has its netdev's dump only).
    const std::string dev = v().device;
    fs::create_directories(tmp_ + "/sysfs/devices");
    fs::create_directories(tmp_ + "/sysfs/root/class/infiniband");
    fs::copy(SourceDir() + "/tests/fixtures/vendors/sysfs/devices/" + dev,
             tmp_ + "/sysfs/devices/" + dev,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::create_directory_symlink("../../../devices/" + dev,
                                 tmp_ + "/sysfs/root/class/infiniband/" + dev);
    fs::create_directories(tmp_ + "/ethtool");
    for (absl::string_view line :
         absl::StrSplit(ReadFile(SourceDir() + "/tests/fixtures/vendors/" + v().dump), '\n')) {
      if (absl::StartsWith(line, "#") || line.empty()) continue;
      // "     name: value": keep "     name: " and the name.
      const size_t colon = line.rfind(": ");
      std::string head(line.substr(0, colon == absl::string_view::npos ? line.size() : colon + 2));
      std::string name(absl::StripLeadingAsciiWhitespace(line.substr(0, colon)));
      std::string value(colon == absl::string_view::npos ? "" : line.substr(colon + 2));
      dump_.push_back({std::move(head), std::move(name), std::move(value)});
    }
  }
  ~VendorDetectorsTest() override { fs::remove_all(tmp_); }
  const Vendor& v() const { return *GetParam(); }

  void Start() {
    WriteHwCounters(0);
    engine_ = std::make_unique<DetectorEngine>(DetectorOptions{}, &ports_, &events_, &metrics_);
    store_.SetObserver(engine_.get());
    options_.sysfs_root = tmp_ + "/sysfs/root";
    CollectorContext cc{&options_, &store_, &ports_, &clock_, &metrics_};
    auto rdma = RdmaSysfsCollector::Create(cc);
    ASSERT_TRUE(rdma.ok());
    rdma_ = *std::move(rdma);
    Ctx ctx(&store_, Tier::kConfig, kT0);
    ASSERT_TRUE(rdma_->Discover(ctx).ok());
    WriteDump(0);
    ethtool_ = std::make_unique<EthtoolCollector>(&store_, &ports_, &clock_,
                                                  MakeDirEthtoolSource(tmp_ + "/ethtool"),
                                                  EthtoolCollector::Options{});
    ASSERT_TRUE(ethtool_->Discover(ctx).ok());
  }

  // The dump with each name of `ethtool_fns_` at its value for t.
  void WriteDump(int64_t t) {
    std::string text;
    for (const DumpLine& l : dump_) {
      auto it = ethtool_fns_.find(l.name);
      absl::StrAppend(&text, l.head,
                      it == ethtool_fns_.end() ? l.value : absl::StrCat(it->second(t)), "\n");
    }
    WriteFile(tmp_ + "/ethtool/" + v().netdev, text);
  }

  void WriteHwCounters(int64_t t) {
    for (const auto& [name, fn] : hw_fns_) {
      WriteFile(tmp_ + "/sysfs/devices/" + v().device + "/ports/1/hw_counters/" + name,
                absl::StrCat(fn(t), "\n"));
    }
  }

  // Rewrites the files at 50 ms steps over [from, to) and polls: rdma_sysfs hot every
  // step, its medium tier and ethtool every 100 ms (the detectors judge each poll
  // interval at any poll rate).
  void Drive(int64_t from, int64_t to) {
    for (int64_t t = from; t < to; t += 50 * kMs) {
      WriteHwCounters(t);
      clock_.SetRealtimeNs(kT0 + t);
      clock_.Advance(std::chrono::milliseconds(50));
      Ctx hot(&store_, Tier::kHot, kT0 + t);
      ASSERT_TRUE(rdma_->Poll(hot).ok());
      EXPECT_TRUE(hot.errors.empty()) << hot.errors[0];
      if (t % (100 * kMs) == 0) {
        Ctx medium(&store_, Tier::kMedium, kT0 + t);
        ASSERT_TRUE(rdma_->Poll(medium).ok());
        if (!ethtool_fns_.empty()) {  // the storm case; the others read hw_counters only
          WriteDump(t);
          ASSERT_TRUE(ethtool_->Poll(medium).ok());
        }
        EXPECT_TRUE(medium.errors.empty()) << medium.errors[0];
      }
    }
  }

  std::vector<DetectorEvent> Events(const std::string& detector) {
    return events_.List(0, INT64_MAX, detector);
  }

  struct DumpLine {
    std::string head;  // "     name: "
    std::string name;
    std::string value;
  };
  std::string tmp_;
  std::vector<DumpLine> dump_;
  std::map<std::string, Fn> hw_fns_;       // hw_counters file -> value
  std::map<std::string, Fn> ethtool_fns_;  // ethtool -S name -> value
  FakeClock clock_;
  MetricsRegistry metrics_;
  Store store_;
  PortInventory ports_;
  EventLog events_;
  CollectorOptions options_;
  std::unique_ptr<DetectorEngine> engine_;
  std::unique_ptr<Collector> rdma_;
  std::unique_ptr<EthtoolCollector> ethtool_;
};

uint64_t PausedUs(int64_t t, int64_t from, int64_t to, double fraction) {
  if (t <= from) return 0;
  return static_cast<uint64_t>(static_cast<double>(std::min(t, to) - from) * fraction / 1000);
}

// The one pfc_storm episode both storm tests drive: rx priority 3 paused 95 %
// from 1 s to 2 s on `netdev` (`device` from the port inventory), ended.
void ExpectOneRxPrio3Storm(const std::vector<DetectorEvent>& ev, const std::string& netdev,
                           const std::string& device) {
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "storm");
  EXPECT_EQ(ev[0].netdev, netdev);
  EXPECT_EQ(ev[0].device, device);
  EXPECT_EQ(ev[0].priority, "3");
  EXPECT_EQ(ev[0].direction, "rx");
  EXPECT_GE(ev[0].start_unix_nano, kT0 + 1 * kSec);
  EXPECT_LE(ev[0].start_unix_nano, kT0 + 1200 * kMs);
  EXPECT_FALSE(ev[0].active());
  EXPECT_NEAR(ev[0].peak, 0.95, 0.05);
}

TEST_P(VendorDetectorsTest, PfcStorm) {
  // rx priority 3: a 95% storm 1.0-2.0 s; tx: 50% all along (never a storm).
  ethtool_fns_[v().pause_rx3] = [](int64_t t) { return PausedUs(t, 1 * kSec, 2 * kSec, 0.95); };
  ethtool_fns_[v().pause_tx3] = [](int64_t t) { return PausedUs(t, 0, INT64_MAX, 0.5); };
  Start();
  Drive(0, 4 * kSec);
  ExpectOneRxPrio3Storm(Events("pfc_storm"), v().netdev, v().device);
}

TEST_P(VendorDetectorsTest, EcnMarkingTooLate) {
  // 0-2 s: drops at 5000/s with marks at 20000/s (ECN working); 2-5 s: marks flat.
  hw_fns_[v().drops] = [](int64_t t) { return static_cast<uint64_t>(t / kMs * 5); };
  hw_fns_[v().marks] = [](int64_t t) {
    return static_cast<uint64_t>(std::min(t, 2 * kSec) / kMs * 20);
  };
  Start();
  Drive(0, 5 * kSec);
  auto ev = Events("ecn_mistuning");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "marking_too_late");
  EXPECT_EQ(ev[0].device, v().device);
  EXPECT_EQ(ev[0].port, 1u);
  EXPECT_GT(ev[0].start_unix_nano, kT0 + 2 * kSec);
  EXPECT_LT(ev[0].start_unix_nano, kT0 + 3500 * kMs);
}

TEST_P(VendorDetectorsTest, RetransmitSpike) {
  // out of sequence: 2/s, then 500/s during 10-12 s.
  hw_fns_[v().oos] = [](int64_t t) {
    return static_cast<uint64_t>(t / (500 * kMs) +
                                 (std::clamp(t, 10 * kSec, 12 * kSec) - 10 * kSec) / (2 * kMs));
  };
  Start();
  Drive(0, 15 * kSec);
  auto ev = Events("retransmit_spike");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "out_of_sequence");
  EXPECT_EQ(ev[0].device, v().device);
  EXPECT_GE(ev[0].start_unix_nano, kT0 + 10 * kSec);
  EXPECT_LT(ev[0].start_unix_nano, kT0 + 11 * kSec);
  EXPECT_GT(ev[0].end_unix_nano, kT0 + 12 * kSec);
}

INSTANTIATE_TEST_SUITE_P(Vendors, VendorDetectorsTest, ::testing::Values(&kBnxt, &kIonic),
                         [](const ::testing::TestParamInfo<const Vendor*>& info) {
                           return std::string(info.param == &kBnxt ? "bnxt_re" : "ionic");
                         });

// ice (E810): XOFF frames per priority, no pause time. The pause time is the signal
// table's estimate (source pause_estimate): each XOFF frame holds the priority for
// 65535 quanta x 512 bit times, 335.5 us at irdma1's 100 Gb/s.
const Vendor kIce{"irdma1", "ens801f0", "ice_ethtool_S.txt",      "RxECNMrkd",
                  "",       "",         "rx_priority_3_xoff.nic", "tx_priority_3_xoff.nic"};
constexpr double kXoffSeconds = 65535.0 * 512 / 100e9;

// XOFF frames received by t (ns since kT0) when the port is paused `fraction` of
// [from, to], each frame counting kXoffSeconds.
uint64_t XoffFrames(int64_t t, int64_t from, int64_t to, double fraction) {
  if (t <= from) return 0;
  return static_cast<uint64_t>(static_cast<double>(std::min(t, to) - from) * 1e-9 * fraction /
                               kXoffSeconds);
}

class IceStormTest : public VendorDetectorsTest {
 protected:
  // The store's series of `family` for priority 3, direction `dir`.
  std::optional<SeriesSnapshot> Prio3(const std::string& family, const std::string& dir) {
    for (SeriesSnapshot& s : store_.Snapshot()) {
      if (s.signal->family->name == family && s.signal->Label("priority") == "3" &&
          s.signal->Label("direction") == dir) {
        return s;
      }
    }
    return std::nullopt;
  }
};

TEST_P(IceStormTest, SustainedXoffStormFiresFromTheEstimate) {
  // rx priority 3: XOFF frames worth 95% of the time 1.0-2.0 s; tx: 50% all along.
  ethtool_fns_[v().pause_rx3] = [](int64_t t) { return XoffFrames(t, 1 * kSec, 2 * kSec, 0.95); };
  ethtool_fns_[v().pause_tx3] = [](int64_t t) { return XoffFrames(t, 0, INT64_MAX, 0.5); };
  Start();
  Drive(0, 4 * kSec);

  // The estimate next to the frame counter: same raw value, scaled to seconds.
  auto frames = Prio3("fabricscope_pfc_pause_frames_total", "rx");
  auto est = Prio3("fabricscope_pfc_pause_seconds_total", "rx");
  ASSERT_TRUE(frames && est);
  EXPECT_EQ(frames->key->name, "rx_priority_3_xoff.nic");
  EXPECT_FALSE(frames->signal->estimated);
  EXPECT_EQ(est->key->source, "pause_estimate");
  EXPECT_EQ(est->key->name, "rx_priority_3_xoff.nic@100000Mbps");
  EXPECT_EQ(est->key->device, "irdma1");
  EXPECT_TRUE(est->signal->estimated);
  EXPECT_EQ(est->state.last_raw, frames->state.last_raw);
  EXPECT_NEAR(est->state.total, 0.95, 0.01);  // paused 95% of one second
  // The pause-fraction aggregate (fabricscope_pfc_pause_fraction_peak) reads this peak.
  ASSERT_TRUE(est->state.peak_valid);
  EXPECT_NEAR(est->state.peak_rate, 0.95, 0.05);

  const std::vector<DetectorEvent> ev = Events("pfc_storm");
  ExpectOneRxPrio3Storm(ev, "ens801f0", "irdma1");
  if (HasFatalFailure() || ev.size() != 1) return;
  // The episode's signals: the estimate, marked (and the frames' microburst it absorbed).
  EXPECT_NE(std::find(ev[0].signals.begin(), ev[0].signals.end(),
                      "pfc_pause_seconds rx prio 3 (estimated)"),
            ev[0].signals.end())
      << absl::StrJoin(ev[0].signals, ", ");
  EXPECT_TRUE(absl::StrContains(ev[0].summary, "estimated from XOFF frames")) << ev[0].summary;
}

TEST_P(IceStormTest, QuietXoffDoesNotFire) {
  // Congestion, not a storm: XOFF frames worth 10% (rx) and 40% (tx) of the time, 4 s long.
  ethtool_fns_[v().pause_rx3] = [](int64_t t) { return XoffFrames(t, 0, INT64_MAX, 0.1); };
  ethtool_fns_[v().pause_tx3] = [](int64_t t) { return XoffFrames(t, 0, INT64_MAX, 0.4); };
  Start();
  Drive(0, 4 * kSec);
  auto est = Prio3("fabricscope_pfc_pause_seconds_total", "rx");
  ASSERT_TRUE(est);
  EXPECT_GT(est->state.total, 0.3);  // the estimate moves (0.1 x 3.9 s)...
  ASSERT_TRUE(est->state.peak_valid);
  EXPECT_LT(est->state.peak_rate, 0.2);  // ...at a tenth of the time
  EXPECT_TRUE(Events("pfc_storm").empty());
}

INSTANTIATE_TEST_SUITE_P(Vendors, IceStormTest, ::testing::Values(&kIce),
                         [](const ::testing::TestParamInfo<const Vendor*>&) {
                           return std::string("ice");
                         });

}  // namespace
}  // namespace vendor_detectors_test
}  // namespace fabricscope
