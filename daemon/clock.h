// Time sources. Everything that waits or timestamps goes through a Clock so
// tests advance time instead of sleeping (FakeClock).
//
// Two clocks, on purpose:
//  - steady time drives deadlines (the scheduler's absolute tick deadlines);
//    it never jumps.
//  - realtime (unix nanoseconds) stamps samples, because spans arrive with unix
//    timestamps and must be matched against samples. It can step (NTP); the
//    store tolerates that (see ARCHITECTURE.md, "time").
//
// Thread-safety: all methods of both implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace fabricscope {

using SteadyTime = std::chrono::steady_clock::time_point;
using SteadyDuration = std::chrono::steady_clock::duration;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime SteadyNow() = 0;
  // Unix time in nanoseconds.
  virtual int64_t RealtimeNs() = 0;
  // Blocks until SteadyNow() >= deadline (returns true) or `stop` is notified
  // (returns false). `stop` may be null.
  virtual bool SleepUntil(SteadyTime deadline, const absl::Notification* stop) = 0;
};

// The process's real clocks. A process-wide instance is available from Get().
class RealClock final : public Clock {
 public:
  static RealClock* Get();
  SteadyTime SteadyNow() override { return std::chrono::steady_clock::now(); }
  int64_t RealtimeNs() override;
  bool SleepUntil(SteadyTime deadline, const absl::Notification* stop) override;
};

// A manually advanced clock for tests. Sleepers wake when Advance() moves time
// past their deadline. Realtime moves with steady time unless SetRealtimeNs()
// steps it (to test a realtime step while steady time goes on).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t realtime_ns = 1'700'000'000'000'000'000);
  SteadyTime SteadyNow() override;
  int64_t RealtimeNs() override;
  bool SleepUntil(SteadyTime deadline, const absl::Notification* stop) override;

  void Advance(SteadyDuration d);
  void SetRealtimeNs(int64_t ns);
  // Number of threads blocked in SleepUntil on a deadline still in the
  // future (tests wait for the scheduler to park before advancing).
  int Sleepers();

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  SteadyTime steady_ ABSL_GUARDED_BY(mu_);
  int64_t realtime_ns_ ABSL_GUARDED_BY(mu_);
  std::multiset<SteadyTime> sleepers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fabricscope
