#include "daemon/scheduler.h"

#include <map>
#include <vector>

#include "store/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

// Records every poll; optionally advances the fake clock inside one poll to
// simulate a slow device.
class RecordingCollector final : public Collector {
 public:
  RecordingCollector(std::vector<Tier> tiers, FakeClock* clock) : tiers_(tiers), clock_(clock) {}
  absl::string_view name() const override { return "recording"; }
  std::vector<Tier> Tiers() const override { return tiers_; }
  absl::Status Discover(PollContext&) override {
    discovered_ = true;
    return absl::OkStatus();
  }
  absl::Status Poll(PollContext& ctx) override {
    std::lock_guard<std::mutex> lock(mu_);
    polls_.push_back({ctx.tier(), ctx.ts_ns()});
    int n = ++count_[ctx.tier()];
    if (ctx.tier() == slow_tier_ && n == slow_poll_) clock_->Advance(slow_by_);
    if (fail_) return absl::InternalError("boom");
    return absl::OkStatus();
  }
  void SlowDown(Tier tier, int nth_poll, SteadyDuration by) {
    slow_tier_ = tier;
    slow_poll_ = nth_poll;
    slow_by_ = by;
  }
  int Count(Tier t) {
    std::lock_guard<std::mutex> lock(mu_);
    return count_[t];
  }
  std::vector<std::pair<Tier, int64_t>> Polls() {
    std::lock_guard<std::mutex> lock(mu_);
    return polls_;
  }
  bool discovered_ = false;
  bool fail_ = false;

 private:
  std::vector<Tier> tiers_;
  FakeClock* clock_;
  std::mutex mu_;
  std::map<Tier, int> count_;
  std::vector<std::pair<Tier, int64_t>> polls_;
  Tier slow_tier_ = Tier::kConfig;
  int slow_poll_ = -1;
  SteadyDuration slow_by_{};
};

void WaitForSleepers(FakeClock& clock, int n) {
  for (int i = 0; i < 5000 && clock.Sleepers() < n; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_GE(clock.Sleepers(), n) << "scheduler threads did not park";
}

std::array<absl::Duration, kNumTiers> Intervals(int hot, int medium, int slow, int config) {
  return {absl::Milliseconds(hot), absl::Milliseconds(medium), absl::Milliseconds(slow),
          absl::Milliseconds(config)};
}

TEST(SchedulerTest, TiersTickOnAbsoluteDeadlines) {
  FakeClock clock;
  Store store;
  MetricsRegistry metrics;
  RecordingCollector c({Tier::kHot, Tier::kMedium, Tier::kSlow, Tier::kConfig}, &clock);
  Scheduler s(&clock, &store, &metrics, Intervals(10, 100, 1000, 10000));
  s.Add(&c);
  s.Start();
  EXPECT_TRUE(c.discovered_);
  for (int i = 0; i < 100; ++i) {
    WaitForSleepers(clock, 4);
    clock.Advance(std::chrono::milliseconds(10));
  }
  WaitForSleepers(clock, 4);
  s.Stop();
  EXPECT_EQ(c.Count(Tier::kHot), 101);
  EXPECT_EQ(c.Count(Tier::kMedium), 11);
  EXPECT_EQ(c.Count(Tier::kSlow), 2);
  EXPECT_EQ(c.Count(Tier::kConfig), 1);
  EXPECT_EQ(s.overruns(Tier::kHot), 0u);
}

TEST(SchedulerTest, OverrunSkipsMissedTicksInsteadOfBunching) {
  FakeClock clock;
  Store store;
  MetricsRegistry metrics;
  RecordingCollector c({Tier::kHot}, &clock);
  c.SlowDown(Tier::kHot, 3, std::chrono::milliseconds(35));
  Scheduler s(&clock, &store, &metrics, Intervals(10, 3600000, 7200000, 10800000));
  s.Add(&c);
  s.Start();
  // Polls 1 (t=0) and 2 (t=10); poll 3 at t=20 takes 35 ms and ends at t=55:
  // the deadlines 30, 40 and 50 are skipped, the next tick is due at 60.
  WaitForSleepers(clock, 4);
  clock.Advance(std::chrono::milliseconds(10));
  WaitForSleepers(clock, 4);
  clock.Advance(std::chrono::milliseconds(10));
  WaitForSleepers(clock, 4);
  EXPECT_EQ(c.Count(Tier::kHot), 3);
  EXPECT_EQ(s.overruns(Tier::kHot), 3u);
  clock.Advance(std::chrono::milliseconds(4));  // t=59: nothing due
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(c.Count(Tier::kHot), 3);
  clock.Advance(std::chrono::milliseconds(1));  // t=60: exactly one tick
  WaitForSleepers(clock, 4);
  EXPECT_EQ(c.Count(Tier::kHot), 4);
  s.Stop();
  auto families = metrics.registry()->Collect();
  double overruns = -1;
  for (const auto& f : families) {
    if (f.name != "fabricscope_scheduler_overruns_total") continue;
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name == "tier" && l.value == "hot") overruns = m.counter.value;
      }
    }
  }
  EXPECT_EQ(overruns, 3);
}

TEST(SchedulerTest, TickHookRunsAfterItsTiersCollectorsWithTheTickTimestamp) {
  FakeClock clock;
  Store store;
  MetricsRegistry metrics;
  RecordingCollector c({Tier::kHot, Tier::kMedium}, &clock);
  Scheduler s(&clock, &store, &metrics, Intervals(10, 100, 1000, 10000));
  s.Add(&c);
  std::vector<std::pair<size_t, int64_t>> hooks;  // polls done when it ran, its ts
  s.SetTickHook(Tier::kMedium, [&](int64_t ts) { hooks.push_back({c.Polls().size(), ts}); });
  s.PollOnce(Tier::kHot);
  s.PollOnce(Tier::kMedium);
  clock.Advance(std::chrono::milliseconds(100));
  s.PollOnce(Tier::kHot);
  s.PollOnce(Tier::kMedium);
  ASSERT_EQ(hooks.size(), 2u);
  const auto polls = c.Polls();
  EXPECT_EQ(hooks[0].first, 2u);
  EXPECT_EQ(hooks[0].second, polls[1].second);
  EXPECT_EQ(hooks[1].first, 4u);
  EXPECT_EQ(hooks[1].second, polls[3].second);
}

TEST(SchedulerTest, EqualIntervalsMergeIntoOneTickWithOneTimestamp) {
  FakeClock clock;
  Store store;
  MetricsRegistry metrics;
  RecordingCollector c({Tier::kHot, Tier::kMedium}, &clock);
  Scheduler s(&clock, &store, &metrics, Intervals(10, 10, 1000, 10000));
  s.Add(&c);
  s.Start();
  for (int i = 0; i < 5; ++i) {
    WaitForSleepers(clock, 3);  // hot+medium share one thread
    clock.Advance(std::chrono::milliseconds(10));
  }
  WaitForSleepers(clock, 3);
  s.Stop();
  auto polls = c.Polls();
  ASSERT_EQ(polls.size(), 12u);
  for (size_t i = 0; i + 1 < polls.size(); i += 2) {
    EXPECT_EQ(polls[i].first, Tier::kHot);
    EXPECT_EQ(polls[i + 1].first, Tier::kMedium);
    EXPECT_EQ(polls[i].second, polls[i + 1].second) << "one realtime timestamp per tick";
  }
  EXPECT_EQ(polls[2].second - polls[0].second, 10'000'000);
}

TEST(SchedulerTest, FailedPollIsCountedAndPollingGoesOn) {
  FakeClock clock;
  Store store;
  MetricsRegistry metrics;
  RecordingCollector c({Tier::kHot}, &clock);
  c.fail_ = true;
  Scheduler s(&clock, &store, &metrics, Intervals(10, 100, 1000, 10000));
  s.Add(&c);
  s.PollOnce(Tier::kHot);
  s.PollOnce(Tier::kHot);
  EXPECT_EQ(c.Count(Tier::kHot), 2);
  double errors = 0;
  for (const auto& f : metrics.registry()->Collect()) {
    if (f.name != "fabricscope_collector_errors_total") continue;
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name == "code" && l.value == "poll") errors += m.counter.value;
      }
    }
  }
  EXPECT_EQ(errors, 2);
}

TEST(SchedulerTest, StopIsPrompt) {
  Store store;
  MetricsRegistry metrics;
  FakeClock fake;
  RecordingCollector c({Tier::kHot}, &fake);
  Scheduler s(RealClock::Get(), &store, &metrics, Intervals(10, 100, 1000, 10000));
  s.Add(&c);
  s.Start();
  absl::SleepFor(absl::Milliseconds(50));
  absl::Time t0 = absl::Now();
  s.Stop();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  EXPECT_GE(c.Count(Tier::kHot), 1);
}

}  // namespace
}  // namespace fabricscope
