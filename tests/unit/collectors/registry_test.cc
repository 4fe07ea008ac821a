#include "collectors/registry.h"

#include <string>
#include <vector>

#include "core/clock.h"
#include "core/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

class NullCollector final : public Collector {
 public:
  absl::string_view name() const override { return "null"; }
  std::vector<Tier> Tiers() const override { return {Tier::kHot}; }
  absl::Status Discover(PollContext&) override { return absl::OkStatus(); }
  absl::Status Poll(PollContext&) override { return absl::OkStatus(); }
};

CollectorFactory NullFactory() {
  return [](const CollectorContext&) -> absl::StatusOr<std::unique_ptr<Collector>> {
    return std::make_unique<NullCollector>();
  };
}

TEST(RegistryTest, DuplicateNameIsAnError) {
  CollectorRegistry r;
  ASSERT_TRUE(r.Register("a", "first", NullFactory()).ok());
  absl::Status s = r.Register("a", "again", NullFactory());
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
}

TEST(RegistryTest, CreatesTheEnabledOnesAndRejectsUnknown) {
  CollectorRegistry r;
  ASSERT_TRUE(r.Register("a", "first", NullFactory()).ok());
  ASSERT_TRUE(r.Register("b", "second", NullFactory()).ok());
  CollectorContext ctx;
  EXPECT_EQ(r.Create({}, ctx)->size(), 2u);
  EXPECT_EQ(r.Create({"b"}, ctx)->size(), 1u);
  auto bad = r.Create({"zzz"}, ctx);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("known: a, b"));
  EXPECT_THAT(r.List(), ::testing::HasSubstr("second"));
}

TEST(RegistryTest, BuiltInsRegisterWithoutDuplicates) {
  CollectorRegistry r;
  EXPECT_TRUE(RegisterAllCollectors(r).ok());
}

// A collector that writes (`writes`) or reads the port inventory at
// discovery, as rdma_sysfs and netdev do.
class InventoryCollector final : public Collector {
 public:
  InventoryCollector(std::string name, PortInventory* ports, bool writes,
                     std::vector<std::string>* discovered)
      : name_(std::move(name)), ports_(ports), writes_(writes), discovered_(discovered) {}
  absl::string_view name() const override { return name_; }
  std::vector<Tier> Tiers() const override { return {Tier::kHot}; }
  absl::Status Discover(PollContext&) override {
    if (writes_) ports_->Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "", true});
    seen_ = ports_->List().size();
    discovered_->push_back(name_);
    return absl::OkStatus();
  }
  absl::Status Poll(PollContext&) override { return absl::OkStatus(); }
  size_t seen() const { return seen_; }

 private:
  const std::string name_;
  PortInventory* const ports_;
  const bool writes_;
  std::vector<std::string>* const discovered_;
  size_t seen_ = 0;
};

class NoTickContext final : public PollContext {
 public:
  Tier tier() const override { return Tier::kConfig; }
  int64_t ts_ns() const override { return 0; }
  void Append(SeriesId, uint64_t) override {}

 protected:
  void RecordError(CollectorErrorCode, absl::string_view, absl::string_view) override {}
};

CollectorFactory InventoryFactory(std::string name, bool writes,
                                  std::vector<std::string>* discovered) {
  return [name, writes,
          discovered](const CollectorContext& ctx) -> absl::StatusOr<std::unique_ptr<Collector>> {
    return std::make_unique<InventoryCollector>(name, ctx.ports, writes, discovered);
  };
}

std::vector<std::string> Names(const std::vector<std::unique_ptr<Collector>>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.emplace_back(c->name());
  return out;
}

TEST(RegistryTest, ReaderRegisteredFirstStillDiscoversAfterTheWriter) {
  std::vector<std::string> discovered;
  CollectorRegistry r;
  ASSERT_TRUE(r.Register("netdev", "reads ports", InventoryFactory("netdev", false, &discovered),
                         {.after = {"rdma_sysfs"}})
                  .ok());
  ASSERT_TRUE(
      r.Register("rdma_sysfs", "writes ports", InventoryFactory("rdma_sysfs", true, &discovered))
          .ok());
  PortInventory ports;
  CollectorContext ctx;
  ctx.ports = &ports;
  auto created = r.Create({}, ctx);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_THAT(Names(*created), ::testing::ElementsAre("rdma_sysfs", "netdev"));
  // Discovering in Create's order (as the scheduler does), the reader sees
  // what the writer published.
  NoTickContext tick;
  for (auto& c : *created) ASSERT_TRUE(c->Discover(tick).ok());
  EXPECT_THAT(discovered, ::testing::ElementsAre("rdma_sysfs", "netdev"));
  EXPECT_EQ(static_cast<InventoryCollector&>(*(*created)[1]).seen(), 1u);
}

TEST(RegistryTest, OrderIsStableOtherwise) {
  std::vector<std::string> discovered;
  auto named = [&discovered](const char* name) {
    return InventoryFactory(name, /*writes=*/false, &discovered);
  };
  CollectorRegistry r;
  ASSERT_TRUE(r.Register("a", "", named("a")).ok());
  ASSERT_TRUE(r.Register("b", "", named("b"), {.after = {"c"}}).ok());
  ASSERT_TRUE(r.Register("c", "", named("c")).ok());
  ASSERT_TRUE(r.Register("d", "", named("d"), {.after = {"f"}}).ok());
  ASSERT_TRUE(r.Register("e", "", named("e"), {.after = {"a"}}).ok());
  ASSERT_TRUE(r.Register("f", "", named("f")).ok());
  PortInventory ports;
  CollectorContext ctx;
  ctx.ports = &ports;
  auto created = r.Create({}, ctx);
  ASSERT_TRUE(created.ok()) << created.status();
  // Only b and d move, each right after what it waits for; e (whose
  // dependency already came first) and the rest keep registration order.
  EXPECT_THAT(Names(*created), ::testing::ElementsAre("a", "c", "b", "e", "f", "d"));
}

TEST(RegistryTest, DependencyOnADisabledOrUnknownCollectorIsVoid) {
  std::vector<std::string> discovered;
  CollectorRegistry r;
  ASSERT_TRUE(r.Register("netdev", "", InventoryFactory("netdev", false, &discovered),
                         {.after = {"rdma_sysfs", "not_registered"}})
                  .ok());
  ASSERT_TRUE(r.Register("rdma_sysfs", "", InventoryFactory("rdma_sysfs", true, &discovered)).ok());
  PortInventory ports;
  CollectorContext ctx;
  ctx.ports = &ports;
  auto created = r.Create({"netdev"}, ctx);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_THAT(Names(*created), ::testing::ElementsAre("netdev"));
  NoTickContext tick;
  ASSERT_TRUE((*created)[0]->Discover(tick).ok());
  EXPECT_TRUE(ports.List().empty());
}

TEST(RegistryTest, CyclesAndSelfDependenciesAreErrors) {
  CollectorRegistry r;
  EXPECT_EQ(r.Register("a", "", NullFactory(), {.after = {"a"}}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.Register("a", "", NullFactory(), {.after = {"b"}}).ok());
  ASSERT_TRUE(r.Register("b", "", NullFactory(), {.after = {"a"}}).ok());
  ASSERT_TRUE(r.Register("c", "", NullFactory()).ok());
  CollectorContext ctx;
  auto created = r.Create({}, ctx);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(std::string(created.status().message()), ::testing::HasSubstr("cycle among a, b"));
  // Without b the cycle is void.
  auto some = r.Create({"a", "c"}, ctx);
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_EQ(some->size(), 2u);
}

// The built-in entries, registered in reverse: the port inventory readers
// still come after rdma_sysfs.
TEST(RegistryTest, BuiltInReadersComeAfterRdmaSysfsWhateverTheOrder) {
  CollectorRegistry builtins;
  ASSERT_TRUE(RegisterAllCollectors(builtins).ok());
  for (const char* reader : {"rdma_netlink", "netdev", "ethtool", "dcb_config", "topology"}) {
    const CollectorRegistry::Entry* e = builtins.Find(reader);
    ASSERT_NE(e, nullptr) << reader;
    EXPECT_THAT(e->deps.after, ::testing::ElementsAre("rdma_sysfs")) << reader;
  }
  CollectorRegistry reversed;
  for (auto it = builtins.entries().rbegin(); it != builtins.entries().rend(); ++it) {
    ASSERT_TRUE(reversed.Register(it->name, it->description, it->factory, it->deps).ok());
  }
  CollectorOptions options;
  options.sysfs_root = "/nonexistent-sysfs";
  options.ethtool_dir = "/nonexistent-ethtool";
  Store store;
  PortInventory ports;
  MetricsRegistry metrics;
  CollectorContext ctx{&options, &store, &ports, RealClock::Get(), &metrics};
  auto created = reversed.Create({}, ctx);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_THAT(Names(*created), ::testing::ElementsAre("rdma_sysfs", "topology", "dcb_config",
                                                      "ethtool", "netdev", "rdma_netlink"));
}

}  // namespace
}  // namespace fabricscope
