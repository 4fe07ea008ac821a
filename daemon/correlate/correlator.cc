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
#include "daemon/correlate/window_stats.h"
#include "store/counter_semantics.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {

// ---------------------------------------------------------------------------
// The correlator.

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
  // Judged at ingest (the StallLearner) where it was; else the policy here.
  out.stall = span.judgement.judged ? span.judgement.stall : stalls_.IsStall(span);

  const std::pair<int64_t, int64_t> window = JudgedWindow(span);
  const int64_t t0 = window.first;
  const int64_t t1 = window.second;
  const int64_t baseline_ns = absl::ToInt64Nanoseconds(options_.baseline_window);
  const int64_t gap_ns = absl::ToInt64Nanoseconds(options_.max_sample_gap);

  const std::vector<PortInfo> ports = ports_ != nullptr ? ports_->List() : std::vector<PortInfo>{};
  SpanPod pod;  // the span's pod, if the kubernetes source knows pods
  if (ports_ != nullptr) {
    const std::shared_ptr<const PodTable> pods = ports_->Pods();
    pod = ResolveSpanPod(span, *pods);
  }
  out.pod = pod.pod;
  out.pod_via = pod.via;
  std::optional<HostTopology> topology;  // copied only for a GPU-scoped span
  if (ports_ != nullptr && SpanScope::NeedsTopology(span, &pod)) topology = ports_->Topology();
  const SpanScope scope(span, ports, topology.has_value() ? &*topology : nullptr, &pod);
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
  *process = CorrelateProcess(*store_, all, scope, span,
                              pod.host_pid != 0 ? pod.host_pid : span.pid, options_);
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
        const double from_baseline = options_.rate_factor * sc.stats.baseline_rate;
        sc.score = sc.stats.rate / std::max(floor, from_baseline);
        sc.anomalous = sc.stats.delta > 0 && sc.score >= 1.0;
        sc.no_baseline = from_baseline < floor;
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
  // Among the anomalous series a pause fraction ranks first: it is measured
  // in the span's own time (the share of it the port could not send), needs
  // no baseline, and is the direct account of lost time; a rate's score is a
  // multiple of its baseline, which moves from run to run with what the
  // baseline window held (a consequence such as IB xmit_wait during the same
  // pause scores 10x the pause in one run and less in the next). Then the
  // rates judged against a baseline, then those judged against the floor
  // alone (no_baseline), each by score.
  struct RankKey {
    bool anomalous;
    bool congestion;  // a congestion series that is judged
    bool pause;       // judged by its pause fraction
    bool referenced;  // judged against a baseline or a pause fraction
    double score;
    size_t index;
  };
  std::vector<RankKey> keys(out.series.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const SeriesCorrelation& sc = out.series[i];
    keys[i] = {sc.anomalous,
               IsCongestionClass(sc.signal_class) && sc.superseded_by.empty(),
               sc.signal_class == SignalClass::kPause,
               !sc.no_baseline,
               sc.score,
               i};
  }
  std::stable_sort(keys.begin(), keys.end(), [](const RankKey& a, const RankKey& b) {
    if (a.anomalous != b.anomalous) return a.anomalous;
    if (a.congestion != b.congestion) return a.congestion;
    if (a.anomalous && a.pause != b.pause) return a.pause;
    if (a.referenced != b.referenced) return a.referenced;
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
