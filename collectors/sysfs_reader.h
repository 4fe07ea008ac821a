// Small helpers for reading sysfs (or a fake tree laid out like it).
//
// CounterFile is the hot-path primitive: a counter file opened once and read
// with pread(2) at offset 0 into a fixed stack buffer, parsed strictly. It
// allocates nothing on success and costs one syscall per read, so a collector
// can read hundreds of counters every 10 ms. Re-open only after hot-plug.
//
// Strict parsing (ParseCounter): the whole content must be a decimal u64 and
// its trailing '\n' (a value without it is a truncated or torn read). Empty,
// non-numeric, signed, padded,
// overflowing (> 2^64-1) or over-long content is an error, never a zero.
//
// Errors are absl::Status values built with core/errors.h (ErrnoToStatus for
// open/read errno, UnparsableError -- DataLoss -- for garbage content; the
// pre-4.20 kernel text "N/A (no PMA)" is Unimplemented: the device cannot
// answer). The collector error class is CollectorErrorCodeOf(status)
// (collectors/collector.h), applied by PollContext::Error.
//
// ReadAttribute/ListDir are for discovery (open/read/close each call); they are
// not meant for the per-tick path.
//
// Thread-safety: a CounterFile is not synchronised; use each from one thread at
// a time (one tier thread owns it). The free functions are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fabricscope {

// Parses sysfs counter text strictly (see above). Errors are DataLoss
// (UnparsableError), or Unimplemented for "N/A ..." (a counter the device
// cannot provide).
absl::StatusOr<uint64_t> ParseCounter(absl::string_view text);

// A counter file kept open. Movable, not copyable; closes on destruction.
class CounterFile {
 public:
  // Largest content accepted: 20 digits + '\n' fit easily; longer is garbage.
  static constexpr size_t kBufferSize = 64;

  CounterFile() = default;
  ~CounterFile() { Close(); }
  CounterFile(CounterFile&& other) noexcept;
  CounterFile& operator=(CounterFile&& other) noexcept;
  CounterFile(const CounterFile&) = delete;
  CounterFile& operator=(const CounterFile&) = delete;

  // Opens `path` read-only (O_CLOEXEC). Errors as listed above.
  static absl::StatusOr<CounterFile> Open(const std::string& path);

  // One pread at offset 0 + ParseCounter. Precondition: is_open().
  absl::StatusOr<uint64_t> Read() const;

  bool is_open() const { return fd_ >= 0; }
  void Close();
  int fd() const { return fd_; }

 private:
  explicit CounterFile(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Reads a small text attribute (state, rate, link_layer, ...) and strips
// trailing whitespace. Opens and closes the file: discovery only.
absl::StatusOr<std::string> ReadAttribute(const std::string& path);

// Reads a small decimal attribute (an ECN enable flag, hw_counters/lifespan):
// ReadAttribute, then the text without surrounding whitespace must be an
// unsigned 64-bit decimal; UnparsableError (DataLoss) otherwise. Discovery
// and config-tier use only (opens and closes the file).
absl::StatusOr<uint64_t> ReadUintAttribute(const std::string& path);

// Names in a directory (no "." / ".."), sorted. Follows symlinks like sysfs
// class directories need. NotFound if the directory does not exist.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path);

}  // namespace fabricscope
