#include "core/clock.h"

#include <time.h>

#include <thread>

namespace fabricscope {

void StopSignal::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
  }
  cv_.notify_all();
}

bool StopSignal::Notified() const {
  std::lock_guard<std::mutex> lock(mu_);
  return notified_;
}

bool StopSignal::WaitUntil(SteadyTime deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [this] { return notified_; });
  return notified_;
}

RealClock* RealClock::Get() {
  static RealClock* clock = new RealClock();
  return clock;
}

int64_t RealClock::RealtimeNs() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool RealClock::SleepUntil(SteadyTime deadline, const StopSignal* stop) {
  if (stop != nullptr) return !stop->WaitUntil(deadline);
  std::this_thread::sleep_until(deadline);
  return true;
}

FakeClock::FakeClock(int64_t realtime_ns)
    : steady_(SteadyTime(std::chrono::hours(1))), realtime_ns_(realtime_ns) {}

SteadyTime FakeClock::SteadyNow() {
  std::lock_guard<std::mutex> lock(mu_);
  return steady_;
}

int64_t FakeClock::RealtimeNs() {
  std::lock_guard<std::mutex> lock(mu_);
  return realtime_ns_;
}

bool FakeClock::SleepUntil(SteadyTime deadline, const StopSignal* stop) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = sleepers_.insert(deadline);
  while (steady_ < deadline) {
    if (stop != nullptr && stop->Notified()) {
      sleepers_.erase(it);
      return false;
    }
    // Short real waits so a stop notification is noticed promptly.
    cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
  sleepers_.erase(it);
  return true;
}

void FakeClock::Advance(SteadyDuration d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    steady_ += d;
    realtime_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  }
  cv_.notify_all();
}

void FakeClock::SetRealtimeNs(int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  realtime_ns_ = ns;
}

int FakeClock::Sleepers() {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (SteadyTime d : sleepers_) n += d > steady_ ? 1 : 0;
  return n;
}

}  // namespace fabricscope
