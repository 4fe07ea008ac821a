#include "daemon/correlate/window_stats.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/parse.h"
#include "store/counter_semantics.h"
#include "store/store.h"

namespace fabricscope {

// ---------------------------------------------------------------------------
// Window arithmetic.

namespace {

// Whether x * scale is exact (barring overflow): scale is a positive power of
// two.
bool PowerOfTwo(double scale) {
  int exp = 0;
  return scale > 0 && std::isfinite(scale) && std::frexp(scale, &exp) == 0.5;
}

// ComputeWindowStats as a stream: samples one at a time (oldest first), or
// the summary of a chunk whose intervals all fall in one part of the timeline
// that is handled uniformly (ReadWindowStats). Both paths run the same
// arithmetic per interval; a summary stands for the intervals it sums.
class WindowAccumulator final : public RangeScanner {
 public:
  WindowAccumulator(CounterSemantics semantics, double scale, int64_t t0, int64_t t1,
                    int64_t baseline_ns, int64_t max_gap_ns, int64_t from_ns = INT64_MIN)
      : semantics_(semantics),
        scale_(scale),
        t0_(t0),
        t1_(t1 <= t0 ? t0 + 1 : t1),
        b0_(t0 - std::max<int64_t>(baseline_ns, 0)),
        max_gap_ns_(max_gap_ns),
        from_ns_(from_ns),
        window_summaries_(PowerOfTwo(scale)),
        st_(semantics) {}

  void Add(const Sample& sample) { Add(st_, sample); }

  WindowStats Finish() {
    const int64_t t0 = t0_, t1 = t1_, b0 = b0_;
    if (!st_.has_samples) {
      st_.w.before_first_ns = t1 - t0;
    } else {
      st_.w.before_first_ns = std::max<int64_t>(0, std::min(st_.front_ts, t1) - t0);
      st_.w.after_last_ns = std::max<int64_t>(0, t1 - std::max(st_.back_ts, t0));
    }
    st_.w.delta = st_.window_delta + static_cast<double>(st_.window_raw) * scale_;
    st_.w.coverage = static_cast<double>(st_.covered) / static_cast<double>(t1 - t0);
    if (st_.covered > 0) st_.w.rate = st_.w.delta / (static_cast<double>(st_.covered) * 1e-9);
    if (t0 > b0) {
      st_.w.baseline_coverage =
          static_cast<double>(st_.baseline_covered) / static_cast<double>(t0 - b0);
    }
    if (st_.baseline_covered > 0) {
      st_.w.baseline_rate = st_.baseline_delta / (static_cast<double>(st_.baseline_covered) * 1e-9);
    }
    return st_.w;
  }

  // RangeScanner. A chunk wholly at or before the baseline's start only
  // moves the tracker (every interval ending there is skipped); a chunk
  // wholly inside the baseline adds its valid intervals, each covered whole.
  // Everything else is decoded. Once past the window (an interval starting
  // at or after t1), only the last sample's timestamp still matters.
  Plan PlanChunk(const ChunkHeader& h) override {
    if (!st_.done && st_.has_samples && st_.prev_ts >= t1_ && h.first_ts > st_.prev_ts &&
        h.first_ts <= to_ns_) {
      st_.done = true;  // the interval into this chunk starts past the window
    }
    if (st_.done) {
      // The last sample in the range is at or after t1 either way: nothing
      // after the window is left uncovered.
      if (st_.back_ts >= t1_ && h.min_ts >= t1_) return Plan::kSkip;
      if (h.last_ts >= from_ns_ && h.last_ts <= to_ns_) {
        st_.back_ts = st_.prev_ts = h.last_ts;
        return Plan::kSkip;
      }
      return Plan::kSamples;
    }
    if (h.max_ts <= b0_ && h.last_ts >= from_ns_) return Plan::kSummary;
    if (h.min_ts >= b0_ && h.max_ts <= t0_) return Plan::kSummary;
    if (window_summaries_ && h.min_ts >= t0_ && h.max_ts <= t1_) return Plan::kSummary;
    return Plan::kSamples;
  }

  bool OnSummary(const ChunkSummary& s) override {
    const ChunkHeader& h = s.header;
    const bool wrap32 = semantics_.kind == CounterKind::kWrap32;
    if (h.max_ts <= b0_) {
      // Samples before the range's start would be left out: their values
      // must not decide the 64-bit switch.
      if (wrap32 && !st_.switched && s.above32 && h.min_ts < from_ns_) return false;
      if (!st_.has_samples) {
        st_.has_samples = true;
        st_.front_ts = h.last_ts;  // any sample here is at or before t0
      }
    } else if (h.min_ts >= t0_ && h.max_ts <= t1_) {
      // Inside the window: every interval valid and within the gap, so that
      // the samples would have added each one's whole delta, length and rate
      // (their peak needs the arithmetic of Add: a scale of a power of two
      // turns max_rate into it exactly).
      if (!window_summaries_ || !s.all_valid || s.wrapped || s.max_rate < 0 ||
          s.max_valid_ns > max_gap_ns_) {
        return false;
      }
      Add(Sample{h.first_ts, h.first_value});          // the interval into the chunk
      st_.window_raw += h.last_value - h.first_value;  // no wrap, reset or saturation
      st_.covered += s.valid_ns;
      st_.w.peak_rate = std::max(st_.w.peak_rate, s.max_rate * scale_ * 1e9);
    } else {
      // Computed unswitched: only a wrap would count differently.
      if (s.max_valid_ns > max_gap_ns_ || (wrap32 && st_.switched && s.wrapped)) return false;
      Add(Sample{h.first_ts, h.first_value});  // the interval into the chunk
      st_.baseline_delta += s.valid_delta * scale_;
      st_.baseline_covered += s.valid_ns;
    }
    if (wrap32 && s.above32) st_.switched = true;
    st_.tracker =
        CounterTracker(st_.switched ? CounterSemantics{CounterKind::kCounter64, 64} : semantics_);
    st_.tracker.Restore(true, false, h.last_value);
    st_.back_ts = st_.prev_ts = h.last_ts;
    return true;
  }

  // On a local copy of the state: the compiler keeps it in registers
  // across the batch (stores through `this` might alias the samples).
  void OnSamples(absl::Span<const Sample> samples) override {
    State st = st_;
    for (const Sample& s : samples) Add(st, s);
    st_ = st;
  }

  // Past the window, only the range's last sample still counts (PlanChunk).
  bool Satisfied() const override { return st_.done; }

  // The samples of a segment that lie inside the baseline, but for the
  // first (the interval into the baseline, or into the segment), count only
  // through their intervals' sums: one summary (OnSummary) between the
  // samples up to b0 and those after t0.
  std::pair<int64_t, int64_t> SummarySpan(const ChunkHeader& h) const override {
    if (st_.done || h.max_ts <= b0_ || h.min_ts > t0_) return {0, 0};
    return {b0_, t0_};
  }

  void set_to_ns(int64_t to_ns) { to_ns_ = to_ns; }

 private:
  // What the samples and summaries seen so far add up to.
  struct State {
    explicit State(CounterSemantics semantics) : tracker(semantics) {}
    CounterTracker tracker;
    bool switched = false;  // a kWrap32 tracker has gone 64-bit
    bool has_samples = false;
    bool done = false;  // an interval started at or after t1: nothing more counts
    int64_t front_ts = 0, back_ts = 0, prev_ts = 0;
    // The window's delta: its intervals inside it whole in raw units (added
    // exactly, in any order: a window summary adds them at once), those
    // across its edges in the family unit.
    uint64_t window_raw = 0;
    double window_delta = 0, baseline_delta = 0;
    int64_t covered = 0, baseline_covered = 0;
    WindowStats w;
  };

  // One sample into `st` (the state: st_, or a batch's local copy). Inline
  // in OnSamples' loop, whose state then stays in registers (called out of
  // line, it runs about half as fast again).
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Add(State& st, const Sample& sample) const {
    const CounterUpdate u = st.tracker.Update(sample.value);
    if (semantics_.kind == CounterKind::kWrap32 && sample.value > UINT32_MAX) st.switched = true;
    st.back_ts = sample.ts_ns;
    if (!st.has_samples) {
      st.has_samples = true;
      st.front_ts = st.prev_ts = sample.ts_ns;
      return;
    }
    const int64_t a = st.prev_ts;
    const int64_t b = sample.ts_ns;
    st.prev_ts = b;
    if (st.done) return;
    const int64_t len = b - a;
    if (len <= 0) return;  // duplicate or out-of-order timestamp (realtime step)
    if (b <= b0_) return;
    if (a >= t1_) {
      st.done = true;
      return;
    }
    const int64_t ov = std::max<int64_t>(0, std::min(b, t1_) - std::max(a, t0_));
    const int64_t ovb = std::max<int64_t>(0, std::min(b, t0_) - std::max(a, b0_));
    const bool valid = u.rate_valid && len <= max_gap_ns_;
    if (!valid) {
      if (ov > 0 && (u.event == CounterEvent::kReset || u.event == CounterEvent::kSaturated)) {
        ++st.w.resets;
      }
      if (u.event == CounterEvent::kSaturated) {
        st.w.saturated_ns += ov;
      } else if (u.event == CounterEvent::kReset) {
        st.w.reset_ns += ov;
      } else {
        st.w.gap_ns += ov;
      }
      return;
    }
    if (u.delta == 0) {
      // Adds +-0 to the sums and the peak (never -0, the peak never below
      // 0): only the covered time moves. Saves a division per interval of a
      // counter that does not move.
      st.covered += ov;
      st.baseline_covered += ovb;
      return;
    }
    const double d = static_cast<double>(u.delta) * scale_;
    const double inv_len = 1.0 / static_cast<double>(len);
    if (ov > 0) {
      if (ov == len) {
        st.window_raw += u.delta;
      } else {
        st.window_delta += d * static_cast<double>(ov) * inv_len;
      }
      st.covered += ov;
      st.w.peak_rate = std::max(st.w.peak_rate, d * inv_len * 1e9);
    }
    if (ovb > 0) {
      st.baseline_delta += d * static_cast<double>(ovb) * inv_len;
      st.baseline_covered += ovb;
    }
  }

  const CounterSemantics semantics_;
  const double scale_;
  const int64_t t0_, t1_, b0_, max_gap_ns_;
  const int64_t from_ns_;
  // Window chunks may be taken from their summaries (OnSummary).
  const bool window_summaries_;
  int64_t to_ns_ = INT64_MAX;
  State st_;
};

}  // namespace

WindowStats ComputeWindowStats(CounterSemantics semantics, double scale,
                               absl::Span<const Sample> samples, int64_t t0, int64_t t1,
                               int64_t baseline_ns, int64_t max_gap_ns) {
  WindowAccumulator acc(semantics, scale, t0, t1, baseline_ns, max_gap_ns);
  for (const Sample& s : samples) acc.Add(s);
  return acc.Finish();
}

WindowStats ReadWindowStats(const Store& store, SeriesId id, CounterSemantics semantics,
                            double scale, int64_t t0, int64_t t1, int64_t baseline_ns,
                            int64_t max_gap_ns) {
  const int64_t from = t0 - baseline_ns - max_gap_ns;
  const int64_t to = t1 + max_gap_ns;
  WindowAccumulator acc(semantics, scale, t0, t1, baseline_ns, max_gap_ns, from);
  acc.set_to_ns(to);
  store.ScanRange(id, from, to, &acc);
  return acc.Finish();
}

}  // namespace fabricscope
