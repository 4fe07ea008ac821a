// QueryEngine: the transport-free answers of the query API
// (proto/fabricscope/v1/query.proto): which spans to correlate (by trace id,
// span id or time range) and their verdicts, which series and samples, which
// detector events, the port inventory, and what a recording of a time range
// holds. It selects, bounds and validates; the rules of a verdict live in the
// correlator (daemon/correlate/correlator.h).
//
// It knows nothing of gRPC or protobuf: plain request structs in, plain
// results or absl::StatusOr out (errors are INVALID_ARGUMENT with the message
// the API documents). The gRPC adapter is daemon/service/query_service.h; the
// CLI's offline `analyze` asks it directly.
//
// Time ranges: Unix nanoseconds, inclusive at both ends. Where a request says
// "0 = unset", a `to` of 0 is the clock's now and a `from` of 0 is a minute
// before `to`.
//
// Thread-safety: every method is const and thread-safe (gRPC calls them
// concurrently) as long as the borrowed objects are, which they all are.
// Ownership: everything is borrowed and must outlive the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/clock.h"
#include "core/series.h"
#include "daemon/correlate/correlator.h"
#include "daemon/detect/event_log.h"
#include "daemon/spans/span_store.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

struct QueryTimeRange {
  int64_t from_unix_nano = 0;
  int64_t to_unix_nano = 0;
};

// Which correlated spans a listing keeps (the summary counts every one). A
// span is selected when `all` is set, or when it matches any set part: its
// verdict is fabric/clean/unknown, or `stalls` and it stalled.
struct SpanSelection {
  bool all = true;
  bool stalls = false;
  bool fabric = false;
  bool clean = false;
  bool unknown = false;

  bool Selects(const SpanCorrelation& c) const;
};

// Query.Correlate: exactly one selector.
struct CorrelateQuery {
  enum class Selector { kNone, kTraceId, kSpanId, kTimeRange };
  Selector selector = Selector::kNone;
  // kTraceId: 16 raw bytes; kSpanId: 8 raw bytes.
  std::string id;
  // kTimeRange: the spans overlapping it (both ends as given, no defaults;
  // `to` before `from` is an error), only those named `name` unless empty.
  QueryTimeRange time_range;
  std::string name;
  // "NAMESPACE/POD": only the spans attributed to that Kubernetes pod (its
  // k8s.* resource attributes, else its process's pod; see "Pod scope" in
  // daemon/correlate/correlator.h), among those the selector found; empty:
  // every span.
  std::string pod;
  // At most this many spans (0 = QueryEngine::kMaxSpans; capped at it).
  uint32_t limit = 0;
  // Keep every in-scope series in the verdicts, not only the anomalous ones.
  bool include_all_series = false;
  // Of the spans `limit` leaves, which to return, and at most how many of
  // those (the latest; 0 = no further limit). See SelectSpans.
  SpanSelection selection;
  uint32_t max_listed = 0;
  // Asked between spans (correlating 10,000 spans takes seconds): true ends
  // the query with CANCELLED. The gRPC service passes its call's
  // cancellation, so a client that gives up, or the daemon's stop, ends it.
  std::function<bool()> cancelled;
};

// A span with its verdict. correlation.series holds only the anomalous
// series unless the query asked for all.
struct CorrelatedSpan {
  SpanRef span;
  SpanCorrelation correlation;
  // A GenAI request's step-level evidence (daemon/spans/genai.h): the stalled
  // collective spans held for this host inside its judged (decode) window, on
  // its GPU where both name one, longest first, at most kMaxSteps. Filled for
  // the listed spans only.
  std::vector<SpanRef> steps;
  static constexpr size_t kMaxSteps = 10;
};

// A signal blamed for stalls: the top-ranked anomalous series of each stall
// judged fabric, counted by signal, counter (or reason), direction, priority.
struct BlamedSignal {
  std::string signal;
  std::string counter;
  std::string direction;
  std::string priority;
  size_t spans = 0;
};

// Fabric spans that are not stalls, grouped by the series that explained each
// (its top-ranked anomalous series: signal, counter, port, priority,
// direction): one line for a storm's hundred slowed-but-not-stalled spans
// instead of a hundred.
struct FabricGroup {
  std::string signal;
  std::string counter;
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  std::string priority;
  std::string direction;
  // Pause class: `peak` is the fraction of a span paused.
  SignalClass signal_class = SignalClass::kContext;
  size_t spans = 0;
  int64_t first_start_unix_nano = 0;
  int64_t last_end_unix_nano = 0;
  // The highest pause fraction (pause class) or peak rate (/s) among the
  // group's spans, and the highest score.
  double peak = 0;
  double peak_score = 0;
};

// What a set of correlated spans holds, before selection and limits.
struct CorrelateSummary {
  static constexpr size_t kMaxBlamed = 5;
  static constexpr size_t kMaxFabricGroups = 10;
  size_t spans = 0;
  size_t by_verdict[3] = {};  // indexed by Verdict (kUnknown, kClean, kFabric)
  size_t stalls = 0;
  size_t stalls_by_verdict[3] = {};
  // Among the stalls judged fabric: most stalls first, ties by
  // signal/counter/direction/priority; at most kMaxBlamed.
  std::vector<BlamedSignal> blamed;
  // The fabric spans that are not stalls, grouped: most spans first, then the
  // highest score, ties by signal and place; at most kMaxFabricGroups, the
  // groups left out counted.
  std::vector<FabricGroup> fabric_groups;
  size_t fabric_groups_left_out = 0;
  size_t not_selected = 0;  // spans the selection left out
  size_t over_limit = 0;    // selected spans the listing limit left out (see SelectSpans)
};

// Counts `spans` (in start order) into a summary, then keeps in `spans` only
// the selected ones, at most `max_listed` of them (0: every selected one) in
// their order: over the limit the stalls come first, the most fabric-bound
// and longest of them (StallRanksBefore), then the latest other spans fill
// the rest. Used by QueryEngine::Correlate and by the CLI's offline `analyze`.
CorrelateSummary SelectSpans(const SpanSelection& selection, uint32_t max_listed,
                             std::vector<CorrelatedSpan>* spans);

// How stalls rank for the reader: judged fabric first, then unknown, then
// clean; within a verdict the longest first, then the earliest. A strict weak
// order on (verdict, duration, start): the same spans rank the same in every
// run.
bool StallRanksBefore(Verdict a_verdict, int64_t a_duration_ns, int64_t a_start_unix_nano,
                      Verdict b_verdict, int64_t b_duration_ns, int64_t b_start_unix_nano);

// A label that a series must carry with this exact value ("" matches a series
// without the label).
struct LabelMatcher {
  std::string label;
  std::string value;
};

// Query.Series.
struct SeriesQuery {
  // A signal name, a family name or a raw counter name; "" matches every one.
  std::string signal;
  std::vector<LabelMatcher> matchers;   // all must match
  QueryTimeRange time_range;            // 0 = unset
  uint32_t max_series = 0;              // 0 = QueryEngine::kDefaultMaxSeries
  uint32_t max_samples_per_series = 0;  // 0 = QueryEngine::kDefaultMaxSamples
};

// One series with its samples in a time range.
struct SeriesSamples {
  const SeriesKey* key = nullptr;  // owned by the store; never null here
  const Signal* signal = nullptr;  // ditto; signal->family is never null
  SeriesState state;
  // The family's labels and this series' value of each, in family order.
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<Sample> samples;  // oldest first
  bool truncated = false;       // older samples were dropped (max samples)
};

// Query.Events.
struct EventsQuery {
  QueryTimeRange time_range;  // 0 = unset
  std::string detector;       // "" = every detector
  bool active_only = false;
  uint32_t limit = 0;  // at most this many, the latest (0 = every one)
};

// Receives what Query.Record streams: every series with samples in the range
// (one call each), then the overlapping spans in batches. A non-OK status
// from any method ends the walk and is returned by QueryEngine::Record.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Called once first, with the window resolved (what a header says).
  virtual absl::Status OnStart(int64_t /*from_unix_nano*/, int64_t /*to_unix_nano*/) {
    return absl::OkStatus();
  }
  // Asked before each series is read (e.g. "the caller went away").
  virtual absl::Status Check() { return absl::OkStatus(); }
  virtual absl::Status OnSeries(const SeriesSamples& series) = 0;
  // At most QueryEngine::kRecordSpanBatch spans, ordered by start.
  virtual absl::Status OnSpans(absl::Span<const SpanRef> spans) = 0;
};

class QueryEngine {
 public:
  static constexpr uint32_t kMaxSpans = 10000;
  static constexpr uint32_t kDefaultMaxSeries = 1000;
  static constexpr uint32_t kDefaultMaxSamples = 100000;
  static constexpr size_t kRecordSpanBatch = 1000;

  // `spans` may be null (no span store: Correlate and Record find no spans);
  // `ports` may be null (no inventory: Ports returns an empty list);
  // `events` may be null (no detectors: Events returns an empty list).
  QueryEngine(const SpanStore* spans, const Correlator* correlator, const Store* store,
              const PortInventory* ports, const EventLog* events, Clock* clock)
      : spans_(spans),
        correlator_(correlator),
        store_(store),
        ports_(ports),
        events_(events),
        clock_(clock) {}

  // The selected spans, each with its verdict, in the span store's order:
  // those the selector and `limit` find, then query.selection and
  // query.max_listed (SelectSpans). `summary`, when not null, receives the
  // counts of every span found, selected or not. INVALID_ARGUMENT: no
  // selector, an id of the wrong size, a backwards range.
  absl::StatusOr<std::vector<CorrelatedSpan>> Correlate(const CorrelateQuery& query,
                                                        CorrelateSummary* summary = nullptr) const;

  // The verdict of one span that need not be in the span store (offline
  // analysis of a recording), trimmed as in Correlate.
  SpanCorrelation CorrelateSpan(const Span& span, bool include_all_series) const;
  // CorrelatedSpan::steps of `request` (empty without a span store).
  std::vector<SpanRef> StepEvidence(const Span& request) const;

  // Matching series in store order, at most max_series, each with its newest
  // max_samples_per_series samples in the range; `left_out`, when not null,
  // receives how many more series matched. INVALID_ARGUMENT: a backwards
  // range.
  absl::StatusOr<std::vector<SeriesSamples>> Series(const SeriesQuery& query,
                                                    size_t* left_out = nullptr) const;
  // Whether `want` (SeriesQuery::signal) names this series: its signal name,
  // its family name with or without the fabricscope_ prefix and _total
  // suffix, or its raw counter name; "" names every series.
  static bool NamesSeries(absl::string_view want, const Signal& signal, const SeriesKey& key);
  // The signal names of the series in the store, sorted, each once.
  std::vector<std::string> SignalNames() const;

  // Detector events overlapping the range, in id order, the latest `limit`
  // of them; `left_out`, when not null, receives how many earlier ones the
  // limit left out. INVALID_ARGUMENT: a backwards range.
  absl::StatusOr<std::vector<DetectorEvent>> Events(const EventsQuery& query,
                                                    size_t* left_out = nullptr) const;

  // The port inventory.
  std::vector<PortInfo> Ports() const;

  // A copy of the host topology (link partners, PCI placement, GPUs; empty
  // without an inventory): read once per call by whoever names partners.
  HostTopology Topology() const;
  // The pods of the port inventory (store/pod_table.h).
  PodTable Pods() const;

  // Walks what a recording of `range` (0 = unset) holds into `sink`: every
  // series with samples in it (all of them), then every span overlapping it.
  // INVALID_ARGUMENT: a backwards range; else the sink's first error, or OK.
  absl::Status Record(const QueryTimeRange& range, RecordSink& sink) const;

 private:
  // Fills in the defaults of a range; false when `to` is before `from`.
  bool Resolve(const QueryTimeRange& range, int64_t* from, int64_t* to) const;
  SeriesSamples Read(const SeriesSnapshot& s, int64_t from, int64_t to, size_t max_samples) const;

  const SpanStore* const spans_;
  const Correlator* const correlator_;
  const Store* const store_;
  const PortInventory* const ports_;
  const EventLog* const events_;
  Clock* const clock_;
};

}  // namespace fabricscope
