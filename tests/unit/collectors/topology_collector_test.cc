// The topology collector over fake sources, and the topology file source.
#include "collectors/topology_collector.h"

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "collectors/topology_file.h"
#include "core/metrics.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tests/unit/collectors/ethtool_test_util.h"

namespace fabricscope {
namespace topology_collector_test {
namespace {

using ethtool_test::RecordingContext;
using ethtool_test::TempDir;
using ethtool_test::WriteFile;

// --- the file format ---

TEST(TopologyFileTest, ParsesKeysQuotesCommentsAndReportsBadLinesByNumber) {
  ParsedTopologyFile f = ParseTopologyFile(
      "# cabling export\n"
      "\n"
      "host=gpu-17 netdev=ens1f0np0 system=leaf07 port=Ethernet1/12  # uplink A\n"
      "host=gpu-17 port_guid=0x1070fd0300b2c3d4 system=\"QM9700 spine02\" port=17 "
      "chassis=0x98039b0300a1b2c3 description=\"say \\\"hi\\\" \\\\ back\"\n"
      "host=gpu-17 netdev=eth1 sytem=typo\n"
      "host=gpu-17 netdev=eth1 port_guid=0x1 system=x\n"
      "netdev=eth1 system=x\n"
      "host=gpu-17 netdev=eth1 port=3\n"
      "host=gpu-17 netdev=eth1 system=\"unterminated\n"
      "host=gpu-17 netdev=eth1 system\n"
      "host=gpu-17 port_guid=0xZZ system=x\n");
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].host, "gpu-17");
  EXPECT_EQ(f.entries[0].netdev, "ens1f0np0");
  EXPECT_EQ(f.entries[0].partner.system_name, "leaf07");
  EXPECT_EQ(f.entries[0].partner.port_id, "Ethernet1/12");
  EXPECT_EQ(f.entries[0].partner.source, "file");
  EXPECT_EQ(f.entries[0].line, 3);
  EXPECT_EQ(f.entries[1].port_guid, 0x1070fd0300b2c3d4u);
  EXPECT_EQ(f.entries[1].partner.system_name, "QM9700 spine02");
  EXPECT_EQ(f.entries[1].partner.chassis_id, "0x98039b0300a1b2c3");
  EXPECT_EQ(f.entries[1].partner.port_description, "say \"hi\" \\ back");
  ASSERT_EQ(f.errors.size(), 7u);
  EXPECT_EQ(f.errors[0], "line 5: unknown key \"sytem\"");
  EXPECT_EQ(f.errors[1], "line 6: give exactly one of netdev and port_guid");
  EXPECT_EQ(f.errors[2], "line 7: host is missing");
  EXPECT_EQ(f.errors[3], "line 8: the partner needs system or chassis");
  EXPECT_EQ(f.errors[4], "line 9: unterminated quote in the value of system");
  EXPECT_EQ(f.errors[5], "line 10: expected key=value at \"system\"");
  EXPECT_NE(f.errors[6].find("line 11: port_guid: not a port GUID"), std::string::npos);
}

TEST(TopologyFileTest, PortGuidForms) {
  EXPECT_EQ(*ParsePortGuid("0x1070FD0300B2C3D4"), 0x1070fd0300b2c3d4u);
  EXPECT_EQ(*ParsePortGuid("1070:fd03:00b2:c3d4"), 0x1070fd0300b2c3d4u);
  EXPECT_EQ(*ParsePortGuid("fe80:0000:0000:0000:1070:fd03:00b2:c3d4"), 0x1070fd0300b2c3d4u);
  EXPECT_FALSE(ParsePortGuid("0x").ok());
  EXPECT_FALSE(ParsePortGuid("0x1070fd0300b2c3d4ff").ok());
  EXPECT_FALSE(ParsePortGuid("1070:fd03:b2:c3d4").ok());
  EXPECT_FALSE(ParsePortGuid("-0x1").ok());
}

TEST(TopologyFileTest, HostMatching) {
  EXPECT_TRUE(TopologyHostMatches("*", "anything"));
  EXPECT_TRUE(TopologyHostMatches("gpu-17", "GPU-17"));
  EXPECT_TRUE(TopologyHostMatches("gpu-17", "gpu-17.dc1.example"));
  EXPECT_TRUE(TopologyHostMatches("gpu-17.dc1.example", "gpu-17"));
  EXPECT_FALSE(TopologyHostMatches("gpu-17.dc1.example", "gpu-17.dc2.example"));
  EXPECT_FALSE(TopologyHostMatches("gpu-1", "gpu-17"));
}

// --- the collector ---

class FakePartners final : public LinkPartnerSource {
 public:
  explicit FakePartners(std::string name) : name_(std::move(name)) {}
  absl::string_view name() const override { return name_; }
  absl::StatusOr<std::vector<LinkPartner>> Partners(
      const std::vector<PortInfo>& ports, const std::vector<std::string>& extra) override {
    ++calls;
    seen_extra = extra;
    if (!status.ok()) return status;
    return partners;
  }
  std::string name_;
  absl::Status status;
  std::vector<LinkPartner> partners;
  std::vector<std::string> seen_extra;
  int calls = 0;
};

class FakePci final : public PciTopologySource {
 public:
  absl::StatusOr<PciPlacement> Placement(const std::vector<PortInfo>& ports) override {
    if (!status.ok()) return status;
    return placement;
  }
  absl::Status status;
  PciPlacement placement;
};

LinkPartner Partner(std::string netdev, std::string system, std::string port,
                    std::string device = "", uint32_t dev_port = 0) {
  LinkPartner p;
  p.device = std::move(device);
  p.port = dev_port;
  p.netdev = std::move(netdev);
  p.system_name = std::move(system);
  p.port_id = std::move(port);
  return p;
}

class TopologyCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path() + "/class/net/veth-a");
    std::filesystem::create_directories(dir_.path() + "/class/net/docker0");
    ports_.Upsert({.device = "mlx5_0", .port = 1, .netdev = "eth2", .link_layer = "Ethernet"});
    ports_.Upsert({.device = "mlx5_1", .port = 1, .netdev = "", .link_layer = "InfiniBand"});
  }

  std::unique_ptr<TopologyCollector> Make(std::string include = "veth-.*") {
    auto ib = std::make_unique<FakePartners>("ib_mad");
    auto lldp = std::make_unique<FakePartners>("lldp");
    auto file = std::make_unique<FakePartners>("file");
    auto pci = std::make_unique<FakePci>();
    ib_ = ib.get();
    lldp_ = lldp.get();
    file_ = file.get();
    pci_ = pci.get();
    TopologySources sources;
    sources.partners.push_back(std::move(ib));
    sources.partners.push_back(std::move(lldp));
    sources.partners.push_back(std::move(file));
    sources.pci = std::move(pci);
    return std::make_unique<TopologyCollector>(&ports_, &metrics_, dir_.path(),
                                               *NetdevFilter::Compile(include), std::move(sources));
  }

  TempDir dir_;
  Store store_;
  PortInventory ports_;
  MetricsRegistry metrics_;
  FakePartners* ib_ = nullptr;
  FakePartners* lldp_ = nullptr;
  FakePartners* file_ = nullptr;
  FakePci* pci_ = nullptr;
};

TEST_F(TopologyCollectorTest, MergesSourcesByPrecedenceAndDropsUnwatchedPorts) {
  auto c = Make();
  RecordingContext ctx(&store_);
  ib_->partners = {Partner("", "spine02 QM9700", "17", "mlx5_1", 1)};
  lldp_->partners = {Partner("eth2", "leaf07", "Ethernet1/12"), Partner("veth-a", "peer", "veth-b"),
                     Partner("docker0", "nobody", "x"), Partner("eth9", "nobody", "x")};
  file_->partners = {Partner("eth2", "leaf-from-file", "Ethernet9/9"),
                     Partner("", "ib-from-file", "3", "mlx5_1", 1)};
  ASSERT_TRUE(c->Poll(ctx).ok());
  EXPECT_EQ(lldp_->seen_extra, std::vector<std::string>{"veth-a"});
  const HostTopology t = ports_.Topology();
  ASSERT_EQ(t.partners.size(), 3u);
  // Sorted by (device, port, netdev): the extra interface (no device) first.
  EXPECT_EQ(t.partners[0].netdev, "veth-a");
  EXPECT_EQ(t.partners[0].device, "");
  EXPECT_EQ(t.partners[0].source, "lldp");
  EXPECT_EQ(t.partners[1].device, "mlx5_0");
  EXPECT_EQ(t.partners[1].port, 1u);
  EXPECT_EQ(t.partners[1].netdev, "eth2");
  EXPECT_EQ(t.partners[1].system_name, "leaf07");  // lldp beats the file
  EXPECT_EQ(t.partners[1].source, "lldp");
  EXPECT_EQ(t.partners[2].device, "mlx5_1");
  EXPECT_EQ(t.partners[2].system_name, "spine02 QM9700");  // ib_mad beats the file
  EXPECT_EQ(t.partners[2].source, "ib_mad");
  EXPECT_TRUE(ctx.errors.empty()) << ctx.ErrorsText();
  ASSERT_NE(t.FindPartner("mlx5_0", 1, ""), nullptr);
  EXPECT_EQ(t.FindPartner("", 0, "eth2")->system_name, "leaf07");
}

TEST_F(TopologyCollectorTest, APartnerThatChangesOrGoesIsReplacedAndAFailingSourceFallsBack) {
  auto c = Make();
  RecordingContext ctx(&store_);
  lldp_->partners = {Partner("eth2", "leaf07", "Ethernet1/12")};
  ASSERT_TRUE(c->Poll(ctx).ok());
  lldp_->partners = {Partner("eth2", "leaf08", "Ethernet1/12")};
  ASSERT_TRUE(c->Poll(ctx).ok());
  ASSERT_EQ(ports_.Topology().partners.size(), 1u);
  EXPECT_EQ(ports_.Topology().partners[0].system_name, "leaf08");
  lldp_->partners.clear();
  ASSERT_TRUE(c->Poll(ctx).ok());
  EXPECT_TRUE(ports_.Topology().partners.empty());
  // LLDP down: the file's partner shows, named by source.
  lldp_->status = absl::UnimplementedError("lldpd not reachable");
  file_->partners = {Partner("eth2", "leaf-from-file", "Ethernet9/9")};
  ASSERT_TRUE(c->Poll(ctx).ok());
  ASSERT_EQ(ports_.Topology().partners.size(), 1u);
  EXPECT_EQ(ports_.Topology().partners[0].source, "file");
}

TEST_F(TopologyCollectorTest, ASourceErrorIsReportedOncePerChangeNotEveryTick) {
  auto c = Make();
  RecordingContext ctx(&store_);
  lldp_->status = absl::UnimplementedError("lldpd not reachable at /run/lldpd.socket");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c->Poll(ctx).ok());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 1) << ctx.ErrorsText();
  EXPECT_EQ(lldp_->calls, 5);  // still asked: lldpd may start later
  lldp_->status = absl::OkStatus();
  ASSERT_TRUE(c->Poll(ctx).ok());
  lldp_->status = absl::UnimplementedError("lldpd not reachable at /run/lldpd.socket");
  ASSERT_TRUE(c->Poll(ctx).ok());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kUnsupported), 2) << ctx.ErrorsText();
  EXPECT_EQ(ctx.errors.back().key, "topology/lldp");
}

TEST_F(TopologyCollectorTest, PlacementIsStoredAndGoesWhileThePciSourceFails) {
  auto c = Make();
  RecordingContext ctx(&store_);
  pci_->placement.ports = {{.device = "mlx5_0",
                            .port = 1,
                            .netdev = "eth2",
                            .pci_address = "0000:1b:00.0",
                            .numa_node = 0}};
  pci_->placement.gpus = {{.bus_id = "0000:18:00.0",
                           .index = 0,
                           .vendor = "nvidia",
                           .model = "0x2330",
                           .numa_node = 0}};
  pci_->placement.affinity = {{.gpu_bus_id = "0000:18:00.0",
                               .gpu_index = 0,
                               .device = "mlx5_0",
                               .relation = PciRelation::kPix}};
  ASSERT_TRUE(c->Poll(ctx).ok());
  const HostTopology t = ports_.Topology();
  ASSERT_EQ(t.affinity.size(), 1u);
  EXPECT_EQ(t.affinity[0].relation, PciRelation::kPix);
  EXPECT_EQ(t.gpus[0].bus_id, "0000:18:00.0");
  ASSERT_NE(t.FindGpu("18:00.0"), nullptr);
  ASSERT_NE(t.FindGpu("00000000:18:00.0"), nullptr);
  ASSERT_NE(t.FindGpu("0"), nullptr);
  EXPECT_EQ(t.FindGpu("1"), nullptr);
  // The source fails (a garbage XML): reported once, nothing stale stays.
  pci_->status = absl::DataLossError("bad xml");
  ASSERT_TRUE(c->Poll(ctx).ok());
  ASSERT_TRUE(c->Poll(ctx).ok());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kParse), 1) << ctx.ErrorsText();
  EXPECT_TRUE(ports_.Topology().gpus.empty());
  EXPECT_TRUE(ports_.Topology().affinity.empty());
}

// The real file source under the collector: keyed by netdev and by port GUID
// (read from the port's GID 0), re-read when the file changes, bad lines once.
TEST_F(TopologyCollectorTest, TopologyFileSourceReloadsOnChange) {
  const std::string gid_dir = dir_.path() + "/class/infiniband/mlx5_1/ports/1/gids";
  std::filesystem::create_directories(gid_dir);
  WriteFile(gid_dir + "/0", "fe80:0000:0000:0000:1070:fd03:00b2:c3d4\n");
  const std::string path = dir_.path() + "/topology";
  TopologySources sources;
  sources.partners.push_back(std::make_unique<TopologyFileSource>(path, dir_.path(), "gpu-17"));
  TopologyCollector c(&ports_, &metrics_, dir_.path(), NetdevFilter(), std::move(sources));
  RecordingContext ctx(&store_);
  ASSERT_TRUE(c.Poll(ctx).ok());
  ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kNotFound), 1) << ctx.ErrorsText();
  WriteFile(path,
            "host=gpu-17 netdev=eth2 system=leaf07 port=Ethernet1/12\n"
            "host=gpu-17 port_guid=1070:fd03:00b2:c3d4 system=spine02 port=17\n"
            "host=gpu-18 netdev=eth2 system=wrong-host port=1\n"
            "host=gpu-17 netdev=eth2 bogus=1\n");
  ASSERT_TRUE(c.Poll(ctx).ok());
  ASSERT_TRUE(c.Poll(ctx).ok());
  HostTopology t = ports_.Topology();
  ASSERT_EQ(t.partners.size(), 2u);
  EXPECT_EQ(t.partners[0].device, "mlx5_0");
  EXPECT_EQ(t.partners[0].system_name, "leaf07");
  EXPECT_EQ(t.partners[1].device, "mlx5_1");
  EXPECT_EQ(t.partners[1].port_id, "17");
  EXPECT_EQ(t.partners[1].source, "file");
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kParse), 1) << ctx.ErrorsText();
  // Rewritten (a size change is enough to notice even within one mtime tick).
  WriteFile(path, "host=*  netdev=eth2 system=leaf09 port=Ethernet2/1 chassis=c0:ff:ee:00:00:01\n");
  ASSERT_TRUE(c.Poll(ctx).ok());
  t = ports_.Topology();
  ASSERT_EQ(t.partners.size(), 1u);
  EXPECT_EQ(t.partners[0].system_name, "leaf09");
  EXPECT_EQ(t.partners[0].chassis_id, "c0:ff:ee:00:00:01");
  std::filesystem::remove(path);
  ASSERT_TRUE(c.Poll(ctx).ok());
  EXPECT_TRUE(ports_.Topology().partners.empty());
  EXPECT_EQ(ctx.Count(CollectorErrorCode::kNotFound), 2) << ctx.ErrorsText();
}

}  // namespace
}  // namespace topology_collector_test
}  // namespace fabricscope
