// Test helpers for the netdev collector tests: shell commands, uniquely named
// veth pairs and network namespaces that are always removed (RAII), and a
// PollContext that records errors.
//
// Tests run as root (CI does). Every interface and namespace name contains the
// test's pid, so concurrent runs never collide; destructors delete them even
// when an assertion fails.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "collectors/collector.h"
#include "store/store.h"

namespace fabricscope::netdev_test {

struct CommandResult {
  int status = -1;  // exit status, -1 if it could not run
  std::string output;
};

// Runs `cmd` through /bin/sh with stderr folded into the output.
inline CommandResult Run(const std::string& cmd) {
  CommandResult r;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return r;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.output.append(buf, n);
  int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A unique interface name (at most 15 characters): prefix (<= 4 chars), pid,
// tag.
inline std::string UniqueIfName(absl::string_view prefix, absl::string_view tag) {
  return absl::StrCat(prefix, getpid() % 10000000, tag);
}

// A veth pair in the current namespace; deleting one end deletes both.
class ScopedVeth {
 public:
  ScopedVeth(std::string a, std::string b) : a_(std::move(a)), b_(std::move(b)) {}
  ~ScopedVeth() { Delete(); }
  ScopedVeth(const ScopedVeth&) = delete;
  ScopedVeth& operator=(const ScopedVeth&) = delete;

  CommandResult Create() {
    CommandResult r = Run(absl::StrCat("ip link add ", a_, " type veth peer name ", b_));
    if (r.status == 0) created_ = true;
    return r;
  }
  CommandResult Delete() {
    if (!created_) return {0, ""};
    created_ = false;
    return Run(absl::StrCat("ip link del ", a_));
  }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
  bool created_ = false;
};

class ScopedNetns {
 public:
  explicit ScopedNetns(std::string name) : name_(std::move(name)) {}
  ~ScopedNetns() {
    if (created_) Run(absl::StrCat("ip netns del ", name_));
  }
  ScopedNetns(const ScopedNetns&) = delete;
  ScopedNetns& operator=(const ScopedNetns&) = delete;

  CommandResult Create() {
    CommandResult r = Run(absl::StrCat("ip netns add ", name_));
    if (r.status == 0) created_ = true;
    return r;
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  bool created_ = false;
};

// A PollContext for driving a collector by hand: appends go to the store with
// a settable timestamp, errors are recorded.
class RecordingPollContext final : public PollContext {
 public:
  struct RecordedError {
    CollectorErrorCode code;
    std::string key;
    std::string detail;
  };
  explicit RecordingPollContext(Store* store) : store_(store) {}
  Tier tier() const override { return Tier::kHot; }
  int64_t ts_ns() const override { return ts_ns_; }
  void Append(SeriesId id, uint64_t raw) override { store_->Append(id, ts_ns_, raw); }
  void RecordError(CollectorErrorCode code, absl::string_view key,
                   absl::string_view detail) override {
    errors.push_back({code, std::string(key), std::string(detail)});
  }
  void set_ts_ns(int64_t ts) { ts_ns_ = ts; }
  int Count(CollectorErrorCode code) const {
    int n = 0;
    for (const auto& e : errors) n += e.code == code;
    return n;
  }
  std::vector<RecordedError> errors;

 private:
  Store* store_;
  int64_t ts_ns_ = 1'700'000'000'000'000'000;
};

}  // namespace fabricscope::netdev_test
