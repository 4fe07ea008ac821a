// The tiered poll scheduler.
//
// Tiers (hot 10 ms, medium 100 ms, slow 1 s, config 10 s by default) run on
// absolute deadlines on the steady clock: tick k of a tier is due at
// start + k * interval, whatever the previous tick cost. A tick that overruns
// its successor's deadline skips the missed ticks (never bunches them up) and
// counts each skipped tick in fabricscope_scheduler_overruns_total{tier}.
//
// Tiers with equal intervals merge into one thread that polls them in tier
// order (setting --medium-interval equal to --hot-interval merges the medium
// tier into the hot one). Each distinct interval gets its own thread, so a
// slow device in the slow tier never delays the hot tier.
//
// One realtime timestamp is taken per tick and stamped on every sample of that
// tick. Each collector poll is timed into
// fabricscope_collector_poll_duration_seconds{collector}; errors are counted
// in fabricscope_collector_errors_total{collector,code}.
//
// Thread-safety: Add/Start/Stop from one controlling thread. Stop() joins all
// tier threads and returns within one collector poll.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "collectors/collector.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"

namespace fabricscope {

class Store;
class TickColumn;

class Scheduler {
 public:
  // `intervals` is indexed by Tier.
  Scheduler(Clock* clock, Store* store, MetricsRegistry* metrics,
            std::array<absl::Duration, kNumTiers> intervals);
  ~Scheduler();

  // Collectors are not owned. Call before Start(). The collector's Tiers()
  // is read once, here.
  void Add(Collector* collector);

  // Runs `fn` with the tick's timestamp after every tick of `tier` (after its
  // collectors polled), on the tier's thread. One per tier; call before
  // Start(). The daemon ends detector episodes whose input stopped with it.
  void SetTickHook(Tier tier, std::function<void(int64_t ts_ns)> fn);

  // Runs Discover() on every collector, then starts one thread per distinct
  // interval.
  void Start();
  void Stop();

  // Runs every collector of `tier` once on the calling thread (tests, the
  // golden end-to-end "one poll" mode); not while Start's threads run (the
  // tier's time column has one writer).
  void PollOnce(Tier tier);

  uint64_t overruns(Tier tier) const { return overruns_[static_cast<int>(tier)].load(); }
  uint64_t ticks(Tier tier) const { return ticks_[static_cast<int>(tier)].load(); }

  // Liveness and readiness for /healthz and /readyz: ready once every tier has
  // completed a tick; live while every tier ticked within
  // max(3 x its interval, 1 s) of `now` (before Start: not live). `detail`
  // names the late or waiting tiers.
  struct Health {
    bool live = false;
    bool ready = false;
    std::string detail;
  };
  Health CheckHealth(SteadyTime now) const;

 private:
  class TickContext;
  struct CollectorMetrics;
  struct Group {
    absl::Duration interval;
    std::vector<Tier> tiers;  // in tier order
  };

  void RunGroup(const Group& group);
  void PollTier(Tier tier, int64_t ts_ns);

  Clock* const clock_;
  Store* const store_;
  MetricsRegistry* const metrics_;
  const std::array<absl::Duration, kNumTiers> intervals_;

  std::vector<Collector*> collectors_;
  std::vector<std::unique_ptr<CollectorMetrics>> collector_metrics_;
  // Per tier, the indexes into collectors_ of the collectors that poll it.
  std::array<std::vector<size_t>, kNumTiers> tier_collectors_;
  std::array<std::function<void(int64_t)>, kNumTiers> tick_hooks_;
  std::array<prometheus::Counter*, kNumTiers> overrun_counters_{};
  std::array<prometheus::Counter*, kNumTiers> tick_counters_{};
  // Each tier's time column in the store; written only by its tick thread.
  std::array<TickColumn*, kNumTiers> columns_{};
  // Steady-clock time of each tier's last completed tick (ns since the
  // steady epoch; 0: none yet).
  std::array<std::atomic<int64_t>, kNumTiers> last_tick_ns_{};
  std::array<std::atomic<uint64_t>, kNumTiers> overruns_{};
  std::array<std::atomic<uint64_t>, kNumTiers> ticks_{};
  LogRateLimiter log_limiter_{absl::Seconds(10)};

  StopSignal stop_;
  std::vector<std::thread> threads_;
  std::atomic<bool> started_{false};
};

}  // namespace fabricscope
