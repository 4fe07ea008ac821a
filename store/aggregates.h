// Sub-second aggregates computed at append time, so that what happened between
// two Prometheus scrapes survives the scrape interval (DESIGN.md section 7).
// Nothing here resets on read: any number of scrapers see the same values.
//
//  - PeakWindow: the highest valid per-poll-interval rate within the trailing
//    peak window. Rates are kept as per-bucket maxima in a ring of
//    ceil(window / width) + 1 buckets (width = max(1 s, window / 16)), so a
//    peak stays visible for at least `window` and at most `window + width`
//    after the interval that produced it. O(1) amortised per sample (the
//    maximum of the older buckets is recomputed once per bucket change),
//    bounded memory per series.
//  - BurstWindow: the trailing 1 s mean rate of a counter: the valid intervals
//    that ended within the second before the judged interval began, kept as
//    100 ms buckets of summed deltas and interval lengths (so the mean covers
//    1.0 to 1.1 s). An interval is a microburst when its rate exceeds
//    burst_factor x that mean AND the signal's absolute floor (BurstFloorFor);
//    at least 500 ms of valid intervals must precede it.
//    Intervals without a valid rate (first sample, reset, saturation) are not
//    judged and do not enter the mean. The mean's sums are kept from one Add
//    to the next while the interval starts in the same bucket (at 10 ms polls,
//    9 Adds in 10 touch one bucket instead of scanning the ring), exactly
//    equal to a scan of the ring (see win_sum_).
//
// Thread-safety: none; each series' writer drives its own windows under the
// series lock (store.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fabricscope {

// Absolute microburst floors, in the family unit per second, by signal name
// (Signal::name). A rate at or below the floor is never a microburst, however
// quiet the counter was before: it keeps single stray events on idle error
// counters from counting as bursts.
struct BurstFloor {
  absl::string_view signal;
  double per_second;
};
inline constexpr double kDefaultBurstFloor = 100.0;
inline constexpr BurstFloor kBurstFloors[] = {
    {"port_bytes", 1e8},               // 100 MB/s
    {"netdev_bytes", 1e8},             // 100 MB/s
    {"port_packets", 1e5},             //
    {"port_unicast_packets", 1e5},     //
    {"netdev_packets", 1e5},           //
    {"port_multicast_packets", 1e3},   //
    {"rdma_requests", 1e5},            //
    {"ecn_marked_packets", 1e3},       // ECN-marked RoCE packets received
    {"cnp_sent", 1e3},                 //
    {"cnp_handled", 1e3},              //
    {"cnp_ignored", 100},              //
    {"pfc_pause_frames", 1e3},         //
    {"pfc_pause_seconds", 0.05},       // paused 5 % of the interval
    {"ib_port_xmit_wait_ticks", 1e6},  //
    {"rdma_errors", 10},               //
    {"ib_port_errors", 10},            //
    {"discards", 10},                  //
    {"netdev_drops", 10},              //
    {"netdev_errors", 10},             //
};
double BurstFloorFor(absl::string_view signal);

// Window geometry shared by every series of one store.
struct PeakGeometry {
  int64_t width_ns = 1'000'000'000;
  uint32_t buckets = 16;
  static PeakGeometry For(absl::Duration window);
};

class PeakWindow {
 public:
  explicit PeakWindow(const PeakGeometry& g);
  // Adds one interval ending at ts_ns; `valid` false for intervals without a rate.
  void Add(int64_t ts_ns, double rate, bool valid);
  // The peak as of the last Add; false when no valid rate lies in the window.
  bool peak(double* out) const {
    *out = peak_;
    return peak_valid_;
  }
  size_t MemoryBytes() const { return sizeof(*this) + ring_.capacity() * sizeof(Bucket); }

 private:
  struct Bucket {
    int64_t index = INT64_MIN;  // bucket number (ts / width); INT64_MIN = empty
    double max = 0;
  };
  void Recompute();
  void SetCurrentStart(int64_t ts_ns);  // of the bucket of ts_ns, just made current

  PeakGeometry g_;
  std::vector<Bucket> ring_;
  int64_t cur_index_ = INT64_MIN;
  // Where bucket cur_index_ begins (cur_index_ * width), when representable.
  int64_t cur_start_ns_ = 0;
  bool cur_start_valid_ = false;
  double cur_max_ = 0;
  bool cur_valid_ = false;
  double older_max_ = 0;  // max of the older buckets still in the window
  bool older_valid_ = false;
  double peak_ = 0;
  bool peak_valid_ = false;
};

class BurstWindow {
 public:
  static constexpr int kBuckets = 12;  // 11 in the window + the one being filled
  static constexpr int64_t kBucketNs = 100'000'000;
  // Adds one interval [ts_ns - dt_ns, ts_ns] that moved the counter by
  // `delta` (family unit) at `rate` (= delta / dt). Returns true when it is a
  // microburst.
  bool Add(int64_t ts_ns, int64_t dt_ns, double delta, double rate, bool valid, double factor,
           double floor);
  // Where the fields end and the ring begins, and the bucket that an Add at
  // ts_ns writes (for prefetching).
  const void* ring() const { return ring_; }
  const void* BucketOf(int64_t ts_ns) const {
    // (Before 1970 any bucket: this is only a hint.)
    return &ring_[ts_ns >= 0 ? static_cast<uint64_t>(ts_ns) / kBucketNs % kBuckets : 0];
  }
  static constexpr size_t kBucketBytes = 3 * sizeof(int64_t);
  // The trailing mean before the last Add, for tests; false without coverage.
  bool last_mean(double* out) const {
    *out = last_mean_;
    return last_mean_valid_;
  }

 private:
  struct Bucket {
    int64_t index = INT64_MIN;
    double delta = 0;
    int64_t dt_ns = 0;
  };
  bool InWindow(int64_t index) const {
    return index != INT64_MIN && index >= win_hi_ - 10 && index <= win_hi_;
  }
  // What every Add reads and writes comes first (next to the peak window's
  // fields in the store's per-series aggregates), the ring after it: an Add
  // that keeps the sums touches the fields' line and one bucket's.
  //
  // The window's sums as of the last scan of the ring, kept up to date by the
  // Adds since then: the buckets [win_hi_ - 10, win_hi_], while win_ok_. A
  // running sum equals the scan's (which adds in ring order) only when every
  // partial sum is exact: every delta in the window an integer and every
  // bucket at most 2^47, so that the sums stay below 2^53. Otherwise the
  // ring is scanned as before, so the mean is the same to the bit either way.
  double win_sum_ = 0;
  int64_t win_covered_ = 0;
  int64_t win_hi_ = 0;
  int64_t inexact_index_ = INT64_MIN;  // the newest bucket that took an inexact delta
  double last_mean_ = 0;
  bool win_ok_ = false;
  bool last_mean_valid_ = false;
  Bucket ring_[kBuckets];
  static_assert(sizeof(Bucket) == kBucketBytes);
};

}  // namespace fabricscope
