#include "daemon/correlate/correlator.h"

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
#include "daemon/correlate/process_scope.h"
#include "store/counter_semantics.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

// ---------------------------------------------------------------------------
// Options.

std::array<double, kNumSignalClasses> CorrelationOptions::DefaultFloors() {
  std::array<double, kNumSignalClasses> f{};
  auto set = [&f](SignalClass c, double v) { f[static_cast<int>(c)] = v; };
  // The pause class is judged by the pause fraction; its floor only matters
  // as a guard (seconds of pause per second).
  set(SignalClass::kPause, 0.001);
  set(SignalClass::kPauseFrames, 100);   // PFC frames/s: a storm sends thousands
  set(SignalClass::kPauseStorm, 0.001);  // any NIC pause-storm event
  set(SignalClass::kEcn, 1000);          // CE-marked packets/s: DCQCN marks routinely
  set(SignalClass::kCnp, 1000);          // CNPs/s
  set(SignalClass::kDiscards, 1);        // packets/s
  set(SignalClass::kDrops, 1);           // packets/s
  set(SignalClass::kRetransmits, 1);     // events/s
  set(SignalClass::kPortErrors, 1);      // events/s
  set(SignalClass::kXmitWait, 100000);   // credit-wait ticks/s
  set(SignalClass::kFec, 0.001);         // any uncorrectable block
  set(SignalClass::kContext, 1);
  set(SignalClass::kIgnored, 1);
  return f;
}

absl::Status ParseFloors(absl::string_view text, std::array<double, kNumSignalClasses>* floors) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    auto cls = ParseSignalClass(absl::StripAsciiWhitespace(kv.first));
    if (!cls.has_value() || !IsCongestionClass(*cls)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown signal class \"", kv.first,
                       "\" (expected pause, pause_frames, pause_storm, ecn, cnp, discards, drops, "
                       "retransmits, port_errors, xmit_wait, fec)"));
    }
    double v;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(kv.second), &v) || !(v > 0) ||
        !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("floor of \"", kv.first, "\" must be a number > 0 (events per second)"));
    }
    (*floors)[static_cast<int>(*cls)] = v;
  }
  return absl::OkStatus();
}

std::string FormatFloors(const std::array<double, kNumSignalClasses>& floors) {
  std::vector<std::string> parts;
  for (int i = 0; i < kNumSignalClasses; ++i) {
    auto c = static_cast<SignalClass>(i);
    if (!IsCongestionClass(c)) continue;
    parts.push_back(absl::StrCat(SignalClassName(c), "=", floors[i]));
  }
  return absl::StrJoin(parts, ",");
}

StallPolicy::StallPolicy(std::vector<std::pair<std::string, absl::Duration>> thresholds) {
  for (auto& [name, d] : thresholds) threshold_ns_[name] = absl::ToInt64Nanoseconds(d);
}

bool StallPolicy::IsStall(const Span& span) const {
  if (span.stall_flag) return true;
  auto it = threshold_ns_.find(span.name);
  if (it == threshold_ns_.end()) return false;
  return span.end_unix_nano - span.start_unix_nano >= it->second;
}

absl::StatusOr<std::vector<std::pair<std::string, absl::Duration>>> StallPolicy::Parse(
    absl::string_view text) {
  std::vector<std::pair<std::string, absl::Duration>> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    size_t eq = part.rfind('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected NAME=DURATION pairs such as decode_step=200ms, got \"", part, "\""));
    }
    absl::string_view name = absl::StripAsciiWhitespace(part.substr(0, eq));
    auto d = ParsePositiveDuration(part.substr(eq + 1));
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("threshold of \"", name, "\": ", d.status().message()));
    }
    out.emplace_back(std::string(name), *d);
  }
  return out;
}

std::string StallPolicy::Format(
    const std::vector<std::pair<std::string, absl::Duration>>& thresholds) {
  return absl::StrJoin(thresholds, ",", [](std::string* out, const auto& p) {
    absl::StrAppend(out, p.first, "=", absl::FormatDuration(p.second));
  });
}

absl::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kClean:
      return "clean";
    case Verdict::kFabric:
      return "fabric";
  }
  return "unknown";
}

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

// ---------------------------------------------------------------------------
// Scope.

namespace {

// "mlx5_0/1", or "mlx5_0" for every port of a device.
std::string PortName(absl::string_view device, uint32_t port) {
  return port == 0 ? std::string(device) : absl::StrCat(device, "/", port);
}

}  // namespace

bool SpanScope::UsesGpuHint(const Span& span) {
  return !span.gpu.empty() && span.rdma_device.empty() && span.netdev.empty();
}

void SpanScope::CoverEveryPort(const std::vector<PortInfo>& ports) {
  if (ports.empty()) {
    all_ = true;
    return;
  }
  for (const PortInfo& p : ports) {
    ports_.emplace_back(p.device, p.port);
    if (!p.netdev.empty()) netdevs_.push_back(p.netdev);
  }
}

bool SpanScope::ScopeToGpu(const Span& span, const std::vector<PortInfo>& ports,
                           const HostTopology* topology) {
  const GpuInfo* gpu = topology != nullptr ? topology->FindGpu(span.gpu) : nullptr;
  if (gpu == nullptr) {
    description_ = absl::StrCat("GPU ", span.gpu, " unknown to the topology: every port");
    return false;
  }
  // The topology's bus id, whichever form the span named the GPU by.
  const std::string gpu_name = absl::StrCat("GPU ", gpu->bus_id);
  std::optional<PciRelation> nearest;
  for (const GpuNicAffinity& a : topology->affinity) {
    if (a.gpu_bus_id != gpu->bus_id) continue;
    if (!nearest.has_value() || a.relation < *nearest) nearest = a.relation;
  }
  if (!nearest.has_value()) {
    description_ = absl::StrCat("no NIC placement known for ", gpu_name, ": every port");
    return false;
  }
  std::vector<std::string> names;
  for (const GpuNicAffinity& a : topology->affinity) {
    if (a.gpu_bus_id != gpu->bus_id || a.relation != *nearest) continue;
    bool listed = false;  // the device's ports as the inventory has them
    for (const PortInfo& p : ports) {
      if (p.device != a.device || (span.rdma_port != 0 && p.port != span.rdma_port)) continue;
      listed = true;
      ports_.emplace_back(p.device, p.port);
      names.push_back(PortName(p.device, p.port));
      if (!p.netdev.empty()) netdevs_.push_back(p.netdev);
    }
    if (!listed) {  // not in the inventory (yet): the device's series by name
      ports_.emplace_back(a.device, span.rdma_port);
      names.push_back(PortName(a.device, span.rdma_port));
    }
  }
  description_ = absl::StrCat("NICs nearest ", gpu_name, " (", PciRelationName(*nearest),
                              "): ", absl::StrJoin(names, ", "));
  return true;
}

SpanScope::SpanScope(const Span& span, const std::vector<PortInfo>& ports,
                     const HostTopology* topology) {
  const bool hinted = !span.rdma_device.empty() || !span.netdev.empty();
  if (!hinted) {
    if (!span.gpu.empty() && ScopeToGpu(span, ports, topology)) return;
    CoverEveryPort(ports);
    if (description_.empty()) description_ = ports.empty() ? "every series" : "every port";
    return;
  }
  std::vector<std::string> names;
  if (!span.rdma_device.empty()) {
    ports_.emplace_back(span.rdma_device, span.rdma_port);
    names.push_back(PortName(span.rdma_device, span.rdma_port));
    for (const PortInfo& p : ports) {
      if (p.device == span.rdma_device && (span.rdma_port == 0 || p.port == span.rdma_port) &&
          !p.netdev.empty()) {
        netdevs_.push_back(p.netdev);
      }
    }
  }
  if (!span.netdev.empty()) {
    netdevs_.push_back(span.netdev);
    names.push_back(span.netdev);
    for (const PortInfo& p : ports) {
      if (p.netdev == span.netdev) ports_.emplace_back(p.device, p.port);
    }
  }
  description_ = absl::StrCat("span hint: ", absl::StrJoin(names, ", "));
  if (!span.gpu.empty()) {
    absl::StrAppend(&description_, " (fabricscope.gpu ", span.gpu,
                    " not used: an explicit NIC hint wins)");
  }
}

bool SpanScope::Contains(const SeriesKey& key) const {
  if (all_) return true;
  if (!key.device.empty()) {
    for (const auto& [device, port] : ports_) {
      if (device == key.device && (port == 0 || key.port == 0 || port == key.port)) return true;
    }
  }
  if (!key.netdev.empty()) {
    for (const std::string& n : netdevs_) {
      if (n == key.netdev) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------
// The correlator.

absl::Span<const SeriesCorrelation> SpanCorrelation::Anomalous() const {
  size_t n = 0;
  while (n < series.size() && series[n].anomalous) ++n;
  return absl::MakeConstSpan(series.data(), n);
}

Correlator::Correlator(const Store* store, const PortInventory* ports, CorrelationOptions options,
                       StallPolicy stalls)
    : store_(store), ports_(ports), options_(std::move(options)), stalls_(std::move(stalls)) {}

namespace {

// The port a series is read at, as one name: "mlx5_0/1" for an RDMA port (a
// netdev the inventory maps to one names that port), else the netdev, else ""
// (a host-wide series).
std::string PortOf(const SeriesKey& key, const std::vector<PortInfo>& ports) {
  if (!key.device.empty()) return PortName(key.device, key.port);
  if (key.netdev.empty()) return "";
  for (const PortInfo& p : ports) {
    if (p.netdev == key.netdev) return PortName(p.device, p.port);
  }
  return key.netdev;
}

// The ports of a span's series (PortOf), each name computed once: a series
// usually sits at the port of the one before it (the store lists a port's
// series together), and a new port is looked up once. Ids are dense, in
// order of first appearance.
class PortNames {
 public:
  explicit PortNames(const std::vector<PortInfo>& ports) : ports_(ports) {}

  uint32_t Of(const SeriesKey& key) {
    if (last_ != nullptr && key.port == last_->port && key.device == last_->device &&
        key.netdev == last_->netdev) {
      return last_id_;
    }
    std::string name = PortOf(key, ports_);
    auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (inserted) names_.push_back(std::move(name));
    last_ = &key;
    last_id_ = it->second;
    return last_id_;
  }
  const std::string& Name(uint32_t id) const { return names_[id]; }

 private:
  const std::vector<PortInfo>& ports_;
  absl::flat_hash_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  const SeriesKey* last_ = nullptr;
  uint32_t last_id_ = 0;
};

// One signal at one port (its family and every label value): the identity
// under which series of several sources compete (the best-ranked is judged).
struct SignalAt {
  uint32_t port = 0;  // PortNames id
  const Signal* signal = nullptr;

  template <typename H>
  friend H AbslHashValue(H h, const SignalAt& s) {
    return H::combine(std::move(h), s.port, s.signal->family->name, s.signal->label_values);
  }
  friend bool operator==(const SignalAt& a, const SignalAt& b) {
    return a.port == b.port &&
           (a.signal == b.signal || (a.signal->family->name == b.signal->family->name &&
                                     a.signal->label_values == b.signal->label_values));
  }
};

// How trustworthy a counter's deltas are, for choosing among series of one
// signal: 64-bit, then 32-bit wrapping, then saturating by width.
int SemanticsRank(const CounterSemantics& sem) {
  switch (sem.kind) {
    case CounterKind::kCounter64:
      return 1000;
    case CounterKind::kWrap32:
      return 500;
    case CounterKind::kSaturating:
      return sem.width;
    case CounterKind::kGauge:
      return 0;
  }
  return 0;
}

// Why nothing came after a series' last sample `last_ns` (< t1): the series
// is gone, its tier has not polled it since (its last poll is recent, or the
// store holds nothing newer than the span at all: `newest_ns`), or its polls
// stopped returning data long before the window (an unreadable file: a gap).
std::string NoDataSince(const SeriesState& state, int64_t last_ns, int64_t t0, int64_t t1,
                        int64_t gap_ns, int64_t newest_ns) {
  if (state.last_ts_ns > t1) return "gap";  // polled later, too late for the window
  if (!state.present) return "vanished";
  if (last_ns >= t0 - gap_ns || newest_ns < t1) return "not polled";
  return "gap";
}

// What a blind series is missing, from its window statistics (see "Blind
// series" in the header). `retention` says whether the store evicted data
// from before `t0` (asked only when needed).
template <typename Retention>
std::string BlindWhy(const WindowStats& w, const SeriesState& state, int64_t t0, int64_t t1,
                     int64_t gap_ns, int64_t newest_ns, Retention retention) {
  const int64_t parts[] = {w.saturated_ns, w.reset_ns, w.gap_ns, w.after_last_ns,
                           w.before_first_ns};
  const int64_t* largest = std::max_element(std::begin(parts), std::end(parts));
  switch (largest - std::begin(parts)) {
    case 0:
      return "saturated";
    case 1:
      return "reset";
    case 2:
      return "gap";
    case 3:  // samples before the window's end, none after some point of it
      return NoDataSince(state, state.last_ts_ns, t0, t1, gap_ns, newest_ns);
    default:                                           // nothing before some point of the window
      if (state.has_value && state.last_ts_ns < t0) {  // and nothing since
        return NoDataSince(state, state.last_ts_ns, t0, t1, gap_ns, newest_ns);
      }
      return retention() ? "outside retention" : "not polled";
  }
}

// "mlx5_0/1 port_xmit_wait saturated", "eth0 rx_prio3_pause_duration gap":
// where the series is read and its raw counter name (what an operator looks
// up: perfquery, ethtool -S).
std::string BlindText(const SeriesCorrelation& s) {
  const std::string where = !s.device.empty() ? PortName(s.device, s.port) : std::string(s.netdev);
  return absl::StrCat(where.empty() ? "" : absl::StrCat(where, " "), s.raw_name, " ", s.blind);
}

// At most three blind series by name, then how many more.
std::string BlindList(const std::vector<std::string>& texts) {
  constexpr size_t kShown = 3;
  std::string out =
      absl::StrJoin(texts.begin(), texts.begin() + std::min(texts.size(), kShown), ", ");
  if (texts.size() > kShown) absl::StrAppend(&out, " and ", texts.size() - kShown, " more");
  return out;
}

}  // namespace

SeriesCorrelation SeriesCorrelationOf(const SeriesSnapshot& snap, SignalClass cls) {
  SeriesCorrelation sc;
  sc.id = snap.id;
  sc.signal = snap.signal->name;
  sc.signal_class = cls;
  sc.source = snap.key->source;
  sc.raw_name = snap.key->name;
  sc.device = snap.key->device;
  sc.port = snap.key->port;
  sc.netdev = snap.key->netdev;
  sc.priority = snap.signal->Label("priority");
  sc.direction = snap.signal->Label("direction");
  sc.counter = snap.signal->Label("counter");
  if (sc.counter.empty()) sc.counter = snap.signal->Label("reason");
  return sc;
}

SpanCorrelation Correlator::Correlate(const Span& span) const {
  ProcessScopeResult process;
  SpanCorrelation out = CorrelatePorts(span, &process);
  ApplyProcessScope(std::move(process), &out);  // process_scope.h
  return out;
}

SpanCorrelation Correlator::CorrelatePorts(const Span& span, ProcessScopeResult* process) const {
  SpanCorrelation out;
  out.start_unix_nano = span.start_unix_nano;
  out.end_unix_nano = span.end_unix_nano;
  out.stall = stalls_.IsStall(span);

  const int64_t t0 = span.start_unix_nano;
  const int64_t t1 = std::max(span.end_unix_nano, span.start_unix_nano);
  const int64_t baseline_ns = absl::ToInt64Nanoseconds(options_.baseline_window);
  const int64_t gap_ns = absl::ToInt64Nanoseconds(options_.max_sample_gap);

  const std::vector<PortInfo> ports = ports_ != nullptr ? ports_->List() : std::vector<PortInfo>{};
  std::optional<HostTopology> topology;  // copied only for a GPU-scoped span
  if (ports_ != nullptr && SpanScope::UsesGpuHint(span)) topology = ports_->Topology();
  const SpanScope scope(span, ports, topology.has_value() ? &*topology : nullptr);
  out.scope = scope.description();
  // Whether the store evicted samples of [t0 - max gap, ...): asked once, and
  // only for a series blind before its first sample.
  std::optional<bool> evicted_before_t0;
  auto retention = [&]() {
    if (!evicted_before_t0.has_value()) {
      const StoreStats st = store_->Stats();
      evicted_before_t0 = st.evicted_samples > 0 && st.oldest_ts_ns > t0 - gap_ns;
    }
    return *evicted_before_t0;
  };

  // Per congestion series in scope: its port and its rank among the series
  // of the same signal at that port (the choice among sources).
  struct Place {
    uint32_t port = 0;    // PortNames id
    uint32_t signal = 0;  // the signal at that port, numbered (best_of)
    int rank = 0;
  };
  std::vector<Place> places;
  PortNames port_names(ports);
  const std::vector<SeriesSnapshot> all = store_->Snapshot();
  int64_t newest_ns = 0;  // the store's latest poll of anything
  for (const SeriesSnapshot& snap : all) newest_ns = std::max(newest_ns, snap.state.last_ts_ns);
  *process = CorrelateProcess(*store_, all, scope, span, options_);
  // The series in scope, counted first so that the (large) result is
  // allocated once.
  std::vector<std::pair<const SeriesSnapshot*, SignalClass>> in_scope;
  in_scope.reserve(all.size());
  constexpr SeriesId kMaxCachedClasses = 1 << 24;
  {
    std::lock_guard<std::mutex> lock(classes_mu_);
    for (const SeriesSnapshot& snap : all) {
      if (snap.key == nullptr || snap.signal == nullptr) continue;
      SignalClass cls;
      if (snap.id < kMaxCachedClasses) {  // ids are dense: the store's series index
        if (snap.id >= classes_.size()) classes_.resize(snap.id + 1, 0);
        uint8_t& known = classes_[snap.id];
        if (known == 0) known = static_cast<uint8_t>(ClassifySignal(*snap.signal)) + 1;
        cls = static_cast<SignalClass>(known - 1);
      } else {
        cls = ClassifySignal(*snap.signal);
      }
      if (cls == SignalClass::kIgnored) continue;
      if (!scope.Contains(*snap.key)) continue;
      in_scope.emplace_back(&snap, cls);
    }
  }
  out.series.reserve(in_scope.size());
  places.reserve(in_scope.size());
  // One signal from several sources: the best-ranked series are judged, the
  // others superseded. Signal -> its number; per number the index of the
  // best series so far.
  absl::flat_hash_map<SignalAt, uint32_t> signals;
  signals.reserve(in_scope.size());
  std::vector<size_t> best_of;
  // The series' scans one after another are each a chain of dependent cache
  // misses: with many series in scope (what they read no longer stays in
  // cache between spans), read the next few ahead while one is scanned (a
  // hint: the results do not depend on it). ReadWindowStats' range; its
  // samples are decoded around the baseline's start and over the window.
  // With few series the read-ahead costs more than it saves (bench/README.md).
  constexpr size_t kReadAheadSeries = 256;
  std::vector<SeriesId> ids;
  std::optional<Store::ScanAhead> ahead;
  if (in_scope.size() >= kReadAheadSeries) {
    ids.reserve(in_scope.size());
    for (const auto& entry : in_scope) ids.push_back(entry.first->id);
    const std::pair<int64_t, int64_t> decoded[] = {{t0 - baseline_ns, t0 - baseline_ns}, {t0, t1}};
    ahead.emplace(*store_, ids, t0 - baseline_ns - gap_ns, t1 + gap_ns, decoded);
  }
  for (size_t i = 0; i < in_scope.size(); ++i) {
    if (ahead.has_value()) ahead->Before(i);
    const SeriesSnapshot& snap = *in_scope[i].first;
    const SignalClass cls = in_scope[i].second;
    SeriesCorrelation sc = SeriesCorrelationOf(snap, cls);
    // Samples from the last one before the baseline to the first one after
    // the window (one max gap beyond both ends finds them), the baseline's
    // inner chunks as chunk summaries.
    sc.stats = ReadWindowStats(*store_, snap.id, snap.signal->semantics, snap.signal->scale, t0, t1,
                               baseline_ns, gap_ns);
    Place place;
    if (IsCongestionClass(cls)) {
      const double floor = options_.floors[static_cast<int>(cls)];
      if (cls == SignalClass::kPause) {
        // Pause seconds per covered second; sample-time jitter can push the
        // ratio past 1, but a port cannot be paused for more than all of it.
        sc.pause_fraction = std::clamp(sc.stats.rate, 0.0, 1.0);
        sc.stats.peak_rate = std::clamp(sc.stats.peak_rate, 0.0, 1.0);
        sc.score = sc.pause_fraction / options_.pause_fraction_threshold;
        sc.anomalous = sc.stats.delta > 0 && sc.score >= 1.0 && sc.stats.rate >= floor;
      } else {
        const double threshold = std::max(floor, options_.rate_factor * sc.stats.baseline_rate);
        sc.score = sc.stats.rate / threshold;
        sc.anomalous = sc.stats.delta > 0 && sc.score >= 1.0;
      }
      if (!sc.anomalous && sc.stats.coverage < options_.min_coverage) {
        sc.blind = BlindWhy(sc.stats, snap.state, t0, t1, gap_ns, newest_ns, retention);
      }
      place.port = port_names.Of(*snap.key);
      // Sighted before blind, then the wider counter.
      place.rank = (sc.blind.empty() ? 10000 : 0) + SemanticsRank(snap.signal->semantics);
      auto [it, inserted] = signals.try_emplace(SignalAt{place.port, snap.signal},
                                                static_cast<uint32_t>(best_of.size()));
      place.signal = it->second;
      if (inserted) {
        best_of.push_back(out.series.size());
      } else if (place.rank > places[best_of[it->second]].rank) {
        best_of[it->second] = out.series.size();
      }
    }
    out.series.push_back(std::move(sc));
    places.push_back(place);
  }
  for (size_t i = 0; i < out.series.size(); ++i) {
    SeriesCorrelation& sc = out.series[i];
    if (!IsCongestionClass(sc.signal_class)) continue;
    const size_t b = best_of[places[i].signal];
    if (places[i].rank >= places[b].rank) continue;
    sc.superseded_by = absl::StrCat(out.series[b].source, "/", out.series[b].raw_name);
    sc.anomalous = false;
    sc.score = 0;
  }

  // Counts, and per port and congestion group whether anything is sighted.
  struct GroupSight {
    size_t sighted = 0;
    std::vector<size_t> blind;  // indexes of the blind series, in order
  };
  absl::flat_hash_map<std::pair<uint32_t, absl::string_view>, GroupSight> groups;
  size_t sighted = 0;
  for (size_t i = 0; i < out.series.size(); ++i) {
    const SeriesCorrelation& sc = out.series[i];
    if (!IsCongestionClass(sc.signal_class) || !sc.superseded_by.empty()) continue;
    ++out.congestion_series;
    if (sc.stats.coverage >= options_.min_coverage) ++out.covered_series;
    GroupSight& g = groups[{places[i].port, BlindGroupName(sc.signal_class)}];
    if (sc.blind.empty()) {
      ++sighted;
      ++g.sighted;
    } else {
      g.blind.push_back(i);
    }
  }
  // The groups with nothing sighted, by port name and group name, each with
  // the BlindText of its blind series (before the series move).
  std::vector<std::pair<std::pair<absl::string_view, absl::string_view>, std::vector<std::string>>>
      blind_groups_of;
  for (const auto& [where, g] : groups) {
    if (g.sighted > 0) continue;
    std::vector<std::string> texts;
    texts.reserve(g.blind.size());
    for (size_t i : g.blind) texts.push_back(BlindText(out.series[i]));
    blind_groups_of.emplace_back(
        std::make_pair(absl::string_view(port_names.Name(where.first)), where.second),
        std::move(texts));
  }
  std::sort(blind_groups_of.begin(), blind_groups_of.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });

  // Ranking, on a compact copy of what it compares (the places are not
  // needed beyond this point).
  struct RankKey {
    bool anomalous;
    bool congestion;  // a congestion series that is judged
    double score;
    size_t index;
  };
  std::vector<RankKey> keys(out.series.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const SeriesCorrelation& sc = out.series[i];
    keys[i] = {sc.anomalous, IsCongestionClass(sc.signal_class) && sc.superseded_by.empty(),
               sc.score, i};
  }
  std::stable_sort(keys.begin(), keys.end(), [](const RankKey& a, const RankKey& b) {
    if (a.anomalous != b.anomalous) return a.anomalous;
    if (a.congestion != b.congestion) return a.congestion;
    return a.score > b.score;
  });
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = keys[i].index;
  std::vector<std::string> blind_texts;
  for (size_t i : order) {
    const SeriesCorrelation& sc = out.series[i];
    if (IsCongestionClass(sc.signal_class) && sc.superseded_by.empty() && !sc.blind.empty()) {
      blind_texts.push_back(BlindText(sc));
      out.blind.push_back({.signal = std::string(sc.signal),
                           .counter = std::string(sc.counter),
                           .source = std::string(sc.source),
                           .raw_name = std::string(sc.raw_name),
                           .device = std::string(sc.device),
                           .port = sc.port,
                           .netdev = std::string(sc.netdev),
                           .priority = std::string(sc.priority),
                           .direction = std::string(sc.direction),
                           .why = sc.blind});
    }
  }
  // Into rank order in place, cycle by cycle (one move per series: no
  // second copy of the result).
  std::vector<bool> placed(order.size(), false);
  for (size_t start = 0; start < order.size(); ++start) {
    if (placed[start] || order[start] == start) continue;
    SeriesCorrelation first = std::move(out.series[start]);
    size_t at = start;
    while (order[at] != start) {
      out.series[at] = std::move(out.series[order[at]]);
      placed[at] = true;
      at = order[at];
    }
    out.series[at] = std::move(first);
    placed[at] = true;
  }
  const std::string caveat =
      blind_texts.empty() ? "" : absl::StrCat("; ", BlindList(blind_texts), ": blind");

  const size_t anomalous = out.Anomalous().size();
  if (anomalous > 0) {
    out.verdict = Verdict::kFabric;
    const SeriesCorrelation& top = out.series.front();
    out.reason =
        absl::StrCat(anomalous, " congestion signal(s) anomalous; top: ", top.signal,
                     top.counter.empty() ? "" : absl::StrCat(" ", top.counter),
                     top.device.empty() ? "" : absl::StrCat(" ", top.device),
                     top.port == 0 ? "" : absl::StrCat("/", top.port),
                     top.netdev.empty() ? "" : absl::StrCat(" ", top.netdev),
                     top.priority.empty() ? "" : absl::StrCat(" prio ", top.priority), caveat);
    return out;
  }
  if (out.congestion_series == 0) {
    out.verdict = Verdict::kUnknown;
    out.reason = "no congestion series in scope";
    return out;
  }
  if (sighted == 0) {
    out.verdict = Verdict::kUnknown;
    out.reason =
        absl::StrCat("none of the ", out.congestion_series,
                     " congestion series covers the window: ", BlindList(blind_texts), ": blind");
    return out;
  }
  std::vector<std::string> blind_groups;
  for (const auto& [where, texts] : blind_groups_of) {
    blind_groups.push_back(absl::StrCat(where.second, " class of ",
                                        where.first.empty() ? "the host" : where.first,
                                        " is blind (", BlindList(texts), ")"));
  }
  if (!blind_groups.empty()) {
    out.verdict = Verdict::kUnknown;
    out.reason = absl::StrJoin(blind_groups, "; ");
    return out;
  }
  out.verdict = Verdict::kClean;
  out.reason = absl::StrCat(sighted, " congestion series covered, none anomalous", caveat);
  return out;
}

}  // namespace fabricscope
