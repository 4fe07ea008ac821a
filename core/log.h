// Structured logging to stderr, one logfmt line per event:
//
//   ts=2026-11-30T18:41:35.123Z level=warn component=rdma_sysfs msg="device vanished" device=mlx5_1
//
// Thread-safe: a line is formatted into a buffer and written with one write(2)
// call, so lines from several threads never interleave. The level is global and
// can be changed at any time (SIGHUP reload).
//
// Environmental errors that can repeat every tick (a vanished device, EACCES on
// a counter file) go through LogRateLimiter so that a broken device costs one
// line per interval, not a hundred per second; the suppressed count is reported
// on the next line that gets through.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fabricscope {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);
absl::string_view LogLevelName(LogLevel level);

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

// A key=value pair of a log line. A value that is empty or holds a space, '"',
// '=', '\\' or a control character is written as a JSON string literal
// (core/json.h: \" \\ \n \t \r, other control characters as \u00XX); others
// bare.
using LogField = std::pair<absl::string_view, std::string>;

// Writes one line if `level` is enabled. `component` names the emitter
// ("daemon", "scheduler", a collector name).
void Log(LogLevel level, absl::string_view component, absl::string_view msg,
         std::initializer_list<LogField> fields = {});

// Formats one logfmt line without writing it (exposed for tests).
std::string FormatLogLine(absl::Time ts, LogLevel level, absl::string_view component,
                          absl::string_view msg, std::initializer_list<LogField> fields);

// Redirects log output into a string (tests). Pass nullptr to restore stderr.
void SetLogCaptureForTest(std::string* sink);

// Lets through at most one line per key per `interval`; counts the rest.
// Thread-safe. Keys are bounded by the caller (one per device or file).
class LogRateLimiter {
 public:
  explicit LogRateLimiter(absl::Duration interval) : interval_(interval) {}

  // Returns true if a line for `key` may be written now. When it returns true,
  // *suppressed holds how many lines were dropped for this key since the last
  // one that got through.
  bool Allow(absl::string_view key, absl::Time now, uint64_t* suppressed);
  bool Allow(absl::string_view key, uint64_t* suppressed) {
    return Allow(key, absl::Now(), suppressed);
  }

 private:
  struct Entry {
    absl::Time last = absl::InfinitePast();
    uint64_t suppressed = 0;
  };
  const absl::Duration interval_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_;  // guarded by mu_
};

}  // namespace fabricscope
