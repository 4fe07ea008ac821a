#include "collectors/registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace fabricscope
