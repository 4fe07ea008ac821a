// Metrics profiles: which of the daemon's series /metrics exports
// (--metrics-profile).
//
//  - full (the default): everything.
//  - fleet: what the shipped rules (deploy/prometheus/*.rules.yml) and the
//    dashboard (deploy/grafana/fabricscope.json) read, for fleets where
//    series per host is the cost that matters. Families outside
//    FleetProfileFamilies() are dropped; inside them,
//    fabricscope_peak_rate_per_second and fabricscope_microbursts_total keep
//    only the congestion signals (FleetKeepsSignal: the ones the rules and
//    the dashboard select), and the per-lane FEC series (lane != "") are
//    dropped (the rules read the totals), and fabricscope_ib_pma_saturated
//    keeps only the counters that sit saturated (value 1: what the
//    FabricCounterSaturated alert reads). A test
//    (tests/unit/exporters/metrics_profile_test.cc) fails when a shipped
//    rule or panel reads a family the fleet profile drops.
//
// The profile filters only what is rendered: the store, the detectors and
// the correlator see every series under both profiles. prometheus-cpp's own
// exposer_* families are served by the exposer itself and are not filtered.
//
// Thread-safety: the functions are pure; ProfiledCollectable is as
// thread-safe as the collectable it wraps (Collect is const).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace fabricscope {

enum class MetricsProfile { kFull, kFleet };

// "full" or "fleet"; anything else is an InvalidArgumentError naming both.
absl::StatusOr<MetricsProfile> ParseMetricsProfile(absl::string_view name);
absl::string_view MetricsProfileName(MetricsProfile profile);

// The families the fleet profile keeps, sorted.
const std::vector<std::string>& FleetProfileFamilies();
// Whether the fleet profile keeps a `signal` label value of
// fabricscope_peak_rate_per_second / fabricscope_microbursts_total.
bool FleetKeepsSignal(absl::string_view signal);

// How `profile` filters the samples of one family: dropped whole, kept
// whole, or kept per sample by its `signal` label (FleetKeepsSignal), its
// `lane` label (only the totals, lane ""), or its value (only while > 0).
enum class SampleRule { kDrop, kAll, kSignal, kLane, kPositive };
SampleRule ProfileRuleFor(MetricsProfile profile, absl::string_view family);
// Whether a sample passes `rule` (kDrop/kAll: never/always). `signal` and
// `lane` are the sample's label values, nullptr when it has no such label.
bool ProfileKeepsSample(SampleRule rule, const absl::string_view* signal,
                        const absl::string_view* lane, double value);

// Drops from `families` what `profile` does not export (families, and
// series within the kept ones); families left without series are removed.
void ApplyMetricsProfile(MetricsProfile profile, std::vector<prometheus::MetricFamily>* families);

// A collectable whose Collect() is `inner`'s with the profile applied.
class ProfiledCollectable final : public prometheus::Collectable {
 public:
  ProfiledCollectable(std::shared_ptr<prometheus::Collectable> inner, MetricsProfile profile)
      : inner_(std::move(inner)), profile_(profile) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::shared_ptr<prometheus::Collectable> inner_;
  MetricsProfile profile_;
};

}  // namespace fabricscope
