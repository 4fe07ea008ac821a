// The tick time column: the timestamps of one scheduler tier's ticks, held
// once for every series that tier polls (store.h). A chunk of such a series
// stores tick indexes (chunk.h) and refers to the TimeBlock that holds those
// ticks' timestamps, so the jitter of a realtime clock read costs once per
// tick, not once per series.
//
// A TimeBlock holds up to kTicksPerBlock consecutive ticks, from first_tick
// on. Encoding (MSB first), after the first timestamp which lives in the
// block: d = zig-zag((ts - prev_ts) - interval) (mod 2^64), where interval is
// the tier's nominal tick interval:
//   '0' (0) | '10'+12 bits | '110'+17 bits | '1110'+32 bits | '1111'+64 bits
// A tick +-20 us off its schedule costs about 20 bits.
//
// Lifetime: the store's column owns the open block and appends to it; chunks
// (sealed or head) share ownership of the block they refer to. `refs` is the
// store's budget reference count (the open column, each chunk, a restore in
// progress): when it drops to zero the store releases the block's bytes;
// the memory goes with the last shared_ptr (a reader may hold one longer).
//
// Thread-safety: Add and Seal are called by the column's one writer; every
// other method is safe from any thread. A reader copies the open block's
// bytes under its mutex (at most kBlockBytes) and decodes them outside it; a
// sealed block is immutable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace fabricscope {

inline constexpr uint32_t kTicksPerBlock = 8192;
// The open block's buffer starts at kInitialBlockBytes and doubles (Grow) up
// to kBlockBytes.
inline constexpr size_t kInitialBlockBytes = 256;
inline constexpr size_t kBlockBytes = 32 << 10;

// A block as the state snapshot writes and reads it.
struct TimeBlockImage {
  int64_t first_tick = 0;
  int64_t interval_ns = 0;
  int64_t first_ts = 0;
  int64_t last_ts = 0;
  uint32_t count = 0;  // ticks held
  uint32_t bits = 0;   // bits used in `data`
  std::vector<uint8_t> data;
};

class TimeBlock {
 public:
  // An open block; `first_tick` is the index of the first tick Add records.
  TimeBlock(int64_t first_tick, int64_t interval_ns);
  TimeBlock(const TimeBlock&) = delete;
  TimeBlock& operator=(const TimeBlock&) = delete;

  // A sealed block from a snapshot image; null (with `error` set) when the
  // image does not decode to its header.
  static std::shared_ptr<TimeBlock> FromImage(const TimeBlockImage& image, std::string* error);

  // Writer: records the next tick's timestamp; false (nothing recorded) when
  // the buffer (or the block) is full.
  bool Add(int64_t ts_ns);
  // Writer: whether Grow can make room for more ticks.
  bool CanGrow() const;
  // Writer: doubles the buffer (at most kBlockBytes).
  void Grow();
  // Writer: no more ticks; shrinks the buffer to what is used.
  void Seal();

  // Bytes the block's buffer takes now.
  size_t capacity() const;
  // Ticks recorded so far.
  uint32_t count() const;
  // Appends the timestamps of every tick recorded so far to `out` (tick
  // first_tick + i is (*out)[i] for the part appended).
  void Read(std::vector<int64_t>* out) const;
  TimeBlockImage Image() const;

  // Unique across the process (never reused): a cache key.
  const uint64_t serial;
  const int64_t first_tick;
  const int64_t interval_ns;

  // The store's budget bookkeeping (see the header comment).
  std::atomic<int64_t> refs{0};
  uint64_t accounted = 0;

 private:
  mutable std::mutex mu_;
  bool sealed_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t count_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t bits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t first_ts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_ts_ ABSL_GUARDED_BY(mu_) = 0;
  size_t cap_ ABSL_GUARDED_BY(mu_) = 0;
  // Written only by the writer under mu_; immutable once sealed_.
  std::unique_ptr<uint8_t[]> data_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fabricscope
