#include "collectors/dcb_config_collector.h"

#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/unit/collectors/ethtool_test_util.h"
#include "tools/fabricsim/writer.h"

namespace fabricscope {
namespace dcb_config_collector_test {
namespace {

using ethtool_test::RecordingContext;
using ethtool_test::SourceDir;
using ethtool_test::TempDir;
using ethtool_test::WriteFile;

class FakeDcb final : public DcbSource {
 public:
  absl::StatusOr<uint8_t> PfcEnabled(const std::string& netdev) override {
    ++calls;
    auto it = pfc.find(netdev);
    if (it == pfc.end()) return absl::UnimplementedError("no dcbnl");
    return it->second;
  }
  std::map<std::string, uint8_t> pfc;
  int calls = 0;
};

std::map<std::string, double> Gauges(const Store& store, absl::string_view family) {
  std::map<std::string, double> out;
  for (const SeriesSnapshot& s : store.Snapshot()) {
    if (s.signal->family->name != family || !s.state.present || !s.state.has_value) continue;
    out[absl::StrJoin(s.signal->label_values, "/")] = s.state.total;
  }
  return out;
}

TEST(DcbConfigCollectorTest, EcnFixtureTreeAndLifespan) {
  // tests/fixtures/ecn: procfs's MLNX_OFED tree for eth0 (np: 1 1 0 1 1 0 1 1,
  // rp: 1 1 0 1 1 0 1 0) and mlx5_0 port 1 lifespan 10 ms.
  Store store;
  PortInventory ports;
  ports.Upsert({"mlx5_0", 1, "", "InfiniBand", "ACTIVE", "100 Gb/sec", true});
  auto dcb = std::make_unique<FakeDcb>();
  dcb->pfc["eth0"] = 0b00001000;  // PFC on priority 3
  FakeDcb* fake = dcb.get();
  DcbConfigCollector c(&store, &ports, SourceDir() + "/tests/fixtures/ecn", NetdevFilter(),
                       std::move(dcb));
  RecordingContext ctx(&store);
  ASSERT_TRUE(c.Discover(ctx).ok());
  ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_EQ(ctx.errors.size(), 0u) << ctx.ErrorsText();

  auto ecn = Gauges(store, "fabricscope_ecn_enabled");
  ASSERT_EQ(ecn.size(), 16u);
  EXPECT_EQ(ecn["eth0/0/np"], 1);
  EXPECT_EQ(ecn["eth0/2/np"], 0);
  EXPECT_EQ(ecn["eth0/5/rp"], 0);
  EXPECT_EQ(ecn["eth0/7/np"], 1);
  EXPECT_EQ(ecn["eth0/7/rp"], 0);
  auto pfc = Gauges(store, "fabricscope_pfc_enabled");
  ASSERT_EQ(pfc.size(), 8u);
  EXPECT_EQ(pfc["eth0/3"], 1);
  EXPECT_EQ(pfc["eth0/4"], 0);
  auto life = Gauges(store, "fabricscope_hw_counters_lifespan_seconds");
  ASSERT_EQ(life.size(), 1u);
  EXPECT_DOUBLE_EQ(life["mlx5_0/1"], 0.01);
  EXPECT_EQ(fake->calls, 1);
}

TEST(DcbConfigCollectorTest, ChangesUnsupportedAndGoneSources) {
  TempDir root;
  const std::string en = root.path() + "/class/net/eth7/ecn/roce_np/enable";
  std::filesystem::create_directories(en);
  for (int p = 0; p < 8; ++p) WriteFile(absl::StrCat(en, "/", p), "0\n");
  Store store;
  PortInventory ports;
  auto dcb = std::make_unique<FakeDcb>();  // eth7 has no dcbnl
  FakeDcb* fake = dcb.get();
  DcbConfigCollector c(&store, &ports, root.path(), NetdevFilter(), std::move(dcb));
  RecordingContext ctx(&store);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_EQ(fake->calls, 1);
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 1);
  EXPECT_EQ(Gauges(store, "fabricscope_ecn_enabled")["eth7/3/np"], 0);

  WriteFile(en + "/3", "1\n");    // ECN enabled on priority 3
  WriteFile(en + "/4", "yes\n");  // garbage
  ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_EQ(Gauges(store, "fabricscope_ecn_enabled")["eth7/3/np"], 1);
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kParse), 1);
  EXPECT_EQ(Gauges(store, "fabricscope_ecn_enabled").count("eth7/4/np"), 0u);  // not refreshed

  std::filesystem::remove_all(root.path() + "/class/net/eth7");
  ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_TRUE(Gauges(store, "fabricscope_ecn_enabled").empty());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 1);
}

TEST(DcbConfigCollectorTest, ParsesIeeeGetReply) {
  nl_msg* msg = nlmsg_alloc_simple(RTM_GETDCB, 0);
  dcbmsg d{};
  d.cmd = DCB_CMD_IEEE_GET;
  ASSERT_EQ(nlmsg_append(msg, &d, sizeof(d), NLMSG_ALIGNTO), 0);
  nla_put_string(msg, DCB_ATTR_IFNAME, "eth0");
  nlattr* ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
  ieee_pfc pfc{};
  pfc.pfc_cap = 8;
  pfc.pfc_en = 0b10001000;
  ASSERT_EQ(nla_put(msg, DCB_ATTR_IEEE_PFC, sizeof(pfc), &pfc), 0);
  nla_nest_end(msg, ieee);
  absl::StatusOr<uint8_t> en = ParseDcbIeeeGetReply(nlmsg_hdr(msg));
  ASSERT_TRUE(en.ok()) << en.status();
  EXPECT_EQ(*en, 0b10001000);
  nlmsg_free(msg);

  msg = nlmsg_alloc_simple(RTM_GETDCB, 0);
  ASSERT_EQ(nlmsg_append(msg, &d, sizeof(d), NLMSG_ALIGNTO), 0);
  ieee = nla_nest_start(msg, DCB_ATTR_IEEE);
  nla_nest_end(msg, ieee);
  EXPECT_TRUE(absl::IsUnimplemented(ParseDcbIeeeGetReply(nlmsg_hdr(msg)).status()));
  nlmsg_free(msg);
}

TEST(DcbConfigCollectorTest, ParsesDcbPfcShowText) {
  // iproute2's `dcb pfc show dev eth2` on an mlx5 port with PFC on 3 and 5.
  absl::StatusOr<uint8_t> en = ParseDcbPfcShowText(
      "pfc-cap 8 macsec-bypass off delay 7\n"
      "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:on 6:off 7:off\n");
  ASSERT_TRUE(en.ok()) << en.status();
  EXPECT_EQ(*en, 0b00101000);
  // `dcb -s pfc show` adds statistics lines; the order of entries is free.
  en = ParseDcbPfcShowText(
      "prio-pfc 7:on 6:off 5:off 4:off 3:off 2:off 1:off 0:on\n"
      "requests 0:12 1:0 2:0 3:0 4:0 5:0 6:0 7:0\n"
      "indications 0:3 1:0 2:0 3:0 4:0 5:0 6:0 7:0");
  ASSERT_TRUE(en.ok()) << en.status();
  EXPECT_EQ(*en, 0b10000001);
  en = ParseDcbPfcShowText("prio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:off 7:off");
  ASSERT_TRUE(en.ok()) << en.status();
  EXPECT_EQ(*en, 0);

  for (const char* bad : {
           "",
           "pfc-cap 8 macsec-bypass off delay 0\n",                          // no prio-pfc line
           "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off\n",            // 7 missing
           "prio-pfc 0:off 1:off 2:off 3:on 3:off 4:off 5:off 6:off 7:off",  // 3 twice
           "prio-pfc 0:off 1:off 2:off 3:yes 4:off 5:off 6:off 7:off",       // not on/off
           "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 8:off",        // no priority 8
           "prio-pfc 0 1 2 3 4 5 6 7",                                       // no state
       }) {
    absl::StatusOr<uint8_t> r = ParseDcbPfcShowText(bad);
    EXPECT_TRUE(absl::IsDataLoss(r.status())) << "accepted: \"" << bad << "\" -> " << r.status();
  }
}

TEST(DcbConfigCollectorTest, DirSourceReadsWhatTheSimulatorWrites) {
  // fabricsim --dcb-dir writes DIR/<netdev>; fabricscoped --dcb-dir reads it
  // for the netdevs of the RDMA ports (here eth2, PFC on priority 3).
  TempDir dir;
  WriteFile(dir.path() + "/eth2", fabricsim::DcbPfcShowText(3));
  Store store;
  PortInventory ports;
  ports.Upsert({"mlx5_0", 1, "eth2", "Ethernet", "ACTIVE", "200 Gb/sec", true});
  ports.Upsert({"mlx5_1", 1, "eth3", "Ethernet", "ACTIVE", "200 Gb/sec", true});
  TempDir sys;
  DcbConfigCollector c(&store, &ports, sys.path(), NetdevFilter(), MakeDirDcbSource(dir.path()));
  RecordingContext ctx(&store);
  ASSERT_TRUE(c.Discover(ctx).ok());
  ASSERT_TRUE(c.Poll(ctx).ok());
  auto pfc = Gauges(store, "fabricscope_pfc_enabled");
  ASSERT_EQ(pfc.size(), 8u);
  EXPECT_EQ(pfc["eth2/3"], 1);
  EXPECT_EQ(pfc["eth2/0"], 0);
  EXPECT_EQ(pfc["eth2/4"], 0);
  // eth3 has no file: not found, like a netdev the kernel does not have, once.
  ASSERT_EQ(ctx.Count(CollectorErrorCode::kNotFound), 1) << ctx.ErrorsText();
  EXPECT_EQ(ctx.errors.size(), 1u) << ctx.ErrorsText();

  // Re-read every poll: a change shows; garbage counts as a parse error and
  // leaves the series absent until the file is right again.
  WriteFile(dir.path() + "/eth2", fabricsim::DcbPfcShowText(5));
  ASSERT_TRUE(c.Poll(ctx).ok());
  pfc = Gauges(store, "fabricscope_pfc_enabled");
  EXPECT_EQ(pfc["eth2/3"], 0);
  EXPECT_EQ(pfc["eth2/5"], 1);
  WriteFile(dir.path() + "/eth2", "prio-pfc 0:maybe\n");
  ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kParse), 1) << ctx.ErrorsText();
  EXPECT_TRUE(Gauges(store, "fabricscope_pfc_enabled").empty());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kNotFound), 1);  // eth3 not asked again
}

TEST(DcbConfigCollectorTest, KernelDcbnlOnLoopbackIsUnsupported) {
  auto dcb = MakeKernelDcbSource();
  absl::StatusOr<uint8_t> r = dcb->PfcEnabled("lo");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsUnimplemented(r.status())) << r.status();
  r = dcb->PfcEnabled("fsnosuchdev0");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
}

}  // namespace
}  // namespace dcb_config_collector_test
}  // namespace fabricscope
