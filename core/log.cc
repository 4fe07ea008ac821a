#include "core/log.h"

#include <unistd.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"

namespace fabricscope {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_capture_mu;
std::string* g_capture = nullptr;  // guarded by g_capture_mu

bool NeedsQuotes(absl::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      return true;
    }
  }
  return false;
}

// A value with a space, quote, '=', backslash or control character (or an
// empty one) is written as a JSON string literal (core/json.h); others bare.
void AppendValue(std::string* out, absl::string_view v) {
  if (!NeedsQuotes(v)) {
    out->append(v.data(), v.size());
    return;
  }
  AppendJsonString(out, v);
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(text);
  if (t == "debug") return LogLevel::kDebug;
  if (t == "info") return LogLevel::kInfo;
  if (t == "warn" || t == "warning") return LogLevel::kWarn;
  if (t == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level \"", text, "\" (allowed: debug, info, warn, error)"));
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

std::string FormatLogLine(absl::Time ts, LogLevel level, absl::string_view component,
                          absl::string_view msg, std::initializer_list<LogField> fields) {
  std::string line;
  line.reserve(128);
  absl::StrAppend(&line, "ts=", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", ts, absl::UTCTimeZone()),
                  " level=", LogLevelName(level), " component=");
  AppendValue(&line, component);
  line.append(" msg=");
  AppendValue(&line, msg);
  for (const auto& [key, value] : fields) {
    absl::StrAppend(&line, " ", key, "=");
    AppendValue(&line, value);
  }
  line.push_back('\n');
  return line;
}

void Log(LogLevel level, absl::string_view component, absl::string_view msg,
         std::initializer_list<LogField> fields) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  std::string line = FormatLogLine(absl::Now(), level, component, msg, fields);
  {
    std::lock_guard<std::mutex> lock(g_capture_mu);
    if (g_capture != nullptr) {
      g_capture->append(line);
      return;
    }
  }
  // One write per line: lines from different threads never interleave.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;  // stderr gone: nothing sensible to do
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void SetLogCaptureForTest(std::string* sink) {
  std::lock_guard<std::mutex> lock(g_capture_mu);
  g_capture = sink;
}

bool LogRateLimiter::Allow(absl::string_view key, absl::Time now, uint64_t* suppressed) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[key];
  if (now - e.last >= interval_) {
    e.last = now;
    if (suppressed != nullptr) *suppressed = e.suppressed;
    e.suppressed = 0;
    return true;
  }
  ++e.suppressed;
  return false;
}

}  // namespace fabricscope
