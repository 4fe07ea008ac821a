// The window arithmetic of correlation: what one counter series did inside a
// span's window [t0, t1] and in the baseline before it -- delta, rate,
// baseline rate, peak rate, coverage and why parts are not covered -- from
// its samples (ComputeWindowStats) or straight from the store
// (ReadWindowStats). correlator.h's file comment says how samples map to a
// window. Used by the correlator (each series in a span's scope) and the
// process scope (a process's QP counters, process_scope.h); it knows neither.
//
// Pure functions; ReadWindowStats is thread-safe as the store is.
#pragma once

#include <cstdint>

#include "absl/types/span.h"
#include "core/series.h"

namespace fabricscope {

class Store;

// The numbers for one series and one window (pure function of the samples).
struct WindowStats {
  double delta = 0;              // family unit, attributed to [t0, t1]
  double rate = 0;               // delta / covered seconds (0 when nothing covered)
  double baseline_rate = 0;      // over the covered part of the baseline window
  double peak_rate = 0;          // highest rate of an interval overlapping [t0, t1]
  double coverage = 0;           // covered fraction of [t0, t1], 0..1
  double baseline_coverage = 0;  // covered fraction of the baseline window
  uint64_t resets = 0;           // resets/saturations in intervals overlapping [t0, t1]
  // Why parts of [t0, t1] are not covered, in nanoseconds of the window
  // (together they make up the uncovered part):
  int64_t saturated_ns = 0;     // intervals of a saturated reading (no rate)
  int64_t reset_ns = 0;         // intervals containing a reset
  int64_t gap_ns = 0;           // intervals longer than max_gap_ns
  int64_t before_first_ns = 0;  // before the first sample (all of it without samples)
  int64_t after_last_ns = 0;    // after the last sample
};

// Computes WindowStats from `samples` (oldest first; should include the last
// sample at or before t0 - baseline and the first at or after t1). `scale`
// converts raw units to the family unit. A zero-length window is treated as
// 1 ns long.
WindowStats ComputeWindowStats(CounterSemantics semantics, double scale,
                               absl::Span<const Sample> samples, int64_t t0_ns, int64_t t1_ns,
                               int64_t baseline_ns, int64_t max_gap_ns);

// The same WindowStats read from the store: the samples of
// [t0 - baseline_ns - max_gap_ns, t1 + max_gap_ns] of series `id`, except
// that a chunk, or a 64-sample segment of a long one, wholly inside the
// baseline window (or wholly before it) is taken from its summary
// (Store::ScanRange) instead of its samples, and so are a segment's samples
// inside the baseline where all its intervals are valid, and, for a scale
// that is a power of two, a segment wholly inside the window whose intervals
// are all valid (their deltas, lengths and peak rate are exact); chunks or
// segments after the window are skipped once an interval starts past t1.
// Equal to ComputeWindowStats over store.ReadRange of that range (the same
// counter semantics, resets, saturation and gaps), up to floating-point
// rounding of baseline_rate (the summed deltas are added in another order).
WindowStats ReadWindowStats(const Store& store, SeriesId id, CounterSemantics semantics,
                            double scale, int64_t t0, int64_t t1, int64_t baseline_ns,
                            int64_t max_gap_ns);

}  // namespace fabricscope
