// The correlator: was it the fabric, and where? (DESIGN.md section 5)
//
// For one span [t0, t1] and every counter series in its scope, the correlator
// reads the raw samples of the store around the span and computes
//
//   delta           counter movement inside [t0, t1], in the family's unit
//   rate            delta / covered seconds of the window
//   baseline_rate   the same over [t0 - baseline_window, t0]
//   peak_rate       highest per-poll-interval rate of an interval that
//                   overlaps the window
//   pause_fraction  for pause-duration series (fabricscope_pfc_pause_seconds):
//                   pause seconds / covered span seconds
//   coverage        fraction of the window covered by valid intervals
//
// How samples map to a window. Between two consecutive samples a, b the
// counter moved by d (counter semantics of counter_semantics.h: wraps are
// unwrapped; an interval that contains a reset or a saturated reading has no
// delta and is "not covered"; an interval longer than max_sample_gap is a gap,
// also not covered). The part of d attributed to the window is proportional
// to the overlap of [a, b] with the window. So a span shorter than one poll
// interval gets the rate of the interval(s) around it, and its pause fraction
// is the fraction of that interval spent paused: the best the samples can say.
//
// Judgement, per series (thresholds in CorrelationOptions, all config):
//  - pause class: anomalous when pause_fraction >= pause_fraction_threshold;
//    score = pause_fraction / threshold. An absolute rule: a port that was
//    paused for a large part of the span stalled it whatever the baseline.
//  - other congestion classes: anomalous when delta > 0 and
//    rate >= floor[class] and rate >= rate_factor x baseline_rate;
//    score = rate / max(floor[class], rate_factor x baseline_rate).
//  - context (bytes, packets, other counters): reported with score 0, never
//    anomalous. Gauges are not correlated at all.
// A series is anomalous exactly when its score >= 1.
//
// Blind series. A congestion series that cannot give a trustworthy delta
// over the window is "blind" for the span: it covers less than min_coverage
// of the window and shows no anomaly in the part it does cover. Its `why`
// names the largest uncovered part:
//   saturated          a saturating IB PMA counter sat at its maximum
//   reset              an interval contained a reset the semantics cannot
//                      bridge (driver reload, PMA clear)
//   gap                an interval longer than max_sample_gap (missed polls),
//                      or no sample since a poll long before the window while
//                      other series were polled past it (an unreadable file)
//   vanished           no sample since, and the series is absent (its file
//                      or device is gone)
//   not polled         no sample since a recent poll (the tier has not polled
//                      it yet, or nothing in the store is newer than the
//                      span), or none before (the series appeared after the
//                      span began)
//   outside retention  no sample before: the store evicted that old data
// A series with partial coverage whose covered part is anomalous is sighted
// (evidence is evidence): blindness never hides an anomaly.
//
// The same signal from two sources. Series of the same signal (family and
// every label value) at the same port (the inventory maps a netdev to its
// RDMA port) are one signal: the correlator judges the best of them, sighted
// before blind, then the wider counter (64-bit, then 32-bit wrapping, then
// saturating by width), e.g. a 64-bit extended counter over the 32-bit PMA
// port_xmit_wait that sits saturated. The others are "superseded": listed
// with the series (with their own blind why, for display), never judged,
// never counted, never in SpanCorrelation::blind.
//
// Verdict of the span (sighted = a congestion series in scope, not
// superseded, not blind):
//  - fabric:  at least one congestion series is anomalous (the ranked list of
//             anomalous series says which, where and how much);
//  - unknown: no congestion series in scope; or none is sighted (the window
//             is outside retention, not polled yet, ...); or a whole
//             congestion group of a port in scope is blind (every series of
//             it on that port), where the groups are
//               pause        pause, pause_frames, pause_storm, xmit_wait (IB
//                            credit wait is the IB form of backpressure)
//               ecn          ecn, cnp
//               drops        discards, drops
//               retransmits  retransmits
//               port_errors  port_errors, fec
//             (BlindGroupName in signal_class.h);
//  - clean:   otherwise: every sighted congestion series covers at least
//             min_coverage of the window and none is anomalous. The blind
//             series are a caveat: SpanCorrelation::blind lists them and the
//             reason names them ("mlx5_0/1 port_xmit_wait saturated: blind").
//
// Scope: the span's hints (rdma.device, rdma.port, network.interface.name)
// resolved through the store's port inventory (a device/port hint also covers
// the port's netdev, a netdev hint also covers the RDMA port on it); without
// hints, every port in the inventory (every series when the inventory is
// empty).
//
// GPU scope: a span with a fabricscope.gpu hint (PCI bus id in any of the
// forms HostTopology::FindGpu accepts, or a decimal GPU index) and no
// rdma.device or network.interface.name hint is scoped to the RDMA devices
// whose PCI relation to that GPU is the closest class present in the host
// topology's affinity map (PIX, then PXB, PHB, NODE, SYS: every device with
// the minimum relation), i.e. their ports in the inventory and those ports'
// netdevs; an rdma.port hint narrows that to the port with that number. An
// explicit rdma.device or netdev hint wins over the GPU hint. A GPU the
// topology does not know, or one without affinity entries, falls back to
// every port, and SpanCorrelation::scope says so. The topology is copied
// from the inventory once per GPU-scoped span (only for those).
//
// Thread-safety: Correlate() is const and thread-safe (it only reads the
// store). The store must outlive the correlator.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/series.h"
#include "daemon/correlate/signal_class.h"
#include "daemon/spans/span.h"

namespace fabricscope {

class PortInventory;
class Store;
struct SeriesSnapshot;
struct ProcessScopeResult;
struct HostTopology;
struct PortInfo;

struct CorrelationOptions {
  // --baseline-window: the baseline is [t0 - baseline_window, t0].
  absl::Duration baseline_window = absl::Seconds(10);
  // --correlate-rate-factor: a rate is anomalous at >= factor x baseline.
  double rate_factor = 3.0;
  // --correlate-pause-fraction: a pause fraction at or above this is anomalous.
  double pause_fraction_threshold = 0.05;
  // --correlate-floors: per-class absolute floors in events (family unit) per
  // second; a rate below its floor is never anomalous. Indexed by SignalClass.
  std::array<double, kNumSignalClasses> floors = DefaultFloors();
  // --correlate-min-coverage: a span is clean only when every congestion
  // series covers at least this fraction of the window.
  double min_coverage = 0.9;
  // An interval between two samples longer than this is a gap (the daemon sets
  // it to twice the slowest counter tier plus one second).
  absl::Duration max_sample_gap = absl::Seconds(3);

  static std::array<double, kNumSignalClasses> DefaultFloors();
};

// Parses "ecn=1000,cnp=500" (class=events per second, > 0) over `floors`.
absl::Status ParseFloors(absl::string_view text, std::array<double, kNumSignalClasses>* floors);
// Renders floors as "class=value,..." (the --help default).
std::string FormatFloors(const std::array<double, kNumSignalClasses>& floors);

// When a span counts as a stall: its fabricscope.stall flag, or its duration
// at or above the threshold configured for its name (--stall-thresholds
// "decode_step=200ms,kv_transfer=1s"; exact span names).
class StallPolicy {
 public:
  StallPolicy() = default;
  explicit StallPolicy(std::vector<std::pair<std::string, absl::Duration>> thresholds);
  bool IsStall(const Span& span) const;
  // Parses "name=DURATION,..." (a name may not contain ',' or '=').
  static absl::StatusOr<std::vector<std::pair<std::string, absl::Duration>>> Parse(
      absl::string_view text);
  static std::string Format(const std::vector<std::pair<std::string, absl::Duration>>& thresholds);

 private:
  absl::flat_hash_map<std::string, int64_t> threshold_ns_;
};

enum class Verdict : uint8_t { kUnknown = 0, kClean = 1, kFabric = 2 };
absl::string_view VerdictName(Verdict v);

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

// One series' part in a span's correlation. The names view the store's own
// strings (its series' keys and signals, kept for the store's lifetime): a
// correlation must not outlive the store it was read from (a span's result
// names 1,000 series; copying their names cost ~9 % of correlating it).
struct SeriesCorrelation {
  SeriesId id = kInvalidSeries;
  absl::string_view signal;  // Signal::name, e.g. "pfc_pause_seconds", "rdma_errors"
  SignalClass signal_class = SignalClass::kContext;
  absl::string_view source;  // raw source and counter name (SeriesKey)
  absl::string_view raw_name;
  absl::string_view device;
  uint32_t port = 0;
  absl::string_view netdev;
  absl::string_view priority;  // label values where the family has them, else ""
  absl::string_view direction;
  absl::string_view counter;  // `counter`/`reason` label (rdma_errors, discards, ...)
  WindowStats stats;
  // Congestion series only: why the series is blind for this span (see
  // "Blind series" above: "saturated", "reset", "gap", "vanished",
  // "not polled", "outside retention"), "" when sighted.
  std::string blind;
  // "source/raw_name" of the series of the same signal judged instead of this
  // one ("" when this one is judged). A superseded series is never anomalous,
  // never counted and never listed as blind.
  std::string superseded_by;
  double pause_fraction = 0;  // pause class only
  double score = 0;
  bool anomalous = false;
};

// A SeriesCorrelation naming `snap` (id, signal, class, key, the priority /
// direction / counter-or-reason label values); the judgement fields empty.
// `snap.key` and `snap.signal` must be set.
SeriesCorrelation SeriesCorrelationOf(const SeriesSnapshot& snap, SignalClass cls);

// A blind series as the span lists it (the caveat of a clean verdict).
struct BlindSeries {
  std::string signal;   // Signal::name
  std::string counter;  // `counter`/`reason` label, "" where the family has none
  std::string source;   // raw source and counter name (SeriesKey)
  std::string raw_name;
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  std::string priority;
  std::string direction;
  std::string why;  // SeriesCorrelation::blind
};

struct SpanCorrelation {
  int64_t start_unix_nano = 0;
  int64_t end_unix_nano = 0;
  bool stall = false;
  Verdict verdict = Verdict::kUnknown;
  // Why the verdict is unknown (or a summary for fabric/clean), for humans.
  std::string reason;
  // Which ports the span was correlated with and why, for humans
  // (SpanScope::description()): "every port", "span hint: mlx5_0/1",
  // "NICs nearest GPU 0000:1b:00.0 (PIX): mlx5_0/1",
  // "GPU 7 unknown to the topology: every port".
  std::string scope;
  // Series in scope: congestion series first ranked by score (descending),
  // then context series. The anomalous ones are the prefix with anomalous=true.
  std::vector<SeriesCorrelation> series;
  size_t congestion_series = 0;  // congestion series in scope, not superseded
  size_t covered_series = 0;     // of those, covering >= min_coverage
  // The blind congestion series in scope (not superseded), in the order of
  // `series`: they were not judged.
  std::vector<BlindSeries> blind;

  // The anomalous series (a prefix of `series`).
  absl::Span<const SeriesCorrelation> Anomalous() const;
};

class Correlator {
 public:
  // `store` holds the samples, `ports` the port inventory that scopes a span
  // by device/port/netdev (may be null: no inventory, as if empty). Both
  // outlive the correlator.
  Correlator(const Store* store, const PortInventory* ports, CorrelationOptions options,
             StallPolicy stalls);

  // The span's port-level correlation, led by its process's own QP counters
  // when it names its process (Span::pid; daemon/correlate/process_scope.h).
  SpanCorrelation Correlate(const Span& span) const;

  const CorrelationOptions& options() const { return options_; }
  const StallPolicy& stall_policy() const { return stalls_; }

 private:
  // The port-level correlation described above; also judges the span's
  // process series (into `process`) from the same store snapshot.
  SpanCorrelation CorrelatePorts(const Span& span, ProcessScopeResult* process) const;

  const Store* const store_;
  const PortInventory* const ports_;
  const CorrelationOptions options_;
  const StallPolicy stalls_;
  // ClassifySignal of each series met so far, by id (0: not yet, else the
  // class + 1): a series' signal never changes and the store never reuses an
  // id, so a class is computed once per series instead of once per span.
  mutable std::mutex classes_mu_;
  mutable std::vector<uint8_t> classes_;  // guarded by classes_mu_
};

// Scope matching, exposed for tests: whether a series at `key` belongs to the
// span's scope given the port inventory and, for a GPU hint, the host
// topology (see "GPU scope" above).
class SpanScope {
 public:
  // `topology` may be null (none known): a GPU hint then falls back to every
  // port. Neither argument is retained.
  SpanScope(const Span& span, const std::vector<PortInfo>& ports,
            const HostTopology* topology = nullptr);

  // Whether the span's GPU hint is the one that scopes it (no explicit NIC
  // hint): only then does the scope need the topology.
  static bool UsesGpuHint(const Span& span);

  bool Contains(const SeriesKey& key) const;
  // How the scope was chosen, for humans (SpanCorrelation::scope).
  const std::string& description() const { return description_; }

 private:
  // Every port of the inventory (every series when it is empty).
  void CoverEveryPort(const std::vector<PortInfo>& ports);
  // The GPU-scoped case; false (nothing set) when the GPU or its placement is
  // unknown, with the reason in `description_`.
  bool ScopeToGpu(const Span& span, const std::vector<PortInfo>& ports,
                  const HostTopology* topology);

  bool all_ = false;
  std::vector<std::pair<std::string, uint32_t>> ports_;  // port 0: every port of the device
  std::vector<std::string> netdevs_;
  std::string description_;
};

}  // namespace fabricscope
