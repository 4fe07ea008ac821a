#include "store/aggregates.h"

#include <algorithm>

namespace fabricscope {
namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

size_t Mod(int64_t a, size_t n) {
  int64_t m = a % static_cast<int64_t>(n);
  return static_cast<size_t>(m < 0 ? m + static_cast<int64_t>(n) : m);
}

}  // namespace

double BurstFloorFor(absl::string_view signal) {
  for (const BurstFloor& f : kBurstFloors) {
    if (f.signal == signal) return f.per_second;
  }
  return kDefaultBurstFloor;
}

PeakGeometry PeakGeometry::For(absl::Duration window) {
  PeakGeometry g;
  const int64_t window_ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(window));
  g.width_ns = std::max<int64_t>(1'000'000'000, (window_ns + 15) / 16);
  g.buckets = static_cast<uint32_t>((window_ns + g.width_ns - 1) / g.width_ns) + 1;
  return g;
}

PeakWindow::PeakWindow(const PeakGeometry& g) : g_(g), ring_(g.buckets) {}

void PeakWindow::Recompute() {
  older_valid_ = false;
  older_max_ = 0;
  const int64_t lo = cur_index_ - static_cast<int64_t>(g_.buckets) + 1;
  for (const Bucket& b : ring_) {
    if (b.index == INT64_MIN || b.index < lo || b.index >= cur_index_) continue;
    if (!older_valid_ || b.max > older_max_) older_max_ = b.max;
    older_valid_ = true;
  }
}

void PeakWindow::SetCurrentStart(int64_t ts_ns) {
  const auto into = static_cast<int64_t>(Mod(ts_ns, static_cast<size_t>(g_.width_ns)));
  cur_start_valid_ = ts_ns >= INT64_MIN + into;  // else the start is below INT64_MIN
  cur_start_ns_ = cur_start_valid_ ? ts_ns - into : 0;
}

void PeakWindow::Add(int64_t ts_ns, double rate, bool valid) {
  // Most intervals end in the current bucket: no division for those (the
  // difference is taken unsigned, so it cannot overflow).
  const bool in_current = cur_index_ != INT64_MIN && cur_start_valid_ && ts_ns >= cur_start_ns_ &&
                          static_cast<uint64_t>(ts_ns) - static_cast<uint64_t>(cur_start_ns_) <
                              static_cast<uint64_t>(g_.width_ns);
  const int64_t idx = in_current ? cur_index_ : FloorDiv(ts_ns, g_.width_ns);
  if (cur_index_ == INT64_MIN) {
    cur_index_ = idx;
    SetCurrentStart(ts_ns);
  } else if (idx > cur_index_) {
    ring_[Mod(cur_index_, ring_.size())] = {cur_valid_ ? cur_index_ : INT64_MIN, cur_max_};
    cur_index_ = idx;
    SetCurrentStart(ts_ns);
    cur_valid_ = false;
    cur_max_ = 0;
    Recompute();
  }
  // idx < cur_index_ (the realtime clock stepped back): counted in the current bucket.
  if (valid && (!cur_valid_ || rate > cur_max_)) {
    cur_max_ = rate;
    cur_valid_ = true;
  }
  peak_valid_ = cur_valid_ || older_valid_;
  peak_ = cur_valid_ && older_valid_ ? std::max(cur_max_, older_max_)
          : cur_valid_               ? cur_max_
                                     : older_max_;
}

bool BurstWindow::Add(int64_t ts_ns, int64_t dt_ns, double delta, double rate, bool valid,
                      double factor, double floor) {
  // The trailing mean over intervals that ended within the second before this
  // interval began.
  const int64_t hi = FloorDiv(ts_ns - dt_ns, kBucketNs);
  const int64_t lo = hi - 10;
  double sum = 0;
  int64_t covered = 0;
  if (win_ok_ && hi == win_hi_) {
    sum = win_sum_;
    covered = win_covered_;
  } else {
    for (const Bucket& b : ring_) {
      if (b.index == INT64_MIN || b.index < lo || b.index > hi) continue;
      sum += b.delta;
      covered += b.dt_ns;
    }
    win_hi_ = hi;
    win_sum_ = sum;
    win_covered_ = covered;
    win_ok_ = inexact_index_ < lo;  // no bucket of the window took an inexact delta
  }
  last_mean_valid_ = covered >= kBucketNs * 5;
  last_mean_ = covered > 0 ? sum * 1e9 / static_cast<double>(covered) : 0;
  if (!valid || dt_ns <= 0) return false;
  const bool burst = last_mean_valid_ && rate > factor * last_mean_ && rate > floor;
  const int64_t idx = FloorDiv(ts_ns, kBucketNs);
  Bucket& slot = ring_[Mod(idx, kBuckets)];
  if (slot.index != idx) {
    if (InWindow(slot.index)) win_ok_ = false;  // a bucket of the window leaves the ring
    slot = {idx, 0, 0};
  }
  slot.delta += delta;
  slot.dt_ns += dt_ns;
  // Exact: an integer in [0, 2^47] whose bucket stays within 2^47 (NaN fails).
  constexpr double kExactMax = 140737488355328.0;  // 2^47
  const bool exact = delta >= 0 && delta <= kExactMax &&
                     delta == static_cast<double>(static_cast<int64_t>(delta)) &&
                     slot.delta <= kExactMax;
  if (!exact) {
    inexact_index_ = std::max(inexact_index_, idx);
    if (InWindow(idx)) win_ok_ = false;
  } else if (win_ok_ && InWindow(idx)) {
    win_sum_ += delta;
    win_covered_ += dt_ns;
  }
  return burst;
}

}  // namespace fabricscope
