// Building blocks shared by the detectors: the debouncer that turns a
// per-interval condition into episodes, a trailing-window sum, and a rate
// judged against its own baseline.
//
// Thread-safety: none; each instance belongs to one detector state, guarded
// by the detector engine.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <utility>

#include "store/store.h"

namespace fabricscope {

// Turns a condition judged per poll interval [start, end] into episodes:
// an episode starts once the condition has held continuously for `on_ns`
// (0: on the first interval it holds) and ends once it has been false
// continuously for `off_ns` (0: on the first interval it is false). The
// episode's start is the start of the first interval of the run that
// started it; its end is the start of the first interval of the run that
// ended it. So it cannot flap faster than on_ns / off_ns.
class Debouncer {
 public:
  enum class Transition { kNone, kStarted, kEnded };

  Debouncer(int64_t on_ns, int64_t off_ns) : on_ns_(on_ns), off_ns_(off_ns) {}

  Transition Update(int64_t start_ns, int64_t end_ns, bool condition) {
    if (!active_) {
      if (!condition) {
        pending_ = false;
        return Transition::kNone;
      }
      if (!pending_) {
        pending_ = true;
        since_ns_ = start_ns;
      }
      if (end_ns - since_ns_ >= on_ns_) {
        active_ = true;
        pending_ = false;
        episode_start_ns_ = since_ns_;
        return Transition::kStarted;
      }
      return Transition::kNone;
    }
    if (condition) {
      pending_ = false;
      return Transition::kNone;
    }
    if (!pending_) {
      pending_ = true;
      since_ns_ = start_ns;
    }
    if (end_ns - since_ns_ >= off_ns_) {
      active_ = false;
      pending_ = false;
      episode_end_ns_ = since_ns_;
      return Transition::kEnded;
    }
    return Transition::kNone;
  }

  // Ends an active episode without a judged interval (its input stopped): the
  // next interval that holds starts a new one.
  void Reset() {
    active_ = false;
    pending_ = false;
  }

  bool active() const { return active_; }
  int64_t episode_start_ns() const { return episode_start_ns_; }
  int64_t episode_end_ns() const { return episode_end_ns_; }

 private:
  int64_t on_ns_;
  int64_t off_ns_;
  bool active_ = false;
  bool pending_ = false;
  int64_t since_ns_ = 0;
  int64_t episode_start_ns_ = 0;
  int64_t episode_end_ns_ = 0;
};

// The sum of a quantity and the time covered over a trailing window, kept in
// kBuckets fixed buckets of window / (kBuckets - 1) (so the window is covered
// by kBuckets - 1 to kBuckets buckets). O(1) per Add, O(kBuckets) per Sum.
class WindowSum {
 public:
  static constexpr int kBuckets = 11;

  explicit WindowSum(int64_t window_ns)
      : bucket_ns_(std::max<int64_t>(1, window_ns / (kBuckets - 1))) {}

  // Adds an interval ending at end_ns that lasted dt_ns and moved `value`.
  void Add(int64_t end_ns, int64_t dt_ns, double value) {
    Bucket& b = At(end_ns);
    b.value += value;
    b.dt_ns += dt_ns;
  }
  // Sum and covered time of the buckets within the window ending at now_ns.
  void Sum(int64_t now_ns, double* value, double* seconds) const {
    const int64_t cur = Index(now_ns);
    double v = 0;
    int64_t dt = 0;
    for (const Bucket& b : ring_) {
      if (b.index > cur - kBuckets && b.index <= cur) {
        v += b.value;
        dt += b.dt_ns;
      }
    }
    *value = v;
    *seconds = static_cast<double>(dt) * 1e-9;
  }
  // Rate over the window (value per second); 0 with nothing covered.
  double Rate(int64_t now_ns) const {
    double v = 0, s = 0;
    Sum(now_ns, &v, &s);
    return s > 0 ? v / s : 0;
  }

 private:
  struct Bucket {
    int64_t index = INT64_MIN;
    double value = 0;
    int64_t dt_ns = 0;
  };
  int64_t Index(int64_t ts_ns) const {
    return ts_ns >= 0 ? ts_ns / bucket_ns_ : -((-ts_ns + bucket_ns_ - 1) / bucket_ns_);
  }
  Bucket& At(int64_t ts_ns) {
    const int64_t idx = Index(ts_ns);
    Bucket& b = ring_[static_cast<size_t>(((idx % kBuckets) + kBuckets) % kBuckets)];
    if (b.index != idx) b = Bucket{idx, 0, 0};
    return b;
  }

  int64_t bucket_ns_;
  std::array<Bucket, kBuckets> ring_{};
};

// A rate over a short window judged against its own baseline (retransmit
// spikes, FEC corrected rate): the baseline is the rate over the long window
// before the short one, and it stops learning while an episode is active.
class RisingRate {
 public:
  RisingRate(int64_t window_ns, int64_t baseline_ns)
      : window_ns_(window_ns), baseline_ns_(baseline_ns), short_(window_ns), long_(baseline_ns) {}

  // Adds an interval and returns {short rate, baseline rate}. Until the
  // baseline has at least one short window of history of its own, the
  // baseline is +inf (nothing can rise against an unknown baseline).
  std::pair<double, double> Add(const AppendEvent& ev, bool learning) {
    if (first_ns_ == INT64_MIN) first_ns_ = ev.start_ns;
    const int64_t dt = ev.end_ns - ev.start_ns;
    short_.Add(ev.end_ns, dt, ev.delta);
    if (learning) long_.Add(ev.end_ns, dt, ev.delta);
    const double elapsed = static_cast<double>(ev.end_ns - first_ns_) * 1e-9;
    const double short_s = std::min(elapsed, static_cast<double>(window_ns_) * 1e-9);
    const double long_s = std::min(elapsed, static_cast<double>(baseline_ns_) * 1e-9);
    double sv = 0, ss = 0, lv = 0, ls = 0;
    short_.Sum(ev.end_ns, &sv, &ss);
    long_.Sum(ev.end_ns, &lv, &ls);
    const double rate = short_s > 0 ? sv / short_s : 0;
    if (learning) {
      baseline_ = long_s >= 2 * short_s && long_s > 0 ? std::max(0.0, lv - sv) / (long_s - short_s)
                                                      : std::numeric_limits<double>::infinity();
    }
    return {rate, baseline_};
  }

 private:
  int64_t window_ns_, baseline_ns_;
  WindowSum short_, long_;
  int64_t first_ns_ = INT64_MIN;
  double baseline_ = 0;
};

}  // namespace fabricscope
