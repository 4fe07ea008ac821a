#include "core/metrics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace fabricscope {
namespace {

std::map<std::string, const MetricSpec*>& Catalog() {
  static auto* catalog = new std::map<std::string, const MetricSpec*>();
  return *catalog;
}

}  // namespace

const MetricSpec& DefineMetric(MetricSpec spec) {
  auto& catalog = Catalog();
  if (catalog.count(spec.name) != 0) {
    std::fprintf(stderr, "fatal: metric %s declared twice\n", spec.name.c_str());
    std::abort();
  }
  auto* owned = new MetricSpec(std::move(spec));  // lives for the process
  catalog.emplace(owned->name, owned);
  return *owned;
}

std::vector<const MetricSpec*> MetricCatalog() {
  std::vector<const MetricSpec*> out;
  for (const auto& [name, spec] : Catalog()) out.push_back(spec);
  return out;
}

const MetricSpec* FindMetric(const std::string& name) {
  auto it = Catalog().find(name);
  return it == Catalog().end() ? nullptr : it->second;
}

absl::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kSummary:
      return "summary";
  }
  return "untyped";
}

std::string RenderMetricReference() {
  std::string out =
      "# Metric reference\n\n"
      "Generated from the metric declarations in the code by\n"
      "`fabricscoped --dump-metrics-reference`; do not edit by hand (a test fails when\n"
      "this file is stale; regenerate with `tools/update-metrics-reference.sh`).\n\n"
      "Every sample of a family carries all of the family's labels; a label that does\n"
      "not apply to a sample has the value \"\".\n\n"
      "| metric | type | labels | emitted by | help |\n"
      "|---|---|---|---|---|\n";
  for (const MetricSpec* spec : MetricCatalog()) {
    std::string help = absl::StrReplaceAll(spec->help, {{"|", "\\|"}, {"\n", " "}});
    absl::StrAppend(
        &out, "| `", spec->name, "` | ", MetricTypeName(spec->type), " | ",
        spec->labels.empty() ? "" : absl::StrCat("`", absl::StrJoin(spec->labels, "`, `"), "`"),
        " | ", spec->component, " | ", help, " |\n");
  }
  return out;
}

prometheus::Family<prometheus::Counter>& MetricsRegistry::Counter(const MetricSpec& spec) {
  return prometheus::BuildCounter().Name(spec.name).Help(spec.help).Register(*registry_);
}

prometheus::Family<prometheus::Gauge>& MetricsRegistry::Gauge(const MetricSpec& spec) {
  return prometheus::BuildGauge().Name(spec.name).Help(spec.help).Register(*registry_);
}

prometheus::Family<prometheus::Histogram>& MetricsRegistry::Histogram(const MetricSpec& spec) {
  return prometheus::BuildHistogram().Name(spec.name).Help(spec.help).Register(*registry_);
}

}  // namespace fabricscope
