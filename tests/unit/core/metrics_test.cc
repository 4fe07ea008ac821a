#include "core/metrics.h"

#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

TEST(MetricsTest, CatalogNamesFollowTheConvention) {
  auto catalog = MetricCatalog();
  ASSERT_FALSE(catalog.empty());
  std::regex name_re("fabricscope_[a-z0-9_]+|exposer_[a-z_]+");
  for (const MetricSpec* spec : catalog) {
    EXPECT_TRUE(std::regex_match(spec->name, name_re)) << spec->name;
    EXPECT_FALSE(spec->help.empty()) << spec->name;
    EXPECT_FALSE(spec->component.empty()) << spec->name;
    bool total = spec->name.size() > 6 && spec->name.substr(spec->name.size() - 6) == "_total";
    if (spec->type == MetricType::kCounter) {
      EXPECT_TRUE(total) << spec->name << " is a counter without _total";
    } else {
      EXPECT_FALSE(total) << spec->name << " ends in _total but is not a counter";
    }
  }
}

TEST(MetricsTest, ReferenceListsEveryMetric) {
  std::string ref = RenderMetricReference();
  for (const MetricSpec* spec : MetricCatalog()) {
    EXPECT_NE(ref.find("`" + spec->name + "`"), std::string::npos) << spec->name;
  }
}

TEST(MetricsTest, DuplicateDeclarationAborts) {
  EXPECT_DEATH(DefineMetric({.name = "fabricscope_build_info", .help = "dup"}), "declared twice");
}

TEST(MetricsTest, RegistryBuildsFamiliesFromSpecs) {
  const MetricSpec& spec = *FindMetric("fabricscope_scheduler_overruns_total");
  MetricsRegistry registry;
  registry.Counter(spec).Add({{"tier", "hot"}}).Increment(3);
  auto families = registry.registry()->Collect();
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, spec.name);
  EXPECT_EQ(families[0].help, spec.help);
  EXPECT_EQ(families[0].metric[0].counter.value, 3);
}

}  // namespace
}  // namespace fabricscope
