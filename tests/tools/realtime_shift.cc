// LD_PRELOAD shim for tests/e2e/fault_clock_test.sh: steps the realtime clock
// of one process (and only realtime) without touching the machine's clock.
//
// clock_gettime(CLOCK_REALTIME[_COARSE]), gettimeofday() and time() return
// the real time plus an offset in nanoseconds read from the file named by
// $FABRICSCOPE_TEST_REALTIME_OFFSET_FILE (one signed integer; a missing or
// unreadable file means 0). The file is re-read at most every 5 ms of
// CLOCK_MONOTONIC, so a test steps the clock by rewriting it. CLOCK_MONOTONIC,
// CLOCK_BOOTTIME and the other clocks are untouched: steady time goes on,
// as when NTP steps the clock.
//
// Built by the test with the system compiler (no sanitizer: it is preloaded
// ahead of the sanitizer runtimes). Not part of the daemon.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace {

using ClockGettimeFn = int (*)(clockid_t, struct timespec*);

std::atomic<ClockGettimeFn> real_clock_gettime{nullptr};
std::atomic<int64_t> offset_ns{0};
std::atomic<int64_t> next_check_ns{0};

ClockGettimeFn Real() {
  ClockGettimeFn f = real_clock_gettime.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<ClockGettimeFn>(dlsym(RTLD_NEXT, "clock_gettime"));
    real_clock_gettime.store(f, std::memory_order_release);
  }
  return f;
}

int64_t ReadOffset() {
  const char* path = getenv("FABRICSCOPE_TEST_REALTIME_OFFSET_FILE");
  if (path == nullptr) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[64];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return offset_ns.load(std::memory_order_relaxed);  // mid-rewrite: keep
  buf[n] = '\0';
  char* end = nullptr;
  long long v = strtoll(buf, &end, 10);
  if (end == buf) return offset_ns.load(std::memory_order_relaxed);
  return v;
}

int64_t Offset() {
  struct timespec mono;
  Real()(CLOCK_MONOTONIC, &mono);
  const int64_t now = static_cast<int64_t>(mono.tv_sec) * 1000000000 + mono.tv_nsec;
  int64_t next = next_check_ns.load(std::memory_order_acquire);
  if (now >= next &&
      next_check_ns.compare_exchange_strong(next, now + 5000000, std::memory_order_acq_rel)) {
    offset_ns.store(ReadOffset(), std::memory_order_release);
  }
  return offset_ns.load(std::memory_order_acquire);
}

void Shift(struct timespec* ts, int64_t off) {
  int64_t ns = static_cast<int64_t>(ts->tv_sec) * 1000000000 + ts->tv_nsec + off;
  ts->tv_sec = static_cast<time_t>(ns / 1000000000);
  ts->tv_nsec = static_cast<long>(ns % 1000000000);
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000;
    ts->tv_sec -= 1;
  }
}

}  // namespace

extern "C" {

int clock_gettime(clockid_t clk, struct timespec* ts) {
  const int rc = Real()(clk, ts);
  if (rc == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) Shift(ts, Offset());
  return rc;
}

int gettimeofday(struct timeval* tv, void* /*tz*/) {
  struct timespec ts;
  const int rc = clock_gettime(CLOCK_REALTIME, &ts);
  if (rc == 0 && tv != nullptr) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return rc;
}

time_t time(time_t* out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

}  // extern "C"
