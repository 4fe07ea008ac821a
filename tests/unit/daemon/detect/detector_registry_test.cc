#include "daemon/detect/detector_registry.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/signals.h"
#include "daemon/detect/detector.h"
#include "daemon/detect/detector_options.h"
#include "daemon/detect/detectors.h"
#include "daemon/detect/event_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace detector_registry_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;

TEST(DetectorRegistryTest, EveryBuiltinDetectorIsRegisteredOnceInOrder) {
  ASSERT_TRUE(BuiltinDetectorsStatus().ok()) << BuiltinDetectorsStatus();
  const DetectorRegistry& r = BuiltinDetectors();
  EXPECT_THAT(r.Names(), ElementsAre("pfc_storm", "ecn_mistuning", "microburst", "retransmit_spike",
                                     "link_degradation", "pause_role"));
  for (const auto& e : r.entries()) {
    EXPECT_FALSE(e.detector.description.empty()) << e.name;
    EXPECT_FALSE(e.detector.kinds.empty()) << e.name;
    EXPECT_TRUE(e.detector.declare_metrics) << e.name;
    EXPECT_TRUE(e.detector.create) << e.name;
    EXPECT_THAT(r.List(), HasSubstr(e.name));
  }
  EXPECT_EQ(r.Find("nope"), nullptr);
  // The options default to every registered detector.
  EXPECT_EQ(DetectorOptions{}.enabled, r.Names());
  EXPECT_EQ(BuiltinDetectorNames(), r.Names());
}

TEST(DetectorRegistryTest, ADuplicateNameIsAnError) {
  DetectorRegistry r;
  ASSERT_TRUE(RegisterAllDetectors(r).ok());
  // Registering the list again: every name is a duplicate; the first error is kept.
  const absl::Status again = RegisterAllDetectors(r);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("\"pfc_storm\" registered twice"));
  EXPECT_EQ(r.entries().size(), 6u);  // unchanged
  const absl::Status dup = r.Register("microburst", r.Find("pfc_storm")->detector);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Register("no_factory", DetectorClass{}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DetectorRegistryTest, AnUnknownEnabledNameListsTheKnownOnes) {
  DetectorOptions o;
  o.enabled = {"microburst", "pfc_strom"};
  const absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unknown detector 'pfc_strom'"));
  EXPECT_THAT(s.message(), HasSubstr("pfc_storm, ecn_mistuning, microburst, retransmit_spike, "
                                     "link_degradation"));
  o.enabled = {};
  EXPECT_TRUE(o.Validate().ok());  // none is allowed
}

// A detector from outside the built-in list: an episode while the pause
// counter of its series moves. Counts what it observes.
class MovingDetector final : public Detector {
 public:
  using Detector::Detector;
  std::vector<const MetricSpec*> Families() const override { return {&families::kPfcPauseSeconds}; }
  void Observe(const AppendEvent& ev) override {
    ++observed;
    auto it = states_.find(ev.id);
    if (it == states_.end()) {
      it = states_.try_emplace(ev.id, 0, 0).first;
      it->second.tmpl = MakeEvent("moving", "", 0, ev.key->netdev, "", "");
    }
    if (!ev.rate_valid) return;
    it->second.Feed(ctx_, ev.start_ns, ev.end_ns, ev.delta > 0, ev.delta,
                    [](const Episode& e) { return e.tmpl.netdev + " moves"; });
  }
  void ForEachEpisode(const std::function<void(Episode&)>& fn) override {
    for (auto& [k, ep] : states_) fn(ep);
  }
  int observed = 0;  // guarded by the engine's lock

 private:
  absl::flat_hash_map<SeriesId, Episode> states_;
};

class DetectorPluginTest : public ::testing::Test {
 protected:
  DetectorPluginTest() : events_(100, nullptr) {
    EXPECT_TRUE(registry_
                    .Register("mover", {.description = "test",
                                        .kinds = {"moving"},
                                        .declare_metrics = {},
                                        .create =
                                            [this](std::string name, DetectorContext* ctx) {
                                              auto d = std::make_unique<MovingDetector>(
                                                  std::move(name), ctx);
                                              created_ = d.get();
                                              return d;
                                            }})
                    .ok());
  }

  SeriesId Series(const std::string& netdev) {
    SeriesKey k{"ethtool", "rx_prio3_pause_duration", "", 0, netdev};
    auto sig = MapCounter(k);
    EXPECT_TRUE(sig.has_value());
    return store_.Register(k, *sig);
  }

  DetectorRegistry registry_;
  MovingDetector* created_ = nullptr;
  Store store_;
  PortInventory ports_;
  EventLog events_;
};

TEST_F(DetectorPluginTest, TheEngineRunsARegisteredDetectorUnderItsRegisteredName) {
  DetectorOptions o;
  o.enabled = {"mover"};
  DetectorEngine engine(registry_, o, &ports_, &events_, nullptr);
  ASSERT_NE(created_, nullptr);
  EXPECT_EQ(created_->name(), "mover");
  store_.SetObserver(&engine);
  const SeriesId id = Series("eth7");
  store_.Append(id, kT0, 0);
  store_.Append(id, kT0 + 10 * kMs, 0);
  store_.Append(id, kT0 + 20 * kMs, 500);  // moves: an episode
  EXPECT_EQ(engine.ActiveCount("mover"), 1u);
  store_.Append(id, kT0 + 30 * kMs, 500);  // still: it ends
  EXPECT_EQ(engine.ActiveCount(""), 0u);
  const auto ev = events_.List(0, INT64_MAX, "mover");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, "moving");
  EXPECT_EQ(ev[0].netdev, "eth7");
  EXPECT_EQ(ev[0].summary, "eth7 moves");
  EXPECT_EQ(created_->observed, 4);
}

TEST_F(DetectorPluginTest, ADisabledDetectorIsNotCreated) {
  DetectorOptions o;
  o.enabled = {"pfc_storm"};  // not in this registry: ignored
  DetectorEngine engine(registry_, o, &ports_, &events_, nullptr);
  EXPECT_EQ(created_, nullptr);
  EXPECT_EQ(engine.ActiveCount(""), 0u);
}

// Tier threads append concurrently: the engine's lock serializes the calls
// into the detector (TSan checks it in concurrency_tests), none is lost.
TEST_F(DetectorPluginTest, ConcurrentAppendsReachTheDetectorOnceEach) {
  DetectorOptions o;
  o.enabled = {"mover"};
  DetectorEngine engine(registry_, o, &ports_, &events_, nullptr);
  store_.SetObserver(&engine);
  constexpr int kThreads = 4;
  constexpr int kSamples = 500;
  std::vector<SeriesId> ids;
  for (int i = 0; i < kThreads; ++i) ids.push_back(Series("eth" + std::to_string(10 + i)));
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) (void)engine.ActiveCount("mover");
  });
  std::vector<std::thread> writers;
  for (int i = 0; i < kThreads; ++i) {
    writers.emplace_back([&, i] {
      for (int s = 0; s < kSamples; ++s) {
        store_.Append(ids[i], kT0 + s * 10 * kMs, static_cast<uint64_t>(s / 3) * 1000);
      }
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  engine.Sweep(kT0 + kSamples * 10 * kMs);
  EXPECT_EQ(created_->observed, kThreads * kSamples);
  EXPECT_FALSE(events_.List(0, INT64_MAX, "mover").empty());
}

}  // namespace
}  // namespace detector_registry_test
}  // namespace fabricscope
