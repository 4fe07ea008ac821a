// The types of a span's correlation, shared by the correlator
// (correlator.h) and the process scope (process_scope.h): the options and
// the stall policy, the verdict, one series' part (SeriesCorrelation), the
// whole result (SpanCorrelation) and the span's scope (SpanScope).
// correlator.h's file comment describes the judgement they carry.
//
// Thread-safety: value types; StallPolicy and SpanScope are immutable after
// construction.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
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
#include "daemon/correlate/window_stats.h"
#include "daemon/spans/span.h"
#include "store/pod_table.h"
#include "store/port_inventory.h"

namespace fabricscope {

struct SeriesSnapshot;
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
  // Pause class: pause_fraction / --correlate-pause-fraction. Rate classes:
  // rate / max(floor, --correlate-rate-factor x baseline rate).
  double score = 0;
  bool anomalous = false;
  // A rate series whose baseline is below its floor (zero, tiny, or none):
  // judged against the floor alone, so its score says how many floors the
  // rate is, not how far it left its own history. Among anomalous series it
  // ranks after every one judged against a baseline or a pause fraction,
  // whatever its score: a counter idle before the span (xmit_wait at 0/s)
  // must not outrank the pause that explains the stall.
  bool no_baseline = false;
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
  // The Kubernetes pod the span is attributed to (its k8s.* resource
  // attributes, else its process's pod), empty when none; and how.
  PodRef pod;
  std::string pod_via;  // "span attributes", "process 4242 (devices)"
  // Series in scope: congestion series first, the anomalous ones ranked
  // pause fractions first, then rates against a baseline, then rates with
  // no_baseline, each by score (descending); then context series. The anomalous ones are the prefix
  // with anomalous=true.
  std::vector<SeriesCorrelation> series;
  size_t congestion_series = 0;  // congestion series in scope, not superseded
  size_t covered_series = 0;     // of those, covering >= min_coverage
  // The blind congestion series in scope (not superseded), in the order of
  // `series`: they were not judged.
  std::vector<BlindSeries> blind;

  // The anomalous series (a prefix of `series`).
  absl::Span<const SeriesCorrelation> Anomalous() const;
};

// "mlx5_0/1", or "mlx5_0" for every port of a device (port 0): how the
// scope and the verdicts name a port.
std::string PortName(absl::string_view device, uint32_t port);

// The pod of a span and the devices that scope it: the pod its k8s.*
// resource attributes name (k8s.pod.uid alone is named through the table),
// else the pod of its process (Span::pid) in the table; its RDMA devices
// (each VF's PF after them: the physical port it rides) and its GPUs, the
// container's own when the span names a container that holds any.
struct SpanPod {
  PodRef pod;
  std::string via;
  // The host pid of the process the span's process.pid named (0: none, or
  // the pod came from the span's attributes): differs from Span::pid for an
  // SDK inside a container, which reports its container pid.
  uint32_t host_pid = 0;
  std::vector<std::string> rdma_devices;
  std::vector<std::string> gpus;  // bus ids
};
SpanPod ResolveSpanPod(const Span& span, const PodTable& pods);

// Scope matching, exposed for tests: whether a series at `key` belongs to the
// span's scope given the port inventory and, for a GPU hint, the host
// topology (see "GPU scope" above).
class SpanScope {
 public:
  // `topology` may be null (none known): a GPU hint then falls back to every
  // port. Neither argument is retained.
  // `pod` (may be null) scopes a span with no hint of its own (see "Pod
  // scope" in correlator.h).
  SpanScope(const Span& span, const std::vector<PortInfo>& ports,
            const HostTopology* topology = nullptr, const SpanPod* pod = nullptr);

  // Whether the span's GPU hint is the one that scopes it (no explicit NIC
  // hint): only then does the scope need the topology.
  static bool UsesGpuHint(const Span& span);
  // Whether the scope needs the topology: a GPU hint, or a pod scoped by its
  // GPUs.
  static bool NeedsTopology(const Span& span, const SpanPod* pod);

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
  // The NICs nearest `gpu` (a topology GPU) into the scope, their names
  // appended; the relation, or nullopt when no placement is known.
  std::optional<PciRelation> AddNicsNearest(const GpuInfo& gpu, uint32_t rdma_port,
                                            const std::vector<PortInfo>& ports,
                                            const HostTopology& topology,
                                            std::vector<std::string>* names);
  // The pod-scoped case; false (nothing set) when the pod has no RDMA device
  // and no GPU with a known placement.
  bool ScopeToPod(const Span& span, const SpanPod& pod, const std::vector<PortInfo>& ports,
                  const HostTopology* topology);
  // `device` (port `rdma_port`, 0: all) into the scope: its inventory ports
  // and their netdevs, else the device's series by name.
  void AddDevice(const std::string& device, uint32_t rdma_port, const std::vector<PortInfo>& ports,
                 std::vector<std::string>* names);

  bool all_ = false;
  std::vector<std::pair<std::string, uint32_t>> ports_;  // port 0: every port of the device
  std::vector<std::string> netdevs_;
  std::string description_;
};

}  // namespace fabricscope
