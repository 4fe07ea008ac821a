#include "collectors/ethtool_collector.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "collectors/ethtool_stats_source.h"
#include "core/clock.h"
#include "core/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/unit/collectors/ethtool_test_util.h"

namespace fabricscope {
namespace ethtool_collector_test {
namespace {

using ethtool_test::ExportedLines;
using ethtool_test::ReadFile;
using ethtool_test::RecordingContext;
using ethtool_test::SourceDir;
using ethtool_test::TempDir;
using ethtool_test::WriteFile;
using ::testing::HasSubstr;

std::string Fixture(const std::string& rel) {
  return ReadFile(SourceDir() + "/tests/fixtures/ethtool/" + rel);
}

// `text` without its `#` lines (the vendor captures' `# origin:` line).
std::string WithoutOriginLines(const std::string& text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "#")) continue;
    absl::StrAppend(&out, line, "\n");
  }
  while (out.size() > 1 && out[out.size() - 1] == '\n' && out[out.size() - 2] == '\n') {
    out.pop_back();
  }
  return out;
}

// The exported sample of `family` whose labels contain every `want` pair.
std::optional<SeriesSnapshot> FindSeries(const Store& store, absl::string_view family,
                                         std::vector<std::pair<std::string, std::string>> want) {
  for (const SeriesSnapshot& s : store.Snapshot()) {
    if (s.signal->family->name != family || !s.state.present) continue;
    bool ok = true;
    for (const auto& [l, v] : want) ok = ok && s.signal->Label(l) == v;
    if (ok) return s;
  }
  return std::nullopt;
}

class EthtoolDirTest : public ::testing::Test {
 protected:
  std::unique_ptr<EthtoolCollector> Make() {
    return std::make_unique<EthtoolCollector>(&store_, &ports_, &clock_,
                                              MakeDirEthtoolSource(dir_.path(), sysfs_.path()),
                                              EthtoolCollector::Options{});
  }
  // The netdev's sysfs speed attribute in the test's own sysfs tree.
  void SetSpeed(absl::string_view netdev, absl::string_view text) {
    const std::string d = absl::StrCat(sysfs_.path(), "/class/net/", netdev);
    std::filesystem::create_directories(d);
    WriteFile(d + "/speed", std::string(text));
  }
  void Tick(EthtoolCollector& c) {
    clock_.Advance(std::chrono::milliseconds(100));
    ctx_.Advance();
    ASSERT_TRUE(c.Poll(ctx_).ok());
  }
  void Rescan(EthtoolCollector& c) {
    clock_.Advance(std::chrono::seconds(2));
    ctx_.Advance();
    ASSERT_TRUE(c.Poll(ctx_).ok());
  }
  std::string Path(absl::string_view netdev) { return dir_.path() + "/" + std::string(netdev); }

  TempDir dir_;
  TempDir sysfs_;
  Store store_;
  PortInventory ports_;
  FakeClock clock_;
  RecordingContext ctx_{&store_};
};

// Golden mapping: every fixture dump through the dir source and the signal
// table, compared with tests/golden/ethtool_mapping/<file>.mapped
// (FABRICSCOPE_UPDATE_GOLDENS=1 rewrites them; tools/update-goldens.sh).
TEST_F(EthtoolDirTest, GoldenMappingOfEveryFixture) {
  const char* files[] = {"mlx5/ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt",
                         "mlx5/lkml_bpf_20240619_mlx5_k5.15_nonzero.txt",
                         "mlx5/lkml_bpf_20240619_mlx5_k6.5_nonzero.txt",
                         "other/bnxt_en_10g_k4.18_statistics.txt",
                         "other/i40e_10g_k4.18_statistics.txt",
                         "other/ice_25g_k4.18_statistics.txt",
                         "../vendors/bnxt_en_ethtool_S.txt",
                         "../vendors/ionic_ethtool_S.txt",
                         "../vendors/ice_ethtool_S.txt"};
  int i = 0;
  for (const char* f : files) {
    std::string text = WithoutOriginLines(Fixture(f));
    if (text.back() != '\n') text += '\n';  // bnxt capture lost its final newline
    WriteFile(Path(absl::StrCat("fx", i++)), text);
  }
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  EXPECT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();
  const bool update = std::getenv("FABRICSCOPE_UPDATE_GOLDENS") != nullptr;
  i = 0;
  for (const char* f : files) {
    std::string netdev = absl::StrCat("fx", i++);
    std::string got = absl::StrJoin(ExportedLines(store_, netdev), "\n") + "\n";
    std::string golden = SourceDir() + "/tests/golden/ethtool_mapping/" +
                         std::filesystem::path(f).filename().string() + ".mapped";
    if (update) {
      std::filesystem::create_directories(std::filesystem::path(golden).parent_path());
      WriteFile(golden, got);
    }
    EXPECT_EQ(got, ReadFile(golden)) << f << " (FABRICSCOPE_UPDATE_GOLDENS=1 to regenerate)";
  }
}

TEST_F(EthtoolDirTest, SpecificMlx5Values) {
  WriteFile(Path("eth0"), Fixture("mlx5/lkml_bpf_20240619_mlx5_k5.15_nonzero.txt"));
  WriteFile(Path("eth1"), Fixture("mlx5/ethq_mlx5_core_cx4lx_fw14.23_k4.15.txt"));
  ports_.Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "100 Gb/sec", true});
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  ASSERT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();

  // tx_global_pause_duration 771103810 us -> 771.10381 s.
  auto dur = FindSeries(store_, "fabricscope_pfc_pause_seconds_total",
                        {{"netdev", "eth0"}, {"priority", "global"}, {"direction", "tx"}});
  ASSERT_TRUE(dur);
  EXPECT_DOUBLE_EQ(dur->state.total, 771.10381);
  EXPECT_EQ(dur->key->name, "tx_global_pause_duration");
  // tx_global_pause wins over tx_pause_ctrl_phy for the same label set.
  auto frames = FindSeries(store_, "fabricscope_pfc_pause_frames_total",
                           {{"netdev", "eth0"}, {"priority", "global"}, {"direction", "tx"}});
  ASSERT_TRUE(frames);
  EXPECT_EQ(frames->key->name, "tx_global_pause");
  EXPECT_EQ(frames->state.total, 5745042);
  // Discards carry the RDMA port's device/port.
  auto phy = FindSeries(store_, "fabricscope_discards_total",
                        {{"netdev", "eth0"}, {"reason", "rx_discards_phy"}});
  ASSERT_TRUE(phy);
  EXPECT_EQ(phy->state.total, 58591428329.0);
  EXPECT_EQ(phy->signal->Label("device"), "mlx5_0");
  EXPECT_EQ(phy->signal->Label("port"), "1");
  auto prio = FindSeries(store_, "fabricscope_discards_total",
                         {{"netdev", "eth0"}, {"reason", "rx_prio_discards"}, {"priority", "0"}});
  ASSERT_TRUE(prio);
  EXPECT_EQ(prio->state.total, 58591314012.0);
  auto oob = FindSeries(store_, "fabricscope_discards_total",
                        {{"netdev", "eth0"}, {"reason", "rx_out_of_buffer"}});
  ASSERT_TRUE(oob);
  EXPECT_EQ(oob->signal->semantics.kind, CounterKind::kWrap32);

  // ethq: zeros, but the names are there and mapped; symbol errors from
  // rx_pcs_symbol_err_phy (wins over rx_symbol_err_phy).
  auto ethq_dur = FindSeries(store_, "fabricscope_pfc_pause_seconds_total",
                             {{"netdev", "eth1"}, {"priority", "global"}, {"direction", "rx"}});
  ASSERT_TRUE(ethq_dur);
  EXPECT_EQ(ethq_dur->key->name, "rx_global_pause_duration");
  EXPECT_EQ(ethq_dur->signal->scale, 1e-6);
  auto sym = FindSeries(store_, "fabricscope_phy_symbol_errors_total", {{"netdev", "eth1"}});
  ASSERT_TRUE(sym);
  EXPECT_EQ(sym->key->name, "rx_pcs_symbol_err_phy");
  EXPECT_EQ(sym->signal->Label("device"), "");
  EXPECT_EQ(c->NameCount("eth1"), 751u);
  EXPECT_GT(c->MappedCount("eth1"), 10u);
  EXPECT_LT(c->MappedCount("eth1"), 30u);  // per-ring counters are not registered
}

// The vendors' ethtool -S names give the canonical families with the dumps' values.
TEST_F(EthtoolDirTest, VendorDumpsGiveTheCanonicalFamilies) {
  WriteFile(Path("bnxt0"), WithoutOriginLines(Fixture("../vendors/bnxt_en_ethtool_S.txt")));
  WriteFile(Path("enp132s0"), WithoutOriginLines(Fixture("../vendors/ionic_ethtool_S.txt")));
  WriteFile(Path("ice0"), WithoutOriginLines(Fixture("../vendors/ice_ethtool_S.txt")));
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  ASSERT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();
  auto value = [&](const std::string& family,
                   std::vector<std::pair<std::string, std::string>> want) {
    auto s = FindSeries(store_, family, want);
    return s ? s->state.total : -1.0;
  };
  auto raw_name = [&](const std::string& family,
                      std::vector<std::pair<std::string, std::string>> want) {
    auto s = FindSeries(store_, family, want);
    return s ? s->key->name : std::string("(none)");
  };
  // bnxt_en: PFC frames, pause time (us -> s) and transitions per priority, discards, FEC.
  for (int p = 0; p < 8; ++p) {
    const std::string prio = absl::StrCat(p);
    EXPECT_EQ(raw_name("fabricscope_pfc_pause_frames_total",
                       {{"netdev", "bnxt0"}, {"priority", prio}, {"direction", "rx"}}),
              absl::StrCat("rx_pfc_ena_frames_pri", p));
    EXPECT_EQ(raw_name("fabricscope_pfc_pause_seconds_total",
                       {{"netdev", "bnxt0"}, {"priority", prio}, {"direction", "tx"}}),
              absl::StrCat("pfc_pri", p, "_tx_duration_us"));
    EXPECT_EQ(raw_name("fabricscope_pfc_pause_transitions_total",
                       {{"netdev", "bnxt0"}, {"priority", prio}, {"direction", "rx"}}),
              absl::StrCat("pfc_pri", p, "_rx_transitions"));
  }
  EXPECT_EQ(
      value("fabricscope_discards_total", {{"netdev", "bnxt0"}, {"reason", "rx_stat_discard"}}),
      49337);
  EXPECT_EQ(value("fabricscope_rx_buffer_passed_threshold_total", {{"netdev", "bnxt0"}}), 417);
  EXPECT_EQ(raw_name("fabricscope_fec_corrected_blocks_total", {{"netdev", "bnxt0"}}),
            "rx_fec_corrected_blocks");
  // ionic: pause time per priority; frames only for all priorities together.
  EXPECT_EQ(raw_name("fabricscope_pfc_pause_seconds_total",
                     {{"netdev", "enp132s0"}, {"priority", "3"}, {"direction", "rx"}}),
            "rx_pripause_3_1us_count");
  EXPECT_EQ(raw_name("fabricscope_pfc_pause_frames_total",
                     {{"netdev", "enp132s0"}, {"priority", "all"}, {"direction", "tx"}}),
            "frames_tx_pripause");
  EXPECT_EQ(raw_name("fabricscope_pfc_pause_frames_total",
                     {{"netdev", "enp132s0"}, {"priority", "3"}, {"direction", "tx"}}),
            "(none)");
  // ice: XOFF frames and XON (transitions) per priority, no pause time.
  EXPECT_EQ(raw_name("fabricscope_pfc_pause_frames_total",
                     {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "rx"}}),
            "rx_priority_3_xoff.nic");
  EXPECT_EQ(raw_name("fabricscope_pfc_pause_transitions_total",
                     {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "tx"}}),
            "tx_priority_3_xon.nic");
  EXPECT_EQ(raw_name("fabricscope_pfc_pause_seconds_total", {{"netdev", "ice0"}}), "(none)");
}

// ice XOFF frames also feed an estimated pause time at the RDMA port's link rate, except
// where a name of the netdev counts that pause time itself; a new link rate, a new key.
TEST_F(EthtoolDirTest, XoffFramesGiveAnEstimatedPauseTime) {
  WriteFile(Path("ice0"),
            "NIC statistics:\n     rx_priority_3_xoff.nic: 1000\n"
            "     tx_priority_3_xoff.nic: 2000\n     pfc_pri3_rx_duration_us: 5\n");
  ports_.Upsert({"irdma1", 1, "ice0", "Ethernet", "ACTIVE", "25 Gb/sec (1X EDR)", true});
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  ASSERT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();
  auto tx = FindSeries(store_, "fabricscope_pfc_pause_seconds_total",
                       {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "tx"}});
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->key->source, "pause_estimate");
  EXPECT_EQ(tx->key->name, "tx_priority_3_xoff.nic@25000Mbps");
  EXPECT_EQ(tx->key->device, "irdma1");
  EXPECT_TRUE(tx->signal->estimated);
  EXPECT_DOUBLE_EQ(tx->state.total, 2000 * 65535.0 * 512 / 25e9);
  // The frames stay frames.
  auto frames = FindSeries(store_, "fabricscope_pfc_pause_frames_total",
                           {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "tx"}});
  ASSERT_TRUE(frames);
  EXPECT_EQ(frames->state.total, 2000);
  // rx priority 3 has a pause-time counter: no estimate.
  auto rx = FindSeries(store_, "fabricscope_pfc_pause_seconds_total",
                       {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "rx"}});
  ASSERT_TRUE(rx);
  EXPECT_EQ(rx->key->name, "pfc_pri3_rx_duration_us");
  EXPECT_EQ(c->MappedCount("ice0"), 4u);

  ports_.Upsert({"irdma1", 1, "ice0", "Ethernet", "ACTIVE", "100 Gb/sec (4X EDR)", true});
  Rescan(*c);
  auto tx100 = FindSeries(store_, "fabricscope_pfc_pause_seconds_total",
                          {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "tx"}});
  ASSERT_TRUE(tx100);
  EXPECT_EQ(tx100->key->name, "tx_priority_3_xoff.nic@100000Mbps");
  EXPECT_FALSE(store_.Get(tx->id)->state.present);  // the 25 Gb/s series is gone
  EXPECT_EQ(c->MappedCount("ice0"), 4u);
}

// Without an RDMA port (ice without irdma) the netdev's own link speed gives the rate:
// the sysfs speed attribute with --ethtool-dir (ETHTOOL_GLINKSETTINGS on a real host,
// ethtool_veth_test). No speed (missing, -1), no estimate and no error; an RDMA port's
// rate comes first; garbage is counted and gives no estimate.
TEST_F(EthtoolDirTest, WithoutAnRdmaPortTheNetdevSpeedGivesTheEstimateRate) {
  WriteFile(Path("ice0"), WithoutOriginLines(Fixture("../vendors/ice_ethtool_S.txt")));
  auto tx_estimate = [&] {
    return FindSeries(store_, "fabricscope_pfc_pause_seconds_total",
                      {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "tx"}});
  };
  auto tx_frames = [&] {
    return FindSeries(store_, "fabricscope_pfc_pause_frames_total",
                      {{"netdev", "ice0"}, {"priority", "3"}, {"direction", "tx"}});
  };
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  ASSERT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();
  ASSERT_TRUE(tx_frames());
  EXPECT_FALSE(tx_estimate()) << "no speed file: no rate, no estimate";
  const size_t frames_only = c->MappedCount("ice0");

  SetSpeed("ice0", "100000\n");
  Rescan(*c);
  auto at100 = tx_estimate();
  ASSERT_TRUE(at100);
  EXPECT_EQ(at100->key->source, "pause_estimate");
  EXPECT_EQ(at100->key->name, "tx_priority_3_xoff.nic@100000Mbps");
  EXPECT_EQ(at100->key->device, "");
  EXPECT_DOUBLE_EQ(at100->state.total, tx_frames()->state.total * 65535.0 * 512 / 100e9);
  EXPECT_GT(c->MappedCount("ice0"), frames_only);

  SetSpeed("ice0", "25000\n");
  Rescan(*c);
  ASSERT_TRUE(tx_estimate());
  EXPECT_EQ(tx_estimate()->key->name, "tx_priority_3_xoff.nic@25000Mbps");
  EXPECT_FALSE(store_.Get(at100->id)->state.present);

  SetSpeed("ice0", "-1\n");  // SPEED_UNKNOWN: link down
  Rescan(*c);
  EXPECT_FALSE(tx_estimate());
  EXPECT_EQ(c->MappedCount("ice0"), frames_only);
  EXPECT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();

  // The RDMA port's rate comes first.
  SetSpeed("ice0", "25000\n");
  ports_.Upsert({"irdma0", 1, "ice0", "Ethernet", "ACTIVE", "50 Gb/sec (2X HDR)", true});
  Rescan(*c);
  ASSERT_TRUE(tx_estimate());
  EXPECT_EQ(tx_estimate()->key->name, "tx_priority_3_xoff.nic@50000Mbps");
  EXPECT_EQ(tx_estimate()->key->device, "irdma0");
  ports_.Upsert({"irdma0", 1, "ice0", "Ethernet", "ACTIVE", "50 Gb/sec (2X HDR)", false});
  Rescan(*c);  // the RDMA port is gone: the netdev's speed again
  ASSERT_TRUE(tx_estimate());
  EXPECT_EQ(tx_estimate()->key->name, "tx_priority_3_xoff.nic@25000Mbps");
  EXPECT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();

  SetSpeed("ice0", "fast\n");
  Rescan(*c);
  EXPECT_FALSE(tx_estimate());
  ASSERT_EQ(ctx_.Count(CollectorErrorCode::kParse), 1) << ctx_.ErrorsText();
  EXPECT_THAT(ctx_.errors[0].detail, HasSubstr("/class/net/ice0/speed"));
  EXPECT_EQ(ctx_.errors[0].key, "ice0");
  Tick(*c);
  EXPECT_TRUE(tx_frames()) << "the frames keep flowing";
}

TEST_F(EthtoolDirTest, ValuesMoveAndPfcEnableAddsNames) {
  const std::string base =
      "NIC statistics:\n     rx_discards_phy: 10\n     rx_global_pause: 1\n"
      "     tx_global_pause: 2\n";
  WriteFile(Path("eth0"), base);
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  EXPECT_EQ(c->MappedCount("eth0"), 3u);
  WriteFile(Path("eth0"), absl::StrReplaceAll(base, {{"10", "25"}}));
  Tick(*c);
  auto d = FindSeries(store_, "fabricscope_discards_total", {{"reason", "rx_discards_phy"}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->state.total, 25);

  // PFC enabled on priority 3: five names appear in the middle of the set.
  WriteFile(Path("eth0"),
            "NIC statistics:\n     rx_discards_phy: 30\n     rx_prio3_pause: 7\n"
            "     rx_prio3_pause_duration: 1500000\n     tx_prio3_pause: 8\n"
            "     tx_prio3_pause_duration: 2000\n     rx_prio3_pause_transition: 3\n"
            "     rx_global_pause: 1\n     tx_global_pause: 2\n");
  Tick(*c);
  EXPECT_EQ(c->MappedCount("eth0"), 8u);
  auto p3 = FindSeries(store_, "fabricscope_pfc_pause_seconds_total",
                       {{"priority", "3"}, {"direction", "rx"}});
  ASSERT_TRUE(p3);
  EXPECT_DOUBLE_EQ(p3->state.total, 1.5);
  d = FindSeries(store_, "fabricscope_discards_total", {{"reason", "rx_discards_phy"}});
  EXPECT_EQ(d->state.total, 30);  // same series, index moved, value right

  // PFC disabled again: the per-priority series are no longer present.
  WriteFile(Path("eth0"), absl::StrReplaceAll(base, {{"10", "31"}}));
  Tick(*c);
  EXPECT_FALSE(FindSeries(store_, "fabricscope_pfc_pause_seconds_total", {{"priority", "3"}}));
  EXPECT_EQ(FindSeries(store_, "fabricscope_discards_total", {{"reason", "rx_discards_phy"}})
                ->state.total,
            31);
  EXPECT_EQ(ctx_.errors.size(), 0u) << ctx_.ErrorsText();
}

TEST_F(EthtoolDirTest, GarbageAndTruncationKeepTheLastGoodValue) {
  WriteFile(Path("eth0"), "rx_discards_phy: 100\ntx_discards_phy: 5\n");
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  WriteFile(Path("eth0"), "rx_discards_phy: 1");  // truncated mid-write
  Tick(*c);
  WriteFile(Path("eth0"), "rx_discards_phy: 1\ntx_disc");  // cut in a name
  Tick(*c);
  WriteFile(Path("eth0"), "rx_discards_phy: banana\ntx_discards_phy: 5\n");
  Tick(*c);
  WriteFile(Path("eth0"), "");
  Tick(*c);
  EXPECT_EQ(ctx_.Count(CollectorErrorCode::kParse), 4) << ctx_.ErrorsText();
  auto d = FindSeries(store_, "fabricscope_discards_total", {{"reason", "rx_discards_phy"}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->state.total, 100);
  EXPECT_EQ(d->state.resets, 0u);
  EXPECT_EQ(d->state.samples, 1u);
  WriteFile(Path("eth0"), "rx_discards_phy: 140\ntx_discards_phy: 5\n");
  Tick(*c);
  d = FindSeries(store_, "fabricscope_discards_total", {{"reason", "rx_discards_phy"}});
  EXPECT_EQ(d->state.total, 140);
}

TEST_F(EthtoolDirTest, VanishedFileIsAbsentThenReturns) {
  WriteFile(Path("eth0"), "rx_discards_phy: 100\n");
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  std::filesystem::remove(Path("eth0"));
  for (int i = 0; i < 5; ++i) Tick(*c);
  EXPECT_EQ(ctx_.Count(CollectorErrorCode::kNotFound), 1) << ctx_.ErrorsText();
  EXPECT_FALSE(FindSeries(store_, "fabricscope_discards_total", {}));
  Rescan(*c);  // the listing drops it
  EXPECT_EQ(ctx_.Count(CollectorErrorCode::kNotFound), 1);
  WriteFile(Path("eth0"), "rx_discards_phy: 120\n");
  Rescan(*c);
  auto d = FindSeries(store_, "fabricscope_discards_total", {{"reason", "rx_discards_phy"}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->state.total, 120);
  EXPECT_EQ(ctx_.Count(CollectorErrorCode::kNotFound), 1);
}

TEST_F(EthtoolDirTest, NewFileIsPickedUpAtTheRescanRate) {
  auto c = Make();
  ASSERT_TRUE(c->Discover(ctx_).ok());
  Tick(*c);
  EXPECT_EQ(c->NetdevCount(), 0u);
  WriteFile(Path("eth5"), "link_down_events_phy: 2\n");
  WriteFile(Path(".eth6.tmp"), "link_down_events_phy: 2\n");  // a writer's temporary
  Tick(*c);
  EXPECT_EQ(c->NetdevCount(), 0u);  // not before the rescan interval
  Rescan(*c);
  EXPECT_EQ(c->NetdevCount(), 1u);
  auto l = FindSeries(store_, "fabricscope_link_down_events_total", {{"netdev", "eth5"}});
  ASSERT_TRUE(l);
  EXPECT_EQ(l->state.total, 2);
}

// A source with standard stats, to drive the netlink side without a NIC.
class FakeSource final : public EthtoolStatsSource {
 public:
  class Reader final : public EthtoolStatsReader {
   public:
    explicit Reader(FakeSource* s) : s_(s) {}
    absl::Status Read(bool* changed) override {
      *changed = names_ != s_->names;
      names_ = s_->names;
      values_ = s_->values;
      return absl::OkStatus();
    }
    const std::vector<std::string>& names() const override { return names_; }
    absl::Span<const uint64_t> values() const override { return values_; }

   private:
    FakeSource* s_;
    std::vector<std::string> names_;
    std::vector<uint64_t> values_;
  };
  absl::StatusOr<std::vector<std::string>> ListNetdevs() override {
    return std::vector<std::string>{"eth0"};
  }
  std::unique_ptr<EthtoolStatsReader> Open(const std::string&) override {
    return std::make_unique<Reader>(this);
  }
  bool HasStandardStats() const override { return true; }
  absl::StatusOr<PauseStats> ReadPause(const std::string&) override {
    ++pause_calls;
    return pause;
  }
  absl::StatusOr<FecStats> ReadFec(const std::string&) override {
    ++fec_calls;
    return fec;
  }
  absl::StatusOr<uint32_t> LinkSpeedMbps(const std::string&) override {
    ++speed_calls;
    return speed;
  }
  std::vector<std::string> names;
  std::vector<uint64_t> values;
  absl::StatusOr<PauseStats> pause = absl::UnimplementedError("no pause");
  absl::StatusOr<FecStats> fec = absl::UnimplementedError("no fec");
  int pause_calls = 0;
  int fec_calls = 0;
  absl::StatusOr<uint32_t> speed = absl::UnimplementedError("no link settings");
  int speed_calls = 0;
};

// An EthtoolCollector on a FakeSource (fake()) set up by the test before Start().
class EthtoolStandardStatsTest : public ::testing::Test {
 protected:
  FakeSource* fake() { return fake_; }
  void Start() {
    c_ = std::make_unique<EthtoolCollector>(&store, &ports, &clock, std::move(src_),
                                            EthtoolCollector::Options{});
    ASSERT_TRUE(c_->Discover(ctx).ok());
  }
  // `n` medium ticks of 100 ms.
  void Run(int n) {
    for (int i = 0; i < n; ++i) {
      clock.Advance(std::chrono::milliseconds(100));
      ctx.Advance();
      ASSERT_TRUE(c_->Poll(ctx).ok());
    }
  }

  Store store;
  PortInventory ports;
  FakeClock clock;
  RecordingContext ctx{&store};

 private:
  std::unique_ptr<FakeSource> src_ = std::make_unique<FakeSource>();
  FakeSource* fake_ = src_.get();
  std::unique_ptr<EthtoolCollector> c_;
};

TEST_F(EthtoolStandardStatsTest, UnsupportedIsAskedAndCountedOnce) {
  FakeSource* fake = this->fake();
  fake->names = {"peer_ifindex"};
  fake->values = {3};
  Start();
  Run(20);
  EXPECT_EQ(fake->pause_calls, 1);
  EXPECT_EQ(fake->fec_calls, 1);
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 2) << ctx.ErrorsText();
  EXPECT_EQ(ctx.errors.size(), 2u);
  EXPECT_EQ(store.Snapshot().size(), 0u);  // peer_ifindex maps to nothing
}

// The link speed is asked only of a netdev with XOFF frames to estimate from and no RDMA
// port rate, once per rescan; a source that cannot tell is counted once and not asked again.
TEST_F(EthtoolStandardStatsTest, LinkSpeedIsAskedOnlyForEstimates) {
  FakeSource* fake = this->fake();
  fake->names = {"rx_prio3_pause", "rx_prio3_pause_duration"};  // mlx5: pause time counted
  fake->values = {1, 2};
  fake->speed = 100000u;
  Start();
  Run(35);  // 3.5 s: three rescans after the first
  EXPECT_EQ(fake->speed_calls, 0);

  fake->names = {"tx_priority_3_xoff.nic"};  // ice: frames only
  fake->values = {7};
  Run(35);
  EXPECT_GE(fake->speed_calls, 3);
  EXPECT_LE(fake->speed_calls, 5);
  auto est = FindSeries(store, "fabricscope_pfc_pause_seconds_total", {{"netdev", "eth0"}});
  ASSERT_TRUE(est);
  EXPECT_EQ(est->key->name, "tx_priority_3_xoff.nic@100000Mbps");

  fake->speed = absl::UnimplementedError("no link settings");
  const int before = fake->speed_calls;
  Run(35);
  EXPECT_EQ(fake->speed_calls, before + 1);
  // Pause stats, FEC stats and the speed: each once.
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 3) << ctx.ErrorsText();
  EXPECT_EQ(ctx.errors.size(), 3u) << ctx.ErrorsText();
  EXPECT_FALSE(FindSeries(store, "fabricscope_pfc_pause_seconds_total", {{"netdev", "eth0"}}));
  EXPECT_TRUE(FindSeries(store, "fabricscope_pfc_pause_frames_total", {{"netdev", "eth0"}}));
}

TEST_F(EthtoolStandardStatsTest, NetlinkFillsWhatEthtoolNamesDoNot) {
  FakeSource* fake = this->fake();
  fake->names = {"rx_corrected_bits_phy"};
  fake->values = {77};
  fake->pause = PauseStats{.tx_frames = 759657, .rx_frames = 0};
  fake->fec = FecStats{
      .corrected = {256, 255, 1}, .uncorrectable = {145, 128, 17}, .corrected_bits = {999}};
  Start();
  Run(1);
  EXPECT_EQ(ctx.errors.size(), 0u) << ctx.ErrorsText();
  auto tx = FindSeries(store, "fabricscope_pfc_pause_frames_total",
                       {{"priority", "global"}, {"direction", "tx"}});
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->key->source, "ethtool_netlink");
  EXPECT_EQ(tx->state.total, 759657);
  auto total = FindSeries(store, "fabricscope_fec_corrected_blocks_total", {{"lane", ""}});
  ASSERT_TRUE(total);
  EXPECT_EQ(total->state.total, 256);
  auto lane1 = FindSeries(store, "fabricscope_fec_uncorrectable_blocks_total", {{"lane", "1"}});
  ASSERT_TRUE(lane1);
  EXPECT_EQ(lane1->state.total, 17);
  // Corrected bits come from the ethtool -S name, not netlink (one series).
  int bits = 0;
  for (const auto& s : store.Snapshot()) {
    if (s.signal->family->name == "fabricscope_phy_corrected_bit_errors_total" && s.state.present) {
      ++bits;
      EXPECT_EQ(s.key->name, "rx_corrected_bits_phy");
      EXPECT_EQ(s.state.total, 77);
    }
  }
  EXPECT_EQ(bits, 1);

  // Global pause enabled: ethtool names take the label sets over, netlink
  // pause is no longer asked.
  fake->names = {"rx_corrected_bits_phy", "rx_global_pause", "tx_global_pause"};
  fake->values = {78, 1, 759700};
  const int calls = fake->pause_calls;
  Run(3);
  EXPECT_EQ(fake->pause_calls, calls);
  tx = FindSeries(store, "fabricscope_pfc_pause_frames_total",
                  {{"priority", "global"}, {"direction", "tx"}});
  ASSERT_TRUE(tx);
  EXPECT_EQ(tx->key->source, "ethtool");
  int present = 0;
  for (const auto& s : store.Snapshot()) {
    present += s.state.present && s.signal->family->name == "fabricscope_pfc_pause_frames_total";
  }
  EXPECT_EQ(present, 2);
}

TEST(EthtoolStatsSourceTest, SysfsSpeedValues) {
  EXPECT_EQ(ParseSysfsSpeed("100000\n").value_or(1), 100000u);
  EXPECT_EQ(ParseSysfsSpeed("25000").value_or(1), 25000u);
  EXPECT_EQ(ParseSysfsSpeed("-1\n").value_or(1), 0u);  // SPEED_UNKNOWN
  EXPECT_EQ(ParseSysfsSpeed("0\n").value_or(1), 0u);
  for (absl::string_view bad :
       {"", "\n", "fast", "+5", "-2", "1e5", "2147483648", "12 Mb/s", "99999999999"}) {
    absl::StatusOr<uint32_t> s = ParseSysfsSpeed(bad);
    EXPECT_TRUE(IsUnparsable(s.status())) << "'" << bad << "': " << s.status();
  }
}

// The real kernel's speed attribute of loopback: the read is refused (EINVAL: no link
// settings), which the dir source reports as no speed, not as an error.
TEST(EthtoolStatsSourceTest, RealSysfsLoopbackHasNoSpeed) {
  TempDir dir;
  absl::StatusOr<uint32_t> lo = MakeDirEthtoolSource(dir.path(), "/sys")->LinkSpeedMbps("lo");
  ASSERT_TRUE(lo.ok()) << lo.status();
  EXPECT_EQ(*lo, 0u);
}

TEST(EthtoolStatsSourceTest, TrimsKernelNames) {
  char raw[32] = "tx_pause_storm_warning_events ";
  EXPECT_EQ(TrimStatName(raw, sizeof(raw)), "tx_pause_storm_warning_events");
  char full[4] = {'a', 'b', 'c', 'd'};  // no NUL within the length
  EXPECT_EQ(TrimStatName(full, sizeof(full)), "abcd");
}

}  // namespace
}  // namespace ethtool_collector_test
}  // namespace fabricscope
