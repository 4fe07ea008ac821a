// PCI placement through hwloc (collectors/pci_topology.h): the relation
// classifier over PCI paths, checked against two captured machines (MI300X
// lspci -PP paths with AMD's adjacency table; an HGX H100 `nvidia-smi topo -m`
// matrix), hwloc XML exports of real machines (tests/fixtures/hwloc), and
// hwloc discovery of a fake sysfs tree built from the MI300X paths.
#include "collectors/pci_topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"

namespace fabricscope {
namespace pci_topology_test {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr PciRelation kPix = PciRelation::kPix;
constexpr PciRelation kPxb = PciRelation::kPxb;
constexpr PciRelation kPhb = PciRelation::kPhb;
constexpr PciRelation kNode = PciRelation::kNode;
constexpr PciRelation kSys = PciRelation::kSys;

std::string SourceDir() {
  const char* s = std::getenv("FABRICSCOPE_SOURCE_DIR");
  return s != nullptr ? s : ".";
}

std::string Fixture(const std::string& rel) { return SourceDir() + "/tests/fixtures/" + rel; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/pci_topology_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void WriteFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

PciPath Path(std::string host_bridge, std::vector<std::string> bridges, int numa) {
  return PciPath{std::move(host_bridge), std::move(bridges), numa};
}

PortInfo Port(std::string device, uint32_t port, std::string netdev, bool present = true) {
  PortInfo p;
  p.device = std::move(device);
  p.port = port;
  p.netdev = std::move(netdev);
  p.present = present;
  return p;
}

GpuNicAffinity Aff(std::string bus_id, int index, std::string device, PciRelation relation) {
  return GpuNicAffinity{std::move(bus_id), index, std::move(device), relation};
}

// ---------------------------------------------------------------------------
// The classifier.

TEST(ClassifyPciPair, RulesInOrder) {
  // Two sockets, two host bridges each.
  const PciPath gpu = Path("0000:00", {"0000:00:01.1", "0000:01:00.0", "0000:02:00.0"}, 0);
  // Same switch, other downstream port: one bridge unit.
  EXPECT_EQ(
      ClassifyPciPair(gpu, Path("0000:00", {"0000:00:01.1", "0000:01:00.0", "0000:02:01.0"}, 0)),
      kPix);
  // Same downstream port (two functions behind it).
  EXPECT_EQ(
      ClassifyPciPair(gpu, Path("0000:00", {"0000:00:01.1", "0000:01:00.0", "0000:02:00.0"}, 0)),
      kPix);
  // Behind a second switch under the common one: two units.
  EXPECT_EQ(ClassifyPciPair(gpu, Path("0000:00",
                                      {"0000:00:01.1", "0000:01:00.0", "0000:02:01.0",
                                       "0000:03:00.0", "0000:04:00.0"},
                                      0)),
            kPxb);
  // Same root port, directly below it (no switch) vs behind a switch: the
  // root port plus the switch.
  EXPECT_EQ(ClassifyPciPair(Path("0000:00", {"0000:00:01.1"}, 0), gpu), kPxb);
  // Same host bridge, other root port.
  EXPECT_EQ(ClassifyPciPair(gpu, Path("0000:00", {"0000:00:03.1", "0000:05:00.0"}, 0)), kPhb);
  // A function directly on the root bus.
  EXPECT_EQ(ClassifyPciPair(gpu, Path("0000:00", {}, 0)), kPhb);
  // Other host bridge, same NUMA node.
  EXPECT_EQ(ClassifyPciPair(gpu, Path("0000:18", {"0000:18:01.1"}, 0)), kNode);
  // Other host bridge, other NUMA node; or NUMA unknown.
  EXPECT_EQ(ClassifyPciPair(gpu, Path("0000:80", {"0000:80:01.1"}, 1)), kSys);
  EXPECT_EQ(ClassifyPciPair(Path("0000:00", {}, -1), Path("0000:18", {}, -1)), kSys);
  // Functions of one card directly behind a root port.
  EXPECT_EQ(
      ClassifyPciPair(Path("0000:80", {"0000:80:03.0"}, 1), Path("0000:80", {"0000:80:03.0"}, 1)),
      kPix);
}

TEST(ClassifyPciPair, IsSymmetric) {
  const std::vector<PciPath> paths = {
      Path("0000:00", {"0000:00:01.1", "0000:01:00.0", "0000:02:00.0"}, 0),
      Path("0000:00", {"0000:00:01.1", "0000:01:00.0", "0000:02:01.0", "0000:03:00.0"}, 0),
      Path("0000:00", {"0000:00:03.1"}, 0),
      Path("0000:18", {"0000:18:01.1"}, 0),
      Path("0000:80", {}, 1),
  };
  for (const PciPath& a : paths) {
    for (const PciPath& b : paths) EXPECT_EQ(ClassifyPciPair(a, b), ClassifyPciPair(b, a));
  }
}

TEST(IsGpuPciFunction, VendorsAndClasses) {
  EXPECT_TRUE(IsGpuPciFunction(0x10de, 0x2330, 0x0302));   // H100 SXM
  EXPECT_TRUE(IsGpuPciFunction(0x10de, 0x26b9, 0x0300));   // L40S (VGA class)
  EXPECT_TRUE(IsGpuPciFunction(0x1002, 0x74a1, 0x1200));   // MI300X
  EXPECT_TRUE(IsGpuPciFunction(0x1002, 0x740f, 0x0380));   // MI210
  EXPECT_TRUE(IsGpuPciFunction(0x8086, 0x0bd5, 0x0380));   // Data Center GPU Max
  EXPECT_FALSE(IsGpuPciFunction(0x1a03, 0x2000, 0x0300));  // ASPEED BMC VGA
  EXPECT_FALSE(IsGpuPciFunction(0x102b, 0x0532, 0x0300));  // Matrox BMC VGA
  EXPECT_FALSE(IsGpuPciFunction(0x1002, 0x515e, 0x0300));  // ATI ES1000 BMC VGA
  EXPECT_FALSE(IsGpuPciFunction(0x10de, 0x22a3, 0x0680));  // NVSwitch (bridge class)
  EXPECT_FALSE(IsGpuPciFunction(0x10de, 0x1aef, 0x0403));  // GPU audio function
  EXPECT_FALSE(IsGpuPciFunction(0x15b3, 0x1021, 0x0200));  // ConnectX-7
  EXPECT_STREQ(GpuVendorLabel(0x10de), "nvidia");
  EXPECT_STREQ(GpuVendorLabel(0x1002), "amd");
  EXPECT_STREQ(GpuVendorLabel(0x8086), "intel");
}

TEST(HwlocFsrootForSysfsRoot, ParentOfSys) {
  EXPECT_EQ(*HwlocFsrootForSysfsRoot("/sys"), "/");
  EXPECT_EQ(*HwlocFsrootForSysfsRoot("/sys/"), "/");
  EXPECT_EQ(*HwlocFsrootForSysfsRoot("/host/sys"), "/host");
  EXPECT_EQ(*HwlocFsrootForSysfsRoot("/tmp/x/sys//"), "/tmp/x");
  absl::StatusOr<std::string> bad = HwlocFsrootForSysfsRoot("tests/fixtures/sysfs/root");
  EXPECT_TRUE(absl::IsUnimplemented(bad.status())) << bad.status();
  EXPECT_FALSE(HwlocFsrootForSysfsRoot("/tmp/mysys").ok());
}

// ---------------------------------------------------------------------------
// MI300X: 8 GPUs + 8 ConnectX-7, `lspci -PP` bridge paths and AMD's
// adjacency table (tests/fixtures/topology/topo_mi300x_8gpu_lspci_PP.txt).

struct LspciFunction {
  std::vector<std::string> chain;  // "bb:dd.f" from the root port to the function
  bool gpu = false;
  std::string bdf() const { return chain.back(); }
  std::string bus_id() const { return "0000:" + chain.back(); }
  std::string root_bus() const { return chain.front().substr(0, 2); }
};

struct Mi300x {
  std::vector<LspciFunction> functions;  // file order: 8 GPUs, then 8 NICs
  struct Row {
    int gpu;
    int cpu;
    std::string gpu_bdf;
    std::string nic_bdf;
  };
  std::vector<Row> table;
  std::map<std::string, int> numa_of_root_bus;  // from the table's CPU column

  std::vector<LspciFunction> Nics() const {
    std::vector<LspciFunction> out;
    for (const LspciFunction& f : functions) {
      if (!f.gpu) out.push_back(f);
    }
    return out;
  }
  const LspciFunction& Find(const std::string& bdf) const {
    for (const LspciFunction& f : functions) {
      if (f.bdf() == bdf) return f;
    }
    ADD_FAILURE() << "no function " << bdf;
    return functions.front();
  }
  PciPath PathOf(const LspciFunction& f) const {
    PciPath p;
    p.host_bridge = "0000:" + f.root_bus();
    for (size_t i = 0; i + 1 < f.chain.size(); ++i) p.bridges.push_back("0000:" + f.chain[i]);
    p.numa_node = numa_of_root_bus.at(f.root_bus());
    return p;
  }
};

Mi300x LoadMi300x() {
  Mi300x m;
  const std::string text = ReadFile(Fixture("topology/topo_mi300x_8gpu_lspci_PP.txt"));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.size() > 8 && absl::ascii_isxdigit(line[0]) && line[2] == ':') {
      std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 1));
      LspciFunction f;
      f.chain = absl::StrSplit(parts[0], '/');
      f.gpu = absl::StrContains(parts[1], "Processing accelerators");
      m.functions.push_back(f);
    } else if (absl::ConsumePrefix(&line, "| ") && absl::ascii_isdigit(line[0])) {
      std::vector<std::string> cells = absl::StrSplit(line, '|');
      auto cell = [&](int i) {
        return std::string(absl::StripAsciiWhitespace(absl::StripAsciiWhitespace(cells[i])));
      };
      auto unquote = [](std::string s) { return s.substr(1, s.size() - 2); };
      m.table.push_back(
          {std::stoi(cell(0)), std::stoi(cell(1)), unquote(cell(2)), unquote(cell(3))});
    }
  }
  for (const Mi300x::Row& row : m.table) {
    for (const LspciFunction& f : m.functions) {
      if (f.bdf() == row.gpu_bdf) m.numa_of_root_bus[f.root_bus()] = row.cpu;
    }
  }
  return m;
}

TEST(Mi300xCapture, ParsedCompletely) {
  Mi300x m = LoadMi300x();
  ASSERT_EQ(m.functions.size(), 16u);
  EXPECT_EQ(m.Nics().size(), 8u);
  ASSERT_EQ(m.table.size(), 8u);
  EXPECT_EQ(m.numa_of_root_bus.size(), 8u);  // one root bus per GPU/NIC pair
  EXPECT_EQ(m.table[1].gpu_bdf, "2b:00.0");
  EXPECT_EQ(m.table[1].nic_bdf, "23:00.0");
}

// Each GPU's adjacent NIC (AMD's table) is its only closest one, PXB (they
// share the root port and first switch; the GPU sits behind a second
// switch); the other NICs on the same CPU are NODE (other host bridges),
// those on the other CPU SYS.
TEST(Mi300xCapture, AdjacencyTableFollowsFromThePaths) {
  Mi300x m = LoadMi300x();
  for (const Mi300x::Row& row : m.table) {
    const PciPath gpu = m.PathOf(m.Find(row.gpu_bdf));
    for (const LspciFunction& nic : m.Nics()) {
      const PciRelation rel = ClassifyPciPair(gpu, m.PathOf(nic));
      const int nic_cpu = m.numa_of_root_bus.at(nic.root_bus());
      if (nic.bdf() == row.nic_bdf) {
        EXPECT_EQ(rel, kPxb) << "GPU " << row.gpu << " NIC " << nic.bdf();
      } else if (nic_cpu == row.cpu) {
        EXPECT_EQ(rel, kNode) << "GPU " << row.gpu << " NIC " << nic.bdf();
      } else {
        EXPECT_EQ(rel, kSys) << "GPU " << row.gpu << " NIC " << nic.bdf();
      }
    }
  }
}

// ---------------------------------------------------------------------------
// HGX H100 `nvidia-smi topo -m` (tests/fixtures/topology/topo_hgx_h100_8gpu.txt).
// The capture has no bus ids, so the PCI paths here are a model with
// synthetic bus numbers, built from what the matrix and NVIDIA's DGX H100
// description say: each GPUi/NICi pair behind one PCIe switch (the switch
// integrated in the ConnectX-7 module) on its own root port and host bridge,
// pairs 0-3 on NUMA node 0 and 4-7 on node 1. The classifier must then print
// the matrix's GPU x NIC block exactly.
TEST(H100Capture, ModelOfThePairsReproducesTheMatrix) {
  const std::string text = ReadFile(Fixture("topology/topo_hgx_h100_8gpu.txt"));
  std::vector<std::vector<std::string>> rows;  // GPU row -> NIC0..7 cells
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "GPU")) continue;
    std::vector<std::string> cells =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    ASSERT_GE(cells.size(), 17u) << line;
    rows.push_back(std::vector<std::string>(cells.begin() + 9, cells.begin() + 17));
  }
  ASSERT_EQ(rows.size(), 8u);
  auto path = [](int pair, const std::string& downstream) {
    const std::string rb = absl::StrFormat("%02x", 0x10 + 0x20 * pair);
    const std::string up = absl::StrFormat("%02x", 0x11 + 0x20 * pair);
    const std::string dn = absl::StrFormat("%02x", 0x12 + 0x20 * pair);
    return Path("0000:" + rb,
                {"0000:" + rb + ":01.0", "0000:" + up + ":00.0", "0000:" + dn + ":" + downstream},
                pair < 4 ? 0 : 1);
  };
  for (int g = 0; g < 8; ++g) {
    for (int n = 0; n < 8; ++n) {
      EXPECT_EQ(PciRelationName(ClassifyPciPair(path(g, "00.0"), path(n, "01.0"))), rows[g][n])
          << "GPU" << g << " NIC" << n;
    }
  }
}

// ---------------------------------------------------------------------------
// hwloc XML exports of real machines (tests/fixtures/hwloc/README.md).

TEST(HwlocXml, Mirage004TeslaAndMlx4OnTwoSockets) {
  auto source = MakeHwlocPciSource("/sys", Fixture("hwloc/24em64t-2n6c2t-pci.xml"));
  absl::StatusOr<PciPlacement> p =
      source->Placement({Port("mlx4_0", 1, "ib0"), Port("mlx4_0", 2, "eth2")});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->ports, ElementsAre(PortPci{"mlx4_0", 1, "ib0", "0000:05:00.0", 0},
                                    PortPci{"mlx4_0", 2, "eth2", "0000:05:00.0", 0}));
  // Three Tesla (10de:06d2, no PCIDevice name in the export); the ES1000 BMC
  // VGA at 01:03.0 is not a GPU.
  EXPECT_THAT(p->gpus, ElementsAre(GpuInfo{"0000:06:00.0", 0, "nvidia", "0x06d2", 0},
                                   GpuInfo{"0000:11:00.0", 1, "nvidia", "0x06d2", 1},
                                   GpuInfo{"0000:14:00.0", 2, "nvidia", "0x06d2", 1}));
  // GPU0 and mlx4_0 on the same X58 IOH (host bridge 0000:[00-0f]) behind
  // different root ports (00:07.0, 00:05.0): PHB. GPUs 1, 2 on the other
  // socket's IOH: SYS.
  EXPECT_THAT(p->affinity, ElementsAre(Aff("0000:06:00.0", 0, "mlx4_0", kPhb),
                                       Aff("0000:11:00.0", 1, "mlx4_0", kSys),
                                       Aff("0000:14:00.0", 2, "mlx4_0", kSys)));
}

TEST(HwlocXml, ConanPixPhbSysAndAnAmdGpu) {
  auto source = MakeHwlocPciSource("/sys", Fixture("hwloc/32em64t-2n8c2t-pci-normalio.xml"));
  absl::StatusOr<PciPlacement> p = source->Placement({Port("mlx5_0", 1, "ib0")});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->ports, ElementsAre(PortPci{"mlx5_0", 1, "ib0", "0000:04:00.0", 1}));
  constexpr char kTesla[] = "Tesla M2075 Dual-Slot Computing Processor Module";
  // The Matrox BMC VGA (05:03.0) is not a GPU; the Radeon at 84:00.1 is.
  EXPECT_THAT(p->gpus, ElementsAre(GpuInfo{"0000:03:00.0", 0, "nvidia", kTesla, 0},
                                   GpuInfo{"0000:83:00.0", 1, "nvidia", kTesla, 1},
                                   GpuInfo{"0000:84:00.0", 2, "nvidia", kTesla, 1},
                                   GpuInfo{"0000:84:00.1", 3, "amd",
                                           "Tahiti XT [Radeon HD 7970/8970 OEM / R9 280X]", 1}));
  // What nvidia-smi would print for the NVIDIA GPUs of this tree: GPU0 on
  // socket 0 (SYS), GPU1 behind root port 80:02.0 of mlx5_0's host bridge
  // (PHB), GPU2 behind mlx5_0's own root port 80:03.0 (PIX).
  EXPECT_THAT(
      p->affinity,
      ElementsAre(Aff("0000:03:00.0", 0, "mlx5_0", kSys), Aff("0000:83:00.0", 1, "mlx5_0", kPhb),
                  Aff("0000:84:00.0", 2, "mlx5_0", kPix), Aff("0000:84:00.1", 3, "mlx5_0", kPix)));
}

TEST(HwlocXml, NoGpuHostStillPlacesPorts) {
  auto source = MakeHwlocPciSource("/sys", Fixture("hwloc/16intel64-manyVFs.xml"));
  absl::StatusOr<PciPlacement> p = source->Placement(
      {Port("usnic_0", 1, "eth4"), Port("usnic_2", 1, "eth6"), Port("usnic_1", 1, "eth5")});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->ports, ElementsAre(PortPci{"usnic_0", 1, "eth4", "0000:0b:00.0", 0},
                                    PortPci{"usnic_2", 1, "eth6", "0000:88:00.0", 1},
                                    PortPci{"usnic_1", 1, "eth5", "0000:0c:00.0", 0}));
  EXPECT_THAT(p->gpus, IsEmpty());
  EXPECT_THAT(p->affinity, IsEmpty());
}

TEST(HwlocXml, BmcVgaOnlyHostHasNoGpu) {
  auto source = MakeHwlocPciSource("/sys", Fixture("hwloc/8em64t-2p2ca2co-nonodesets.v1tov2.xml"));
  absl::StatusOr<PciPlacement> p = source->Placement({Port("mlx4_0", 1, "ib0")});
  ASSERT_TRUE(p.ok()) << p.status();
  // One NUMA node for the machine: the host bridge hangs off Machine, whose
  // nodeset is that single node.
  EXPECT_THAT(p->ports, ElementsAre(PortPci{"mlx4_0", 1, "ib0", "0000:0a:00.0", 0}));
  EXPECT_THAT(p->gpus, IsEmpty());
  EXPECT_THAT(p->affinity, IsEmpty());
}

TEST(HwlocXml, DeviceNotInTreeAndAbsentPortsAreLeftOut) {
  auto source = MakeHwlocPciSource("/sys", Fixture("hwloc/24em64t-2n6c2t-pci.xml"));
  absl::StatusOr<PciPlacement> p = source->Placement(
      {Port("mlx5_9", 1, "eth9"), Port("mlx4_0", 1, "ib0"), Port("mlx4_0", 2, "", false)});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->ports, ElementsAre(PortPci{"mlx4_0", 1, "ib0", "0000:05:00.0", 0}));
  ASSERT_EQ(p->affinity.size(), 3u);  // 3 GPUs x mlx4_0 only
  for (const GpuNicAffinity& a : p->affinity) EXPECT_EQ(a.device, "mlx4_0");
  // No ports at all: GPUs still listed, no affinity.
  p = source->Placement({});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->gpus.size(), 3u);
  EXPECT_THAT(p->affinity, IsEmpty());
}

TEST(HwlocXml, MissingFileIsNotFound) {
  auto source = MakeHwlocPciSource("/sys", "/nonexistent/topology.xml");
  absl::StatusOr<PciPlacement> p = source->Placement({Port("mlx5_0", 1, "")});
  EXPECT_TRUE(absl::IsNotFound(p.status())) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("/nonexistent/topology.xml"));
}

TEST(HwlocXml, GarbageIsInvalidArgument) {
  TempDir dir;
  for (const std::string& content :
       {std::string("not xml at all\n"), std::string(""),
        std::string("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=")}) {
    const std::string path = dir.path() + "/bad.xml";
    WriteFile(path, content);
    auto source = MakeHwlocPciSource("/sys", path);
    absl::StatusOr<PciPlacement> p = source->Placement({Port("mlx5_0", 1, "")});
    EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status() << " for " << content;
  }
  auto source = MakeHwlocPciSource("/sys", dir.path());  // a directory
  EXPECT_TRUE(absl::IsInvalidArgument(source->Placement({}).status()));
}

TEST(HwlocXml, ReloadsWhenTheFileChanges) {
  TempDir dir;
  const std::string path = dir.path() + "/topo.xml";
  WriteFile(path, ReadFile(Fixture("hwloc/24em64t-2n6c2t-pci.xml")));
  auto source = MakeHwlocPciSource("/sys", path);
  absl::StatusOr<PciPlacement> p = source->Placement({Port("mlx4_0", 1, "ib0")});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->gpus.size(), 3u);
  // Another machine in its place (size and mtime change): reloaded.
  WriteFile(path, ReadFile(Fixture("hwloc/16intel64-manyVFs.xml")));
  p = source->Placement({Port("mlx4_0", 1, "ib0"), Port("usnic_0", 1, "eth4")});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->gpus, IsEmpty());
  EXPECT_THAT(p->ports, ElementsAre(PortPci{"usnic_0", 1, "eth4", "0000:0b:00.0", 0}));
  // Replaced by garbage: an error, not the stale placement.
  WriteFile(path, "garbage");
  EXPECT_FALSE(source->Placement({Port("usnic_0", 1, "eth4")}).ok());
  // Removed: NotFound.
  fs::remove(path);
  EXPECT_TRUE(absl::IsNotFound(source->Placement({}).status()));
}

// ---------------------------------------------------------------------------
// Discovery: hwloc's Linux backend over a fake sysfs tree built from the
// MI300X lspci -PP paths (sys/devices/pci0000:BB/..., sys/bus/pci/devices
// links, config space with bridge bus numbers, class/vendor/device/numa_node/
// local_cpus, sys/class/infiniband/mlx5_N links, 8 CPUs on 2 packages and 2
// NUMA nodes).

class FakeSysfs {
 public:
  // NICs named mlx5_0..7 in lspci order; `skip_rdma` leaves one out of
  // class/infiniband.
  FakeSysfs(const Mi300x& m, const std::string& root, const std::string& skip_rdma = "")
      : root_(root) {
    std::map<std::string, std::vector<std::string>> chain_of;  // bdf -> chain to it
    std::set<std::string> bridges;
    for (const LspciFunction& f : m.functions) {
      for (size_t i = 0; i < f.chain.size(); ++i) {
        chain_of[f.chain[i]] = std::vector<std::string>(f.chain.begin(), f.chain.begin() + i + 1);
        if (i + 1 < f.chain.size()) bridges.insert(f.chain[i]);
      }
    }
    for (const auto& [bdf, chain] : chain_of) {
      const std::string rb = chain.front().substr(0, 2);
      const int numa = m.numa_of_root_bus.at(rb);
      fs::path dir = fs::path(root_) / "sys/devices" / ("pci0000:" + rb);
      for (const std::string& c : chain) dir /= "0000:" + c;
      std::string config(64, '\0');
      std::string cls, vendor, device;
      if (bridges.contains(bdf)) {
        cls = "0x060400";
        vendor = "0x1022";
        device = "0x14ab";
        config[0x0e] = 1;  // header type: PCI-to-PCI bridge
        config[0x18] = static_cast<char>(Bus(bdf));
        int secondary = 0xff, subordinate = 0;
        for (const LspciFunction& f : m.functions) {
          auto it = std::find(f.chain.begin(), f.chain.end(), bdf);
          if (it == f.chain.end()) continue;
          secondary = std::min(secondary, Bus(*(it + 1)));
          for (auto below = it + 1; below != f.chain.end(); ++below) {
            subordinate = std::max(subordinate, Bus(*below));
          }
        }
        config[0x19] = static_cast<char>(secondary);
        config[0x1a] = static_cast<char>(subordinate);
      } else if (m.Find(bdf).gpu) {
        cls = "0x120000";
        vendor = "0x1002";
        device = "0x74a1";
      } else {
        cls = "0x020000";
        vendor = "0x15b3";
        device = "0x1021";
      }
      WriteFile(dir / "class", cls + "\n");
      WriteFile(dir / "vendor", vendor + "\n");
      WriteFile(dir / "device", device + "\n");
      WriteFile(dir / "numa_node", absl::StrCat(numa, "\n"));
      WriteFile(dir / "local_cpus", numa == 0 ? "0f\n" : "f0\n");
      WriteFile(dir / "config", config);
      Link(dir, fs::path(root_) / "sys/bus/pci/devices" / ("0000:" + bdf));
    }
    std::vector<LspciFunction> nics = m.Nics();
    for (size_t i = 0; i < nics.size(); ++i) {
      const std::string name = absl::StrCat("mlx5_", i);
      fs::path dir = fs::path(root_) / "sys/devices" / ("pci0000:" + nics[i].root_bus());
      for (const std::string& c : nics[i].chain) dir /= "0000:" + c;
      dir /= "infiniband/" + name;
      fs::create_directories(dir);
      rdma_dirs_[name] = dir;
      if (name != skip_rdma) AddRdma(name);
    }
    for (int cpu = 0; cpu < 8; ++cpu) {
      const int pkg = cpu < 4 ? 0 : 1;
      const fs::path t =
          fs::path(root_) / absl::StrCat("sys/devices/system/cpu/cpu", cpu, "/topology");
      WriteFile(t / "physical_package_id", absl::StrCat(pkg, "\n"));
      WriteFile(t / "core_id", absl::StrCat(cpu % 4, "\n"));
      WriteFile(t / "thread_siblings", absl::StrFormat("%02x\n", 1 << cpu));
      WriteFile(t / "thread_siblings_list", absl::StrCat(cpu, "\n"));
      WriteFile(t / "core_siblings", pkg == 0 ? "0f\n" : "f0\n");
      WriteFile(t / "core_siblings_list", pkg == 0 ? "0-3\n" : "4-7\n");
      WriteFile(fs::path(root_) / absl::StrCat("sys/devices/system/cpu/cpu", cpu, "/online"),
                "1\n");
      fs::create_directories(fs::path(root_) /
                             absl::StrCat("sys/devices/system/node/node", pkg, "/cpu", cpu));
    }
    for (int node = 0; node < 2; ++node) {
      const fs::path n = fs::path(root_) / absl::StrCat("sys/devices/system/node/node", node);
      WriteFile(n / "cpumap", node == 0 ? "0f\n" : "f0\n");
      WriteFile(n / "cpulist", node == 0 ? "0-3\n" : "4-7\n");
      WriteFile(n / "meminfo", absl::StrCat("Node ", node, " MemTotal:       1048576 kB\n"));
    }
    for (const char* f : {"online", "possible"}) {
      WriteFile(fs::path(root_) / "sys/devices/system/node" / f, "0-1\n");
    }
    for (const char* f : {"online", "possible", "present"}) {
      WriteFile(fs::path(root_) / "sys/devices/system/cpu" / f, "0-7\n");
    }
  }

  void AddRdma(const std::string& name) {
    Link(rdma_dirs_.at(name), fs::path(root_) / "sys/class/infiniband" / name);
  }
  std::string sysfs_root() const { return root_ + "/sys"; }

 private:
  static int Bus(const std::string& bdf) { return std::stoi(bdf.substr(0, 2), nullptr, 16); }
  static void Link(const fs::path& target, const fs::path& link) {
    fs::create_directories(link.parent_path());
    fs::create_directory_symlink(fs::relative(target, link.parent_path()), link);
  }

  std::string root_;
  std::map<std::string, fs::path> rdma_dirs_;
};

// The placement the model predicts for the fake tree: GPUs in bus order, NIC
// mlx5_i = i-th NIC line, relations from ClassifyPciPair over the lspci paths.
PciPlacement ExpectedMi300x(const Mi300x& m, const std::vector<PortInfo>& ports,
                            const std::string& model) {
  PciPlacement out;
  std::vector<LspciFunction> nics = m.Nics();
  std::vector<LspciFunction> gpus;
  for (const LspciFunction& f : m.functions) {
    if (f.gpu) gpus.push_back(f);
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const auto& a, const auto& b) { return a.bus_id() < b.bus_id(); });
  std::vector<std::string> devices;
  for (const PortInfo& port : ports) {
    const int i = port.device.back() - '0';
    out.ports.push_back(PortPci{port.device, port.port, port.netdev, nics[i].bus_id(),
                                m.numa_of_root_bus.at(nics[i].root_bus())});
    devices.push_back(port.device);
  }
  for (size_t g = 0; g < gpus.size(); ++g) {
    out.gpus.push_back(GpuInfo{gpus[g].bus_id(), static_cast<int>(g), "amd", model,
                               m.numa_of_root_bus.at(gpus[g].root_bus())});
    for (const std::string& d : devices) {
      out.affinity.push_back(
          Aff(gpus[g].bus_id(), static_cast<int>(g), d,
              ClassifyPciPair(m.PathOf(gpus[g]), m.PathOf(nics[d.back() - '0']))));
    }
  }
  return out;
}

std::vector<PortInfo> Mi300xPorts(int count) {
  static const char* kNetdevs[] = {"enp9s0np0",   "enp35s0np0",  "enp83s0np0",  "enp105s0np0",
                                   "enp143s0np0", "enp156s0np0", "enp205s0np0", "enp241s0np0"};
  std::vector<PortInfo> ports;
  for (int i = 0; i < count; ++i) ports.push_back(Port(absl::StrCat("mlx5_", i), 1, kNetdevs[i]));
  return ports;
}

TEST(HwlocDiscovery, FakeSysfsTreeOfTheMi300x) {
  Mi300x m = LoadMi300x();
  TempDir dir;
  FakeSysfs tree(m, dir.path());
  auto source = MakeHwlocPciSource(tree.sysfs_root(), "");
  const std::vector<PortInfo> ports = Mi300xPorts(8);
  absl::StatusOr<PciPlacement> p = source->Placement(ports);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->gpus.size(), 8u);
  // hwloc's Linux backend names no PCI device: the model is the device id.
  const PciPlacement expected = ExpectedMi300x(m, ports, "0x74a1");
  EXPECT_EQ(p->ports, expected.ports);
  EXPECT_EQ(p->gpus, expected.gpus);
  EXPECT_EQ(p->affinity, expected.affinity);
  // Spot checks of the expectation itself (AMD's table): GPU 1 at 2b:00.0 is
  // PXB to mlx5_1 (23:00.0), NODE to mlx5_0, SYS to mlx5_5.
  EXPECT_EQ(p->affinity[8 + 1], Aff("0000:2b:00.0", 1, "mlx5_1", kPxb));
  EXPECT_EQ(p->affinity[8 + 0], Aff("0000:2b:00.0", 1, "mlx5_0", kNode));
  EXPECT_EQ(p->affinity[8 + 5], Aff("0000:2b:00.0", 1, "mlx5_5", kSys));
  // HWLOC_FSROOT was restored.
  EXPECT_EQ(std::getenv("HWLOC_FSROOT"), nullptr);
}

TEST(HwlocDiscovery, RdmaDeviceAppearingLaterIsFoundOnRediscovery) {
  Mi300x m = LoadMi300x();
  TempDir dir;
  FakeSysfs tree(m, dir.path(), /*skip_rdma=*/"mlx5_7");
  HwlocPciSourceOptions slow{
      .sysfs_root = tree.sysfs_root(), .hwloc_xml = "", .rediscover_interval = absl::Hours(1)};
  HwlocPciSourceOptions fast = slow;
  fast.rediscover_interval = absl::ZeroDuration();
  auto slow_source = MakeHwlocPciSource(slow);
  auto fast_source = MakeHwlocPciSource(fast);
  const std::vector<PortInfo> ports = Mi300xPorts(8);
  ASSERT_EQ(slow_source->Placement(ports)->ports.size(), 7u);
  ASSERT_EQ(fast_source->Placement(ports)->ports.size(), 7u);
  tree.AddRdma("mlx5_7");
  EXPECT_EQ(slow_source->Placement(ports)->ports.size(), 7u);  // rate-limited
  absl::StatusOr<PciPlacement> p = fast_source->Placement(ports);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ports, ExpectedMi300x(m, ports, "0x74a1").ports);
}

TEST(HwlocDiscovery, SysfsRootNotNamedSysIsUnimplemented) {
  auto source = MakeHwlocPciSource(SourceDir() + "/tests/fixtures/sysfs/root", "");
  absl::StatusOr<PciPlacement> p = source->Placement({Port("mlx5_0", 1, "")});
  EXPECT_TRUE(absl::IsUnimplemented(p.status())) << p.status();
}

TEST(HwlocDiscovery, EmptyRootDiscoversNoDevices) {
  TempDir dir;
  fs::create_directories(dir.path() + "/sys");
  auto source = MakeHwlocPciSource(dir.path() + "/sys", "");
  absl::StatusOr<PciPlacement> p = source->Placement({Port("mlx5_0", 1, "")});
  // hwloc falls back to a minimal machine: nothing placed, no error.
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->ports, IsEmpty());
  EXPECT_THAT(p->gpus, IsEmpty());
}

// The default path: this host's /sys (no privileges needed). What it finds
// depends on the host; it must load and give a consistent placement.
TEST(HwlocDiscovery, ThisHost) {
  auto source = MakeHwlocPciSource("/sys", "");
  absl::StatusOr<PciPlacement> p = source->Placement({Port("no_such_rdma_dev", 1, "")});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->ports, IsEmpty());
  EXPECT_THAT(p->affinity, IsEmpty());
  for (size_t i = 0; i < p->gpus.size(); ++i) EXPECT_EQ(p->gpus[i].index, static_cast<int>(i));
}

}  // namespace
}  // namespace pci_topology_test
}  // namespace fabricscope
