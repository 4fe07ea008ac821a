#include "daemon/clock.h"

#include <time.h>

#include "absl/time/time.h"

namespace fabricscope {

RealClock* RealClock::Get() {
  static RealClock* clock = new RealClock();
  return clock;
}

int64_t RealClock::RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool RealClock::SleepUntil(SteadyTime deadline, const absl::Notification* stop) {
  while (true) {
    SteadyTime now = SteadyNow();
    if (now >= deadline) return true;
    absl::Duration left = absl::FromChrono(deadline - now);
    if (stop != nullptr) {
      if (stop->WaitForNotificationWithTimeout(left)) return false;
    } else {
      absl::SleepFor(left);
    }
  }
}

FakeClock::FakeClock(int64_t realtime_ns)
    : steady_(SteadyTime(std::chrono::hours(1))), realtime_ns_(realtime_ns) {}

SteadyTime FakeClock::SteadyNow() {
  absl::MutexLock lock(&mu_);
  return steady_;
}

int64_t FakeClock::RealtimeNs() {
  absl::MutexLock lock(&mu_);
  return realtime_ns_;
}

bool FakeClock::SleepUntil(SteadyTime deadline, const absl::Notification* stop) {
  absl::MutexLock lock(&mu_);
  auto it = sleepers_.insert(deadline);
  while (steady_ < deadline) {
    if (stop != nullptr && stop->HasBeenNotified()) {
      sleepers_.erase(it);
      return false;
    }
    // Short real waits so a stop notification is noticed promptly.
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(1));
  }
  sleepers_.erase(it);
  return true;
}

void FakeClock::Advance(SteadyDuration d) {
  absl::MutexLock lock(&mu_);
  steady_ += d;
  realtime_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  cv_.SignalAll();
}

void FakeClock::SetRealtimeNs(int64_t ns) {
  absl::MutexLock lock(&mu_);
  realtime_ns_ = ns;
}

int FakeClock::Sleepers() {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (SteadyTime d : sleepers_) n += d > steady_ ? 1 : 0;
  return n;
}

}  // namespace fabricscope
