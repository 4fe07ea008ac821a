// Turns successive raw readings of one counter into deltas, with the exact
// semantics of ../shared/reference/counters.md:
//
//  - kCounter64: a decrease is a reset (driver reload, FW reset).
//  - kWrap32: a decrease is a 32-bit wrap when the wrapped distance is less than
//    half the range (a 10 ms - 1 s poller never sees 2^31 events in one
//    interval); otherwise it is a reset. A value above 2^32-1 means the driver
//    reports 64 bits after all: from then on it is treated as kCounter64.
//  - kSaturating: reaching 2^width-1 marks the counter saturated; while it stays
//    there there is no delta and no rate (never an invented zero). Leaving the
//    maximum downwards is a clear (PMA Set) and counts as a reset.
//  - After a reset the delta restarts: the interval that contains the reset
//    contributes no delta (the counter's value at the moment of the reset is
//    unknown), the next interval counts normally.
//
// Not thread-safe: one tracker per series, driven by its single writer.
#pragma once

#include <cstdint>

#include "core/series.h"

namespace fabricscope {

enum class CounterEvent : uint8_t {
  kFirst,      // first reading: no delta yet
  kNormal,     // delta is valid
  kWrapped,    // delta is valid, computed across a 32-bit wrap
  kReset,      // went backwards: counted as a reset, no delta this interval
  kSaturated,  // at its maximum: no rate can be derived (delta may hold the last climb)
  kGauge,      // a gauge series: no delta semantics
};

struct CounterUpdate {
  CounterEvent event = CounterEvent::kFirst;
  uint64_t delta = 0;       // raw units
  bool rate_valid = false;  // whether delta / interval is a true rate
};

class CounterTracker {
 public:
  explicit CounterTracker(CounterSemantics sem) : sem_(sem) {}

  // The next raw reading. The common case, a counter that moved forward (or
  // not at all) within its range, is inline; the rest in UpdateSlow.
  CounterUpdate Update(uint64_t raw) {
    if (has_value_ && raw >= last_ && sem_.kind != CounterKind::kGauge &&
        (sem_.kind != CounterKind::kSaturating || raw < sem_.MaxValue()) &&
        (sem_.kind != CounterKind::kWrap32 || raw <= UINT32_MAX)) {
      const uint64_t prev = last_;
      last_ = raw;
      saturated_ = false;  // only a saturating counter ever sets it
      return CounterUpdate{CounterEvent::kNormal, raw - prev, true};
    }
    return UpdateSlow(raw);
  }

  bool saturated() const { return saturated_; }
  bool has_value() const { return has_value_; }
  uint64_t last() const { return last_; }
  const CounterSemantics& semantics() const { return sem_; }
  // Continues from a saved state (daemon/state/snapshot.h).
  void Restore(bool has_value, bool saturated, uint64_t last) {
    has_value_ = has_value;
    saturated_ = saturated;
    last_ = last;
  }

 private:
  CounterUpdate UpdateSlow(uint64_t raw);

  CounterSemantics sem_;
  bool has_value_ = false;
  bool saturated_ = false;
  uint64_t last_ = 0;
};

// Delta of a counter between the first and the last of `n` raw readings, with
// the same semantics (used by range queries). `resets` receives the number of
// resets seen, `saturated` whether the counter sat at its maximum at any point.
uint64_t CounterDeltaOver(CounterSemantics sem, const uint64_t* values, size_t n, uint64_t* resets,
                          bool* saturated);

}  // namespace fabricscope
