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
// Synchronisation in this project uses the standard library (std::mutex,
// std::condition_variable) rather than Abseil's Mutex: Debian's Abseil is not
// built with ThreadSanitizer, so absl locks are invisible to the TSan build.
// StopSignal is the one-shot "please stop" flag that sleepers wait on.
//
// Thread-safety: all methods of all classes here are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

namespace fabricscope {

using SteadyTime = std::chrono::steady_clock::time_point;
using SteadyDuration = std::chrono::steady_clock::duration;

// A one-shot notification (like Abseil's Notification, but visible to TSan).
class StopSignal {
 public:
  void Notify();
  bool Notified() const;
  // Waits until notified or `deadline` (steady clock); returns Notified().
  bool WaitUntil(SteadyTime deadline) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;  // guarded by mu_
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime SteadyNow() = 0;
  // Unix time in nanoseconds.
  virtual int64_t RealtimeNs() = 0;
  // Blocks until SteadyNow() >= deadline (returns true) or `stop` is notified
  // (returns false). `stop` may be null.
  virtual bool SleepUntil(SteadyTime deadline, const StopSignal* stop) = 0;
};

// The process's real clocks. A process-wide instance is available from Get().
class RealClock final : public Clock {
 public:
  static RealClock* Get();
  SteadyTime SteadyNow() override { return std::chrono::steady_clock::now(); }
  int64_t RealtimeNs() override;
  bool SleepUntil(SteadyTime deadline, const StopSignal* stop) override;
};

// A manually advanced clock for tests. Sleepers wake when Advance() moves time
// past their deadline. Realtime moves with steady time unless SetRealtimeNs()
// steps it (to test a realtime step while steady time goes on).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t realtime_ns = 1'700'000'000'000'000'000);
  SteadyTime SteadyNow() override;
  int64_t RealtimeNs() override;
  bool SleepUntil(SteadyTime deadline, const StopSignal* stop) override;

  void Advance(SteadyDuration d);
  void SetRealtimeNs(int64_t ns);
  // Number of threads blocked in SleepUntil on a deadline still in the
  // future (tests wait for the scheduler to park before advancing).
  int Sleepers();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  SteadyTime steady_;                   // guarded by mu_
  int64_t realtime_ns_;                 // guarded by mu_
  std::multiset<SteadyTime> sleepers_;  // guarded by mu_
};

}  // namespace fabricscope
