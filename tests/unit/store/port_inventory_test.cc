#include "store/port_inventory.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

TEST(PortInventoryTest, UpsertReplacesInPlace) {
  PortInventory inv;
  EXPECT_TRUE(inv.List().empty());
  inv.Upsert({"mlx5_0", 1, "eth2", "Ethernet", "ACTIVE", "100 Gb/sec", true});
  inv.Upsert({"mlx5_1", 1, "eth3", "Ethernet", "ACTIVE", "100 Gb/sec", true});
  inv.Upsert({"mlx5_0", 1, "eth2", "Ethernet", "DOWN", "100 Gb/sec", true});
  std::vector<PortInfo> ports = inv.List();
  ASSERT_EQ(ports.size(), 2u);
  // First-insertion order; the replaced record keeps its position.
  EXPECT_EQ(ports[0].device, "mlx5_0");
  EXPECT_EQ(ports[0].state, "DOWN");
  EXPECT_EQ(ports[1].device, "mlx5_1");
}

TEST(PortInventoryTest, KeyIsDeviceAndPort) {
  PortInventory inv;
  inv.Upsert({"mlx4_0", 1, "eth0", "Ethernet", "ACTIVE", "", true});
  inv.Upsert({"mlx4_0", 2, "eth1", "Ethernet", "ACTIVE", "", true});
  inv.Upsert({"mlx4_0", 2, "eth1", "Ethernet", "ACTIVE", "", false});
  std::vector<PortInfo> ports = inv.List();
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[1].port, 2u);
  EXPECT_FALSE(ports[1].present);  // vanished ports stay, marked absent
}

TEST(PortInventoryTest, ConcurrentWritersAndReaders) {
  PortInventory inv;
  constexpr int kWriters = 4;
  constexpr uint32_t kPorts = 50;
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&inv, w] {
      for (uint32_t p = 1; p <= kPorts; ++p) {
        inv.Upsert({"dev" + std::to_string(w), p, "", "Ethernet", "ACTIVE", "", true});
      }
    });
  }
  threads.emplace_back([&inv] {
    for (int i = 0; i < 200; ++i) EXPECT_LE(inv.List().size(), kWriters * kPorts);
  });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(inv.List().size(), kWriters * kPorts);
}

TEST(PortInventoryTest, HwCountersClaimsBumpTheGenerationOnChangeOnly) {
  PortInventory inv;
  const uint64_t g0 = inv.HwCountersClaimsGeneration();
  EXPECT_FALSE(inv.HwCountersClaimed("mlx5_0", 1));
  inv.SetHwCountersClaim("mlx5_0", 1, true);
  EXPECT_TRUE(inv.HwCountersClaimed("mlx5_0", 1));
  EXPECT_FALSE(inv.HwCountersClaimed("mlx5_0", 2));
  const uint64_t g1 = inv.HwCountersClaimsGeneration();
  EXPECT_GT(g1, g0);
  inv.SetHwCountersClaim("mlx5_0", 1, true);  // no change
  EXPECT_EQ(inv.HwCountersClaimsGeneration(), g1);
  inv.SetHwCountersClaim("mlx5_0", 1, false);
  EXPECT_FALSE(inv.HwCountersClaimed("mlx5_0", 1));
  EXPECT_GT(inv.HwCountersClaimsGeneration(), g1);
}

}  // namespace
}  // namespace fabricscope
