// The detector interface: what one detector is, what the engine
// (daemon/detect/detectors.h) calls, and the DetectorContext all detectors
// share.
//
// A detector is a small state machine over the samples of a few metric
// families: it lists the families it reads (Families()), the engine hands it
// every sample of those families (Observe()), and it turns per-interval
// conditions into episodes (Episode: a debouncer, an event in the EventLog, a
// state gauge). Adding one is one file pair,
// daemon/detect/<name>_detector.{h,cc}, one line in
// daemon/detect/register_all.cc and one line in daemon/CMakeLists.txt (and
// its test). Its options (flags and config keys: name, type, default, bounds,
// help) are OptionSpecs of its DetectorClass, declared in its .cc with
// OptionKey constants it reads them by; nothing else lists them. Its
// documentation (kinds, rules, the options it reads), its kinds and its own
// metric declarations (DefineMetric) live in its files; its name lives only in
// the registration list, and the engine hands it in (Detector::name()).
//
// Thread-safety: not thread-safe. The engine holds its one mutex whenever it
// calls a detector (construction aside) or the DetectorContext, so detectors
// and the context need no locking of their own and must not take locks that
// the engine's callers may hold. A detector must not block: O(1) work per
// sample is the budget (OnAppend runs on the collectors' tier threads).
//
// Ownership: the engine owns the context and the detectors; a detector keeps
// the DetectorContext* it was created with (it outlives the detector).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/metrics.h"
#include "core/signals.h"
#include "daemon/detect/detector_options.h"
#include "daemon/detect/episode.h"
#include "daemon/detect/event_log.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

// A port as completely as the detectors know it: the RDMA device and port,
// its netdev and its link rate (bits per second; 0 when unknown).
struct PortRef {
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  double link_bps = 0;
};

// A table indexed by the store's series ids (dense, counted from 0): the
// per-series caches of the engine and the detectors, so that a sample finds
// what its series resolved to without string work. Entries are
// value-initialised on first use. Ids from kMaxIds on get none (Get returns
// null; callers take their uncached path), which bounds the table.
// Not thread-safe (used under the engine's lock). A pointer from Get is
// valid until the next Get.
template <typename T>
class SeriesTable {
 public:
  static constexpr SeriesId kMaxIds = SeriesId{1} << 20;
  T* Get(SeriesId id) {
    if (id >= kMaxIds) return nullptr;
    if (id >= entries_.size()) entries_.resize(static_cast<size_t>(id) + 1);
    return &entries_[id];
  }

 private:
  std::vector<T> entries_;
};

// What the detectors share: the options, where events go, the metrics (state
// gauges and fabricscope_detector_events_total) and the port inventory
// (device/port <-> netdev, link rates) learned from the samples and the
// PortInventory. One per engine; guarded by the engine's mutex.
class DetectorContext {
 public:
  // `ports` (the port inventory) and `metrics` may be null; `events` not.
  // `options`, `ports`, `events` and `metrics` outlive the context.
  DetectorContext(const DetectorOptions& options, const PortInventory* ports, EventLog* events,
                  MetricsRegistry* metrics);

  const DetectorOptions& options() const { return options_; }
  // Null when the engine runs without metrics (offline analysis, tests).
  MetricsRegistry* metrics() { return metrics_; }
  EventLog* events() { return events_; }

  // Makes fabricscope_detector_events_total{detector, kind} exist (0) for
  // each kind before the first episode. The engine calls it for each enabled
  // detector.
  void DeclareKinds(absl::string_view detector, const std::vector<std::string>& kinds);

  // Learns the device/port <-> netdev pairing from series that carry both.
  // The engine calls it for every sample a detector reads.
  void Learn(const SeriesKey& key);

  // The port a series belongs to, as completely as known (the port
  // inventory is consulted at most once a second of `now_ns`).
  PortRef Resolve(const SeriesKey& key, int64_t now_ns);
  // The same for the series `id` (whose key is `key`), remembered per series
  // while the port maps are unchanged (generation()) and the port was found
  // with its link rate (otherwise Resolve runs, and may consult the
  // inventory, as before). The reference is valid until the next call.
  const PortRef& ResolveSeries(SeriesId id, const SeriesKey& key, int64_t now_ns);
  // Changes whenever what Resolve returns may change (a pairing learned, the
  // inventory consulted): a detector's per-series cache of anything derived
  // from a PortRef is valid while this is unchanged. Never 0.
  uint64_t generation() const { return generation_; }

  // Sets a state gauge; several holders of one label set are reference
  // counted (the gauge is 1 while any of them is active).
  void SetActive(const MetricSpec& spec, const std::map<std::string, std::string>& labels,
                 bool active);
  // Makes the gauge series exist (0) before the first episode.
  void DeclareGauge(const MetricSpec& spec, const std::map<std::string, std::string>& labels);

  // Opens an event (counted in fabricscope_detector_events_total) and
  // returns its id for EventLog::Update/Close.
  uint64_t OpenEvent(DetectorEvent e);

 private:
  // *stable: the entry was found with its link rate, so no inventory refresh
  // was due (the result depends only on the maps).
  const PortRef* Find(absl::flat_hash_map<std::string, PortRef>& map, const std::string& key,
                      int64_t now_ns, bool* stable);
  PortRef ResolveImpl(const SeriesKey& key, int64_t now_ns, bool* stable);

  struct ResolvedSeries {
    uint64_t generation = 0;  // 0: nothing cached
    PortRef ref;
  };

  const DetectorOptions& options_;
  const PortInventory* const ports_;
  EventLog* const events_;
  MetricsRegistry* const metrics_;
  absl::flat_hash_map<std::string, PortRef> by_netdev_;
  absl::flat_hash_map<std::string, PortRef> by_device_;  // "mlx5_0/1"
  int64_t last_refresh_ns_ = INT64_MIN / 2;
  uint64_t generation_ = 1;
  SeriesTable<ResolvedSeries> resolved_;
  PortRef scratch_;  // ResolveSeries' result when the series has no table entry
  absl::flat_hash_map<std::string, int> active_;
};

// Episode-merge ranks (EventLog, event_log.h): on one port, an event joins
// the episode of an equal or higher rank that is active or just ended, and
// absorbs the lower-ranked events that led up to it. A storm outranks the
// NIC's pause-storm events, link and ECN episodes outrank the retransmits
// they cause, and everything outranks the bursts and pause roles it shows up
// in. Configuration states (ecn_disabled_on_pfc_priority) never merge.
enum MergeRank : int {
  kRankNever = -1,
  kRankBurst = 0,
  kRankPauseRole = 1,
  kRankRetransmit = 2,
  kRankNicPauseStorm = 3,
  kRankEcn = 4,
  kRankLink = 5,
  kRankStorm = 6,
};

// How an event names a signal: the family's signal name, then its counter or
// reason, direction and priority where the family has them
// ("pfc_pause_frames rx prio 3", "discards rx_discards_phy",
// "rdma_errors local_ack_timeout_err"), and " (estimated)" for a derived
// estimate (Signal::estimated: "pfc_pause_seconds rx prio 3 (estimated)").
std::string SignalText(const Signal& signal);

// One episode of one detector at one place: its debouncer, its event and
// gauge. Detectors keep one per place and kind, fill in `tmpl` (and `gauge`,
// `gauge_labels`) when they create it, and Feed() it each judged interval.
struct Episode {
  Episode(int64_t on_ns, int64_t off_ns) : deb(on_ns, off_ns) {}
  Debouncer deb;
  uint64_t event_id = 0;
  double run_peak = 0;  // peak of the current run (pending or active)
  DetectorEvent tmpl;   // detector, kind and place of the events
  const MetricSpec* gauge = nullptr;
  std::map<std::string, std::string> gauge_labels;
  std::string summary_text;         // of the open event
  int64_t last_fed_ns = INT64_MIN;  // end of the last interval judged
  int64_t fed_interval_ns = 0;      // how often it is judged; 0: not known yet
  // False: the episode only drives its gauge; its detector opens an event
  // (Report) once it deems the episode worth one.
  bool report = true;

  // Raises the judging interval to the input's poll interval where the
  // intervals fed do not show it (a configuration state judged at instants).
  void NoteInterval(int64_t ns) { fed_interval_ns = std::max(fed_interval_ns, ns); }

  // An active episode whose input stopped: no interval judged for
  // max(kStaleFloorNs, kStalePolls x its judging interval) before `now_ns`.
  // Not before the judging interval is known (one instant judged so far).
  static constexpr int64_t kStaleFloorNs = 5'000'000'000;
  static constexpr int64_t kStalePolls = 5;
  bool Stale(int64_t now_ns) const;
  // Ends a stale episode at the end of the last interval it judged.
  void Expire(DetectorContext* ctx);
  // Opens the event of an active episode that has none yet (report false
  // until now), detected at `now_ns`; later Feeds update and close it.
  void Report(DetectorContext* ctx, int64_t now_ns, const std::string& summary);

  // Feeds one judged interval [start_ns, end_ns]; `measure` is the value
  // whose peak is reported; `summary` renders the event's summary. Opens,
  // updates and closes the event and sets the gauge. Returns the transition.
  Debouncer::Transition Feed(DetectorContext* ctx, int64_t start_ns, int64_t end_ns, bool cond,
                             double measure,
                             const std::function<std::string(const Episode&)>& summary);
};

// One detector. Created by its factory (DetectorClass::create) with the name
// it is registered under; lives as long as the engine.
class Detector {
 public:
  Detector(std::string name, DetectorContext* ctx) : ctx_(ctx), name_(std::move(name)) {}
  virtual ~Detector() = default;
  Detector(const Detector&) = delete;
  Detector& operator=(const Detector&) = delete;

  // The registered name: the `detector` of its events and metric labels.
  const std::string& name() const { return name_; }

  // The metric families whose samples it reads; fixed after construction.
  virtual std::vector<const MetricSpec*> Families() const = 0;
  // Whether it reads the series of `signal` (a signal of one of Families()).
  // The engine asks once per series and calls Observe only for the series
  // read; by default every series of the families.
  virtual bool Reads(const Signal& signal) const { return true; }
  // One sample of one of Families(). Called with the engine's lock held.
  virtual void Observe(const AppendEvent& ev) = 0;
  // Calls `fn` for every episode this detector holds (the engine's stale
  // sweep and Active()). Called with the engine's lock held.
  virtual void ForEachEpisode(const std::function<void(Episode&)>& fn) = 0;

  // Active episodes.
  size_t Active();

 protected:
  // An event template of this detector: `kind` at the place given, with its
  // episode-merge rank and the signal it was seen in (none when empty).
  DetectorEvent MakeEvent(std::string kind, std::string device, uint32_t port, std::string netdev,
                          std::string priority, std::string direction, int merge_rank = kRankNever,
                          std::string signal = "") const;

  static int64_t Ns(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }
  // The `port` label: "" for port 0 (a netdev without an RDMA port).
  static std::string PortLabel(uint32_t port);
  // The length of the sample's poll interval in seconds.
  static double IntervalSeconds(const AppendEvent& ev) {
    return static_cast<double>(ev.end_ns - ev.start_ns) * 1e-9;
  }
  // The fraction of the interval a pause-time counter (seconds) says the port
  // was paused, clamped to [0, 1] (a late tick can report more than the interval).
  static double PauseFraction(const AppendEvent& ev) {
    return std::clamp(ev.delta / IntervalSeconds(ev), 0.0, 1.0);
  }

  DetectorContext* const ctx_;

 private:
  const std::string name_;
};

// Creates a detector under its registered name. Must not fail (the options
// were validated before).
using DetectorFactory =
    std::function<std::unique_ptr<Detector>(std::string name, DetectorContext* ctx)>;

// What the registry knows of a detector without creating one; each detector
// class returns its own from a static Class().
struct DetectorClass {
  std::string description;
  // The `kind` values of its events (fabricscope_detector_events_total is
  // declared with each when the detector is enabled).
  std::vector<std::string> kinds;
  // Declares its own metric families (state gauges, counters) in the
  // registry, so they are exported before the first episode. The engine calls
  // it for every registered detector, enabled or not. May be empty.
  std::function<void(MetricsRegistry&)> declare_metrics;
  DetectorFactory create;
  // Its own options (core/options.h), declared next to its code: the daemon's
  // --help, config file and docs/options.md list them with the detector's; it
  // reads them from DetectorContext::options().values (best once, at
  // construction: every detector option needs a restart). May be empty.
  std::vector<OptionSpec> options;
  // Checks its options together (one against another); may be empty.
  std::function<absl::Status(const OptionValues&)> validate;
};

}  // namespace fabricscope
