// A detector added with only the touch points ARCHITECTURE.md lists
// ("Adding a collector or a detector"): this file holds the detector, its
// option and its one registration line, and its test; tests/CMakeLists.txt
// builds it as a test target of its own (plugin_touchpoints_test), linked
// against the daemon's libraries unchanged. Nothing else names it: the
// config parser, --help, docs/options.md's generator, --detectors and the
// engine find it through the registry.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/signals.h"
#include "daemon/config.h"
#include "daemon/detect/detector.h"
#include "daemon/detect/detector_registry.h"
#include "daemon/detect/detectors.h"
#include "daemon/detect/event_log.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

// --- the detector's own files (here in one) ----------------------------------

// Its option, read by key.
const OptionKey<double> kThreshold{"throwaway-threshold", 1000};

// Opens an event while a port's discards rise at >= --throwaway-threshold
// per second.
class ThrowawayDetector final : public Detector {
 public:
  ThrowawayDetector(std::string name, DetectorContext* ctx)
      : Detector(std::move(name), ctx), threshold_(ctx->options().values.Get(kThreshold)) {}

  static DetectorClass Class() {
    return {.description = "a detector that exists only in its test",
            .kinds = {"discarding"},
            .declare_metrics = {},
            .create = [](std::string name, DetectorContext* ctx) -> std::unique_ptr<Detector> {
              return std::make_unique<ThrowawayDetector>(std::move(name), ctx);
            },
            .options = {option::Number(kThreshold, "RATE",
                                       "Throwaway: discards per second at or above which a port "
                                       "is discarding.",
                                       AtLeast(1, 1e12))},
            .validate = {}};
  }

  std::vector<const MetricSpec*> Families() const override { return {&families::kDiscards}; }
  void Observe(const AppendEvent& ev) override {
    auto [it, inserted] = states_.try_emplace(ev.id, 0, 0);
    Episode& ep = it->second;
    if (inserted) {
      ep.tmpl = MakeEvent("discarding", ev.key->device, ev.key->port, ev.key->netdev, "", "");
    }
    if (!ev.rate_valid || ev.end_ns <= ev.start_ns) return;
    ep.Feed(ctx_, ev.start_ns, ev.end_ns, ev.rate >= threshold_, ev.rate,
            [](const Episode& e) { return e.tmpl.netdev + ": discarding"; });
  }
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override {
    for (auto& [id, ep] : states_) fn(ep);
  }

 private:
  const double threshold_;
  absl::flat_hash_map<SeriesId, Episode> states_;
};

// The one registration line.
const DetectorRegistration kRegistration("throwaway", ThrowawayDetector::Class());

// --- its test ----------------------------------------------------------------

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = int64_t{1'700'000'000} * 1'000'000'000;

absl::StatusOr<CommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fabricscoped");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseCommandLine(static_cast<int>(argv.size()), argv.data());
}

TEST(PluginTouchpointsTest, TheRegistryCarriesTheDetectorEverywhere) {
  // Registered after the built-ins, enabled by default.
  ASSERT_TRUE(BuiltinDetectorsStatus().ok()) << BuiltinDetectorsStatus();
  EXPECT_EQ(BuiltinDetectorNames().back(), "throwaway");
  EXPECT_TRUE(DetectorOptions{}.Enabled("throwaway"));

  // The option is a flag and a config key, bounded by its declaration.
  absl::StatusOr<CommandLine> cl = Parse({"--throwaway-threshold=50", "--detectors=throwaway"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  absl::StatusOr<CommandLine> bad = Parse({"--throwaway-threshold=0.5"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "--throwaway-threshold")) << bad.status();
  Config from_file;
  ASSERT_TRUE(ApplyConfigText("throwaway-threshold = 70\n", "test.conf", &from_file).ok());
  EXPECT_EQ(RestartOnlyChanges(Config{}, from_file),
            std::vector<std::string>{"throwaway-threshold"});

  // --help and the option reference list it, as the detector's.
  const std::string help = HelpText();
  EXPECT_TRUE(absl::StrContains(help, "--throwaway-threshold=RATE")) << help;
  EXPECT_TRUE(absl::StrContains(help, "pause_role, throwaway;")) << help;  // --detectors
  EXPECT_TRUE(absl::StrContains(
      OptionsReference(),
      "| `--throwaway-threshold` | RATE | `1000` | restart | detector throwaway |"));

  // The engine creates it with the configured value: 60 discards/s is below
  // the default 1000/s and above the flag's 50/s.
  for (const double threshold : {1000.0, 50.0}) {
    DetectorOptions options = threshold == 50 ? cl->config.detect : DetectorOptions{};
    options.enabled = {"throwaway"};
    MetricsRegistry metrics;
    EventLog events(100, &metrics);
    PortInventory ports;
    DetectorEngine engine(options, &ports, &events, &metrics);
    Store store;
    store.SetObserver(&engine);
    const SeriesKey key{"hw_counters", "out_of_buffer", "mlx5_0", 1, ""};
    std::optional<Signal> signal = MapCounter(key);
    ASSERT_TRUE(signal.has_value());
    ASSERT_EQ(signal->family, &families::kDiscards);
    const SeriesId id = store.Register(key, *signal);
    for (int64_t i = 0; i <= 100; ++i) store.Append(id, kT0 + i * 100 * kMs, 6 * i);
    const std::vector<DetectorEvent> found = events.List(0, INT64_MAX, "throwaway");
    EXPECT_EQ(found.size(), threshold == 50 ? 1u : 0u) << threshold;
  }
}

}  // namespace
}  // namespace fabricscope
