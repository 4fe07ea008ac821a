#include "exporters/metrics_profile.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fabricscope {
namespace {

// Read by the shipped rules or the dashboard (metrics_profile_test.cc checks
// that this covers them), plus fabricscope_port_info and
// fabricscope_build_info (what every panel and runbook joins on), and
// fabricscope_topology_source_up (whether the fleet rules' switch-port joins
// have input).
const std::vector<std::string>& Families() {
  static const auto* const kFamilies = [] {
    auto* v = new std::vector<std::string>{
        "fabricscope_build_info",
        "fabricscope_cnp_handled_total",
        "fabricscope_cnp_ignored_total",
        "fabricscope_cnp_sent_total",
        "fabricscope_collector_errors_total",
        "fabricscope_collector_poll_duration_seconds",
        "fabricscope_detector_events_total",
        "fabricscope_discards_total",
        "fabricscope_ecn_enabled",
        "fabricscope_ecn_marked_packets_total",
        "fabricscope_ecn_mistuning_active",
        "fabricscope_fec_corrected_blocks_total",
        "fabricscope_fec_uncorrectable_blocks_total",
        "fabricscope_gpu_nic_affinity",
        "fabricscope_ib_pma_saturated",
        "fabricscope_ib_port_errors_total",
        "fabricscope_ingest_spans_total",
        "fabricscope_kubernetes_up",
        "fabricscope_link_degraded_active",
        "fabricscope_link_down_events_total",
        "fabricscope_link_partner_info",
        "fabricscope_microburst_active",
        "fabricscope_microbursts_total",
        "fabricscope_netdev_drops_total",
        "fabricscope_peak_rate_per_second",
        "fabricscope_pfc_enabled",
        "fabricscope_pfc_pause_fraction_peak",
        "fabricscope_pfc_pause_frames_total",
        "fabricscope_pfc_pause_role",
        "fabricscope_pfc_pause_seconds_total",
        "fabricscope_pfc_storm_active",
        "fabricscope_pfc_storms_total",
        "fabricscope_pod_device_info",
        "fabricscope_phy_corrected_bit_errors_total",
        "fabricscope_phy_symbol_errors_total",
        "fabricscope_port_bytes_total",
        "fabricscope_port_info",
        "fabricscope_port_pci_info",
        "fabricscope_rdma_errors_total",
        "fabricscope_retransmit_spike_active",
        "fabricscope_scheduler_overruns_total",
        "fabricscope_scheduler_ticks_total",
        "fabricscope_span_store_bytes",
        "fabricscope_spans_total",
        "fabricscope_stall_duration_seconds",
        "fabricscope_stall_signals_total",
        "fabricscope_stalls_total",
        "fabricscope_start_time_seconds",
        "fabricscope_state_snapshot_rejected_total",
        "fabricscope_store_bytes",
        "fabricscope_store_retention_seconds",
        "fabricscope_store_seek_index_bytes",
        "fabricscope_topology_source_up",
    };
    std::sort(v->begin(), v->end());
    return v;
  }();
  return *kFamilies;
}

// Kept under fleet only while 1 (a counter that sits saturated): the
// FabricCounterSaturated alert reads nothing else.
constexpr absl::string_view kSaturatedFamily = "fabricscope_ib_pma_saturated";

const std::string* Label(const prometheus::ClientMetric& m, absl::string_view name) {
  for (const auto& l : m.label) {
    if (l.name == name) return &l.value;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<MetricsProfile> ParseMetricsProfile(absl::string_view name) {
  if (name == "full") return MetricsProfile::kFull;
  if (name == "fleet") return MetricsProfile::kFleet;
  return absl::InvalidArgumentError(
      absl::StrCat("metrics-profile: unknown profile '", name, "'; one of full, fleet"));
}

absl::string_view MetricsProfileName(MetricsProfile profile) {
  return profile == MetricsProfile::kFleet ? "fleet" : "full";
}

const std::vector<std::string>& FleetProfileFamilies() { return Families(); }

bool FleetKeepsSignal(absl::string_view signal) {
  // The family part of the signal (before the first ':' of its extra labels).
  const absl::string_view family = signal.substr(0, signal.find(':'));
  return family == "pfc_pause_seconds" || family == "pfc_pause_frames" ||
         family == "ecn_marked_packets" || family == "cnp_sent" || family == "cnp_handled" ||
         family == "discards" || family == "netdev_drops" || family == "rx_buffer_passed_threshold";
}

SampleRule ProfileRuleFor(MetricsProfile profile, absl::string_view family) {
  if (profile == MetricsProfile::kFull) return SampleRule::kAll;
  const std::vector<std::string>& keep = Families();
  if (!std::binary_search(keep.begin(), keep.end(), family)) return SampleRule::kDrop;
  if (family == "fabricscope_peak_rate_per_second" || family == "fabricscope_microbursts_total") {
    return SampleRule::kSignal;
  }
  if (family == "fabricscope_fec_corrected_blocks_total" ||
      family == "fabricscope_fec_uncorrectable_blocks_total") {
    return SampleRule::kLane;
  }
  if (family == kSaturatedFamily) return SampleRule::kPositive;
  return SampleRule::kAll;
}

bool ProfileKeepsSample(SampleRule rule, const absl::string_view* signal,
                        const absl::string_view* lane, double value) {
  switch (rule) {
    case SampleRule::kDrop:
      return false;
    case SampleRule::kAll:
      return true;
    case SampleRule::kSignal:
      return signal != nullptr && FleetKeepsSignal(*signal);
    case SampleRule::kLane:
      return lane == nullptr || lane->empty();
    case SampleRule::kPositive:
      return value > 0;
  }
  return true;
}

void ApplyMetricsProfile(MetricsProfile profile, std::vector<prometheus::MetricFamily>* families) {
  if (profile == MetricsProfile::kFull) return;
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families->size());
  for (auto& f : *families) {
    const SampleRule rule = ProfileRuleFor(profile, f.name);
    if (rule == SampleRule::kDrop) continue;
    if (rule != SampleRule::kAll) {
      auto& ms = f.metric;
      ms.erase(std::remove_if(ms.begin(), ms.end(),
                              [rule](const prometheus::ClientMetric& m) {
                                const std::string* s = Label(m, "signal");
                                const std::string* l = Label(m, "lane");
                                const absl::string_view signal = s ? *s : absl::string_view();
                                const absl::string_view lane = l ? *l : absl::string_view();
                                return !ProfileKeepsSample(rule, s ? &signal : nullptr,
                                                           l ? &lane : nullptr, m.gauge.value);
                              }),
               ms.end());
      if (ms.empty()) continue;
    }
    out.push_back(std::move(f));
  }
  *families = std::move(out);
}

std::vector<prometheus::MetricFamily> ProfiledCollectable::Collect() const {
  std::vector<prometheus::MetricFamily> families = inner_->Collect();
  ApplyMetricsProfile(profile_, &families);
  return families;
}

}  // namespace fabricscope
