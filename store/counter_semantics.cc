#include "store/counter_semantics.h"

namespace fabricscope {

CounterUpdate CounterTracker::UpdateSlow(uint64_t raw) {
  CounterUpdate u;
  if (sem_.kind == CounterKind::kGauge) {
    last_ = raw;
    has_value_ = true;
    u.event = CounterEvent::kGauge;
    return u;
  }
  if (sem_.kind == CounterKind::kWrap32 && raw > UINT32_MAX) {
    sem_ = CounterSemantics{CounterKind::kCounter64, 64};
  }
  if (!has_value_) {
    has_value_ = true;
    last_ = raw;
    saturated_ = sem_.kind == CounterKind::kSaturating && raw >= sem_.MaxValue();
    u.event = saturated_ ? CounterEvent::kSaturated : CounterEvent::kFirst;
    return u;
  }
  const uint64_t prev = last_;
  last_ = raw;
  switch (sem_.kind) {
    case CounterKind::kSaturating: {
      const uint64_t max = sem_.MaxValue();
      if (raw < prev) {
        saturated_ = raw >= max;
        u.event = CounterEvent::kReset;
        return u;
      }
      if (raw >= max) {
        // The climb up to the maximum is real; beyond it nothing is known.
        u.delta = raw - prev;
        u.event = CounterEvent::kSaturated;
        saturated_ = true;
        return u;
      }
      saturated_ = false;
      u.delta = raw - prev;
      u.event = CounterEvent::kNormal;
      u.rate_valid = true;
      return u;
    }
    case CounterKind::kWrap32:
      if (raw < prev) {
        const uint64_t wrapped = (uint64_t{1} << 32) - prev + raw;
        if (prev <= UINT32_MAX && wrapped < (uint64_t{1} << 31)) {
          u.delta = wrapped;
          u.event = CounterEvent::kWrapped;
          u.rate_valid = true;
          return u;
        }
      }
      [[fallthrough]];  // not a wrap: a reset or a normal step, as below
    case CounterKind::kCounter64:
    case CounterKind::kGauge:
      if (raw < prev) {
        u.event = CounterEvent::kReset;
        return u;
      }
      u.delta = raw - prev;
      u.event = CounterEvent::kNormal;
      u.rate_valid = true;
      return u;
  }
  return u;
}

uint64_t CounterDeltaOver(CounterSemantics sem, const uint64_t* values, size_t n, uint64_t* resets,
                          bool* saturated) {
  CounterTracker t(sem);
  uint64_t total = 0;
  uint64_t r = 0;
  bool sat = false;
  for (size_t i = 0; i < n; ++i) {
    CounterUpdate u = t.Update(values[i]);
    total += u.delta;
    if (u.event == CounterEvent::kReset) ++r;
    sat = sat || t.saturated();
  }
  if (resets != nullptr) *resets = r;
  if (saturated != nullptr) *saturated = sat;
  return total;
}

}  // namespace fabricscope
