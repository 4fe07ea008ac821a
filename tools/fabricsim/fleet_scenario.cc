#include "tools/fabricsim/fleet_scenario.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fabricsim {
namespace {

constexpr double kSlowDrainFraction = 0.02;
constexpr double kQuietBer = 1e-13;

}  // namespace

std::vector<std::string> FleetScenario::Names() {
  return {"slow_receiver", "incast", "bad_link", "pause_storm_deadlock_free", "quiet"};
}

std::string FleetScenario::Describe() {
  return "  slow_receiver: one host's NIC stops draining and pauses its leaf; the storm spreads "
         "over the spines to other leaves\n"
         "  incast: every other host sends to one host at line rate; ECN and pause at its leaf "
         "port, no host sends pause\n"
         "  bad_link: FEC corrected bits, then uncorrectable blocks and symbol errors climb on "
         "one leaf-host cable\n"
         "  pause_storm_deadlock_free: a host pauses its leaf but only same-leaf hosts feed it: "
         "the storm stays inside that leaf\n"
         "  quiet: moderate all-to-all load, nothing wrong\n";
}

absl::StatusOr<FleetScenario> FleetScenario::Make(absl::string_view name,
                                                  const FleetTopology& topology, uint64_t seed,
                                                  const FleetEpisodeTiming& timing, int origin) {
  auto names = Names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown fleet scenario '", name, "'; one of: ", absl::StrJoin(names, ", ")));
  }
  if (timing.length_ns <= 0 || timing.period_ns < timing.length_ns || timing.first_start_ns < 0) {
    return absl::InvalidArgumentError(
        "episode timing: need length > 0, period >= length and start >= 0");
  }
  if (origin >= topology.hosts) {
    return absl::InvalidArgumentError(absl::StrCat("--origin: no host ", origin + 1));
  }
  FleetScenario s;
  s.name_ = std::string(name);
  s.topology_ = topology;
  s.seed_ = seed;
  s.timing_ = timing;
  s.origin_ = origin;
  if (name == "pause_storm_deadlock_free" && origin >= 0) {
    const int leaf = topology.LeafOf(origin);
    int on_leaf = 0;
    for (int h = 0; h < topology.hosts; ++h) on_leaf += topology.LeafOf(h) == leaf ? 1 : 0;
    if (on_leaf < 2) {
      return absl::InvalidArgumentError("pause_storm_deadlock_free: the origin has no leaf peer");
    }
  }
  return s;
}

int FleetScenario::EpisodeAt(int64_t t) const {
  if (!has_episodes() || t < timing_.first_start_ns) return -1;
  const int64_t i = (t - timing_.first_start_ns) / timing_.period_ns;
  return t < EpisodeEnd(static_cast<int>(i)) ? static_cast<int>(i) : -1;
}

int FleetScenario::EpisodesStartedBy(int64_t t) const {
  if (!has_episodes() || t < timing_.first_start_ns) return 0;
  return static_cast<int>((t - timing_.first_start_ns) / timing_.period_ns) + 1;
}

int FleetScenario::TargetOf(int i) const {
  if (origin_ >= 0) return origin_;
  const int n = topology_.hosts;
  for (uint64_t attempt = 0;; ++attempt) {
    Rng rng(seed_ * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i) * 1000003 + attempt);
    int h = static_cast<int>(rng.Next() % static_cast<uint64_t>(n));
    if (name_ != "pause_storm_deadlock_free") return h;
    // The contained storm needs a peer on the origin's leaf.
    for (int o = 0; o < n; ++o) {
      if (o != h && topology_.LeafOf(o) == topology_.LeafOf(h)) return h;
    }
    if (attempt > 64) return h;  // no leaf has two hosts; Make() refuses such a fixed origin
  }
}

std::vector<int> FleetScenario::IncastSenders(int i) const {
  std::vector<int> out;
  const int target = TargetOf(i);
  for (int h = 0; h < topology_.hosts; ++h) {
    if (h != target) out.push_back(h);
  }
  return out;
}

void FleetScenario::Params(int64_t t, FleetStepParams* p) const {
  const int n = topology_.hosts;
  p->rx_drain_fraction.assign(n, 1.0);
  p->ber.assign(n, kQuietBer);
  p->sends.assign(n, true);
  p->suppressed.clear();
  p->extra.clear();
  const int i = EpisodeAt(t);
  if (i < 0) return;
  const int target = TargetOf(i);
  if (name_ == "slow_receiver" || name_ == "pause_storm_deadlock_free") {
    p->rx_drain_fraction[target] = kSlowDrainFraction;
    p->sends[target] = false;
    if (name_ == "pause_storm_deadlock_free") {
      p->suppressed.assign(static_cast<size_t>(n) * n, false);
      const int leaf = topology_.LeafOf(target);
      for (int h = 0; h < n; ++h) {
        if (h == target) continue;
        if (topology_.LeafOf(h) != leaf) {
          p->suppressed[static_cast<size_t>(h) * n + target] = true;
        } else {
          p->extra.push_back({h, target, Fleet::kBaseLoad / 4});
        }
      }
    }
  } else if (name_ == "incast") {
    for (int h : IncastSenders(i)) p->extra.push_back({h, target, 1.0});
  } else if (name_ == "bad_link") {
    double frac = static_cast<double>(t - EpisodeStart(i)) / static_cast<double>(timing_.length_ns);
    p->ber[target] = std::pow(10.0, -8.0 + frac * (std::log10(5e-5) + 8.0));
  }
}

}  // namespace fabricsim
