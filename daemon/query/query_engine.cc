#include "daemon/query/query_engine.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fabricscope {
namespace {

constexpr char kBackwards[] = "time_range: to_unix_nano is before from_unix_nano";

// The value of `label` for a series ("" when it has no such label).
std::string LabelOf(const SeriesSnapshot& s, const std::string& label) {
  const SeriesKey& k = *s.key;
  if (label == "device") return k.device;
  if (label == "port") return k.port == 0 ? "" : absl::StrCat(k.port);
  if (label == "netdev") return k.netdev;
  if (label == "source") return k.source;
  if (label == "name") return k.name;
  return std::string(s.signal->Label(label));
}

bool Complete(const SeriesSnapshot& s) {
  return s.key != nullptr && s.signal != nullptr && s.signal->family != nullptr;
}

// Fabric first, then unknown (could not tell), then clean.
int VerdictRank(Verdict v) {
  switch (v) {
    case Verdict::kFabric:
      return 0;
    case Verdict::kUnknown:
      return 1;
    case Verdict::kClean:
      return 2;
  }
  return 3;
}

bool StallBefore(const CorrelatedSpan& a, const CorrelatedSpan& b) {
  const SpanCorrelation& x = a.correlation;
  const SpanCorrelation& y = b.correlation;
  return StallRanksBefore(x.verdict, x.end_unix_nano - x.start_unix_nano, x.start_unix_nano,
                          y.verdict, y.end_unix_nano - y.start_unix_nano, y.start_unix_nano);
}

using GroupKey = std::tuple<std::string, std::string, std::string, uint32_t, std::string,
                            std::string, std::string>;

// Adds a non-stall fabric span to the group of its top-ranked series.
void AddToGroup(const SpanCorrelation& c, const SeriesCorrelation& top,
                std::map<GroupKey, FabricGroup>* groups) {
  GroupKey key{
      std::string(top.signal), std::string(top.counter),  std::string(top.device),   top.port,
      std::string(top.netdev), std::string(top.priority), std::string(top.direction)};
  auto [it, fresh] = groups->try_emplace(std::move(key));
  FabricGroup& g = it->second;
  if (fresh) {
    g.signal = std::string(top.signal);
    g.counter = std::string(top.counter);
    g.device = std::string(top.device);
    g.port = top.port;
    g.netdev = std::string(top.netdev);
    g.priority = std::string(top.priority);
    g.direction = std::string(top.direction);
    g.signal_class = top.signal_class;
    g.first_start_unix_nano = c.start_unix_nano;
  }
  ++g.spans;
  g.first_start_unix_nano = std::min(g.first_start_unix_nano, c.start_unix_nano);
  g.last_end_unix_nano = std::max(g.last_end_unix_nano, c.end_unix_nano);
  const bool pause = g.signal_class == SignalClass::kPause;
  g.peak = std::max(g.peak, pause ? top.pause_fraction : top.stats.peak_rate);
  g.peak_score = std::max(g.peak_score, top.score);
}

}  // namespace

bool StallRanksBefore(Verdict a_verdict, int64_t a_duration_ns, int64_t a_start_unix_nano,
                      Verdict b_verdict, int64_t b_duration_ns, int64_t b_start_unix_nano) {
  return std::make_tuple(VerdictRank(a_verdict), -a_duration_ns, a_start_unix_nano) <
         std::make_tuple(VerdictRank(b_verdict), -b_duration_ns, b_start_unix_nano);
}

bool SpanSelection::Selects(const SpanCorrelation& c) const {
  if (all || (stalls && c.stall)) return true;
  switch (c.verdict) {
    case Verdict::kFabric:
      return fabric;
    case Verdict::kClean:
      return clean;
    case Verdict::kUnknown:
      return unknown;
  }
  return false;
}

CorrelateSummary SelectSpans(const SpanSelection& selection, uint32_t max_listed,
                             std::vector<CorrelatedSpan>* spans) {
  CorrelateSummary sum;
  using BlameKey = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<BlameKey, size_t> blamed;
  std::map<GroupKey, FabricGroup> groups;
  size_t kept = 0;
  for (CorrelatedSpan& s : *spans) {
    const SpanCorrelation& c = s.correlation;
    const auto v = static_cast<size_t>(c.verdict);
    ++sum.spans;
    ++sum.by_verdict[v];
    if (c.stall) {
      ++sum.stalls;
      ++sum.stalls_by_verdict[v];
    }
    if (c.verdict == Verdict::kFabric && !c.series.empty() && c.series[0].anomalous) {
      const SeriesCorrelation& top = c.series[0];
      if (c.stall) {
        ++blamed[{std::string(top.signal), std::string(top.counter), std::string(top.direction),
                  std::string(top.priority)}];
      } else {
        AddToGroup(c, top, &groups);
      }
    }
    if (!selection.Selects(c)) {
      ++sum.not_selected;
      continue;
    }
    if (&(*spans)[kept] != &s) (*spans)[kept] = std::move(s);
    ++kept;
  }
  spans->resize(kept);
  if (max_listed != 0 && spans->size() > max_listed) {
    // The stalls are what the reader asked about: the max_listed that rank
    // first (fabric-bound, longest), then the latest other spans fill the
    // rest; start order is kept.
    std::vector<const CorrelatedSpan*> stalls;
    for (const CorrelatedSpan& s : *spans) {
      if (s.correlation.stall) stalls.push_back(&s);
    }
    const size_t keep_stalls = std::min<size_t>(stalls.size(), max_listed);
    std::partial_sort(
        stalls.begin(), stalls.begin() + static_cast<ptrdiff_t>(keep_stalls), stalls.end(),
        [](const CorrelatedSpan* a, const CorrelatedSpan* b) { return StallBefore(*a, *b); });
    stalls.resize(keep_stalls);
    std::sort(stalls.begin(), stalls.end());  // by address: start order
    size_t keep_others = max_listed - keep_stalls;
    std::vector<bool> keep(spans->size(), false);
    for (const CorrelatedSpan* s : stalls) keep[static_cast<size_t>(s - spans->data())] = true;
    for (size_t i = spans->size(); i-- > 0 && keep_others > 0;) {
      if ((*spans)[i].correlation.stall) continue;
      keep[i] = true;
      --keep_others;
    }
    std::vector<CorrelatedSpan> kept;
    kept.reserve(max_listed);
    for (size_t i = 0; i < spans->size(); ++i) {
      if (keep[i]) kept.push_back(std::move((*spans)[i]));
    }
    sum.over_limit = spans->size() - kept.size();
    *spans = std::move(kept);
  }
  for (auto& [key, n] : blamed) {
    sum.blamed.push_back(
        {std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), n});
  }
  std::stable_sort(sum.blamed.begin(), sum.blamed.end(),
                   [](const BlamedSignal& a, const BlamedSignal& b) { return a.spans > b.spans; });
  if (sum.blamed.size() > CorrelateSummary::kMaxBlamed)
    sum.blamed.resize(CorrelateSummary::kMaxBlamed);
  for (auto& [key, g] : groups) sum.fabric_groups.push_back(std::move(g));
  std::stable_sort(sum.fabric_groups.begin(), sum.fabric_groups.end(),
                   [](const FabricGroup& a, const FabricGroup& b) {
                     if (a.spans != b.spans) return a.spans > b.spans;
                     return a.peak_score > b.peak_score;
                   });
  if (sum.fabric_groups.size() > CorrelateSummary::kMaxFabricGroups) {
    sum.fabric_groups_left_out = sum.fabric_groups.size() - CorrelateSummary::kMaxFabricGroups;
    sum.fabric_groups.resize(CorrelateSummary::kMaxFabricGroups);
  }
  return sum;
}

bool QueryEngine::Resolve(const QueryTimeRange& range, int64_t* from, int64_t* to) const {
  *to = range.to_unix_nano;
  *from = range.from_unix_nano;
  if (*to == 0) *to = clock_->RealtimeNs();
  if (*from == 0) *from = *to - 60'000'000'000;
  return *from <= *to;
}

SeriesSamples QueryEngine::Read(const SeriesSnapshot& s, int64_t from, int64_t to,
                                size_t max_samples) const {
  SeriesSamples out;
  out.key = s.key;
  out.signal = s.signal;
  out.state = s.state;
  for (const std::string& l : s.signal->family->labels) out.labels.emplace_back(l, LabelOf(s, l));
  out.samples = store_->ReadRange(s.id, from, to);
  if (out.samples.size() > max_samples) {  // keep the newest
    out.samples.erase(
        out.samples.begin(),
        out.samples.begin() + static_cast<ptrdiff_t>(out.samples.size() - max_samples));
    out.truncated = true;
  }
  return out;
}

SpanCorrelation QueryEngine::CorrelateSpan(const Span& span, bool include_all_series) const {
  SpanCorrelation c = correlator_->Correlate(span);
  if (!include_all_series) {  // the anomalous ones are a prefix
    c.series.erase(c.series.begin() + static_cast<ptrdiff_t>(c.Anomalous().size()), c.series.end());
  }
  return c;
}

absl::StatusOr<std::vector<CorrelatedSpan>> QueryEngine::Correlate(
    const CorrelateQuery& query, CorrelateSummary* summary) const {
  const uint32_t limit = query.limit == 0 ? kMaxSpans : std::min(query.limit, kMaxSpans);
  std::vector<SpanRef> spans;
  switch (query.selector) {
    case CorrelateQuery::Selector::kTraceId: {
      if (query.id.size() != 16) return absl::InvalidArgumentError("trace_id must be 16 bytes");
      TraceId id;
      std::copy(query.id.begin(), query.id.end(), id.begin());
      if (spans_ != nullptr) spans = spans_->FindByTraceId(id, limit);
      break;
    }
    case CorrelateQuery::Selector::kSpanId: {
      if (query.id.size() != 8) return absl::InvalidArgumentError("span_id must be 8 bytes");
      SpanId id;
      std::copy(query.id.begin(), query.id.end(), id.begin());
      if (spans_ != nullptr) spans = spans_->FindBySpanId(id);
      if (spans.size() > limit) spans.resize(limit);
      break;
    }
    case CorrelateQuery::Selector::kTimeRange: {
      const QueryTimeRange& r = query.time_range;
      if (r.to_unix_nano < r.from_unix_nano) return absl::InvalidArgumentError(kBackwards);
      if (spans_ != nullptr) {
        spans = spans_->FindOverlapping(r.from_unix_nano, r.to_unix_nano, query.name, limit);
      }
      break;
    }
    case CorrelateQuery::Selector::kNone:
      return absl::InvalidArgumentError("one of trace_id, span_id or time_range is required");
  }
  PodRef want_pod;
  std::shared_ptr<const PodTable> pods;
  if (!query.pod.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(query.pod, '/');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pod must be NAMESPACE/POD, got '", query.pod, "'"));
    }
    want_pod.ns = parts[0];
    want_pod.pod = parts[1];
    pods = ports_ != nullptr ? ports_->Pods() : std::make_shared<const PodTable>();
  }
  std::vector<CorrelatedSpan> out;
  out.reserve(spans.size());
  for (SpanRef& span : spans) {
    if (query.cancelled && query.cancelled()) {
      return absl::CancelledError(
          absl::StrCat("correlate cancelled after ", out.size(), " of ", spans.size(), " spans"));
    }
    if (pods != nullptr && !ResolveSpanPod(*span, *pods).pod.SamePod(want_pod)) continue;
    SpanCorrelation c = CorrelateSpan(*span, query.include_all_series);
    out.push_back({std::move(span), std::move(c), {}});
  }
  CorrelateSummary sum = SelectSpans(query.selection, query.max_listed, &out);
  if (summary != nullptr) *summary = std::move(sum);
  if (spans_ != nullptr) {
    for (CorrelatedSpan& c : out) c.steps = StepEvidence(*c.span);
  }
  return out;
}

std::vector<SpanRef> QueryEngine::StepEvidence(const Span& request) const {
  std::vector<SpanRef> steps;
  if (request.phase != "decode") return steps;
  const std::pair<int64_t, int64_t> w = JudgedWindow(request);
  for (SpanRef& s : spans_->FindOverlapping(w.first, w.second, {}, 4096)) {
    if (s->kind != SpanKind::kCollective || !s->judgement.stall) continue;
    if (s->start_unix_nano < w.first || s->end_unix_nano > w.second) continue;
    if (!request.gpu.empty() && !s->gpu.empty() && request.gpu != s->gpu) continue;
    steps.push_back(std::move(s));
  }
  std::sort(steps.begin(), steps.end(), [](const SpanRef& a, const SpanRef& b) {
    return a->end_unix_nano - a->start_unix_nano > b->end_unix_nano - b->start_unix_nano;
  });
  if (steps.size() > CorrelatedSpan::kMaxSteps) steps.resize(CorrelatedSpan::kMaxSteps);
  return steps;
}

absl::StatusOr<std::vector<SeriesSamples>> QueryEngine::Series(const SeriesQuery& query,
                                                               size_t* left_out) const {
  int64_t from = 0, to = 0;
  if (!Resolve(query.time_range, &from, &to)) return absl::InvalidArgumentError(kBackwards);
  const uint32_t max_series = query.max_series == 0 ? kDefaultMaxSeries : query.max_series;
  const uint32_t max_samples =
      query.max_samples_per_series == 0 ? kDefaultMaxSamples : query.max_samples_per_series;
  const std::string& want = query.signal;
  std::vector<SeriesSamples> out;
  size_t more = 0;
  for (const SeriesSnapshot& s : store_->Snapshot()) {
    if (!Complete(s)) continue;
    if (!NamesSeries(want, *s.signal, *s.key)) continue;
    const bool match =
        std::all_of(query.matchers.begin(), query.matchers.end(),
                    [&](const LabelMatcher& m) { return LabelOf(s, m.label) == m.value; });
    if (!match) continue;
    if (out.size() >= max_series) {
      ++more;  // counted, not read
      continue;
    }
    out.push_back(Read(s, from, to, max_samples));
  }
  if (left_out != nullptr) *left_out = more;
  return out;
}

bool QueryEngine::NamesSeries(absl::string_view want, const Signal& signal, const SeriesKey& key) {
  if (want.empty() || want == signal.name || want == key.name) return true;
  if (signal.family != nullptr && want == signal.family->name) return true;
  // A family name without its prefix or suffix: fabricscope_X_total, X_total,
  // fabricscope_X all name the signal X.
  absl::string_view bare = want;
  absl::ConsumePrefix(&bare, "fabricscope_");
  absl::ConsumeSuffix(&bare, "_total");
  return bare == signal.name;
}

std::vector<std::string> QueryEngine::SignalNames() const {
  std::vector<std::string> names;
  for (const SeriesSnapshot& s : store_->Snapshot()) {
    if (Complete(s)) names.push_back(s.signal->name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

absl::StatusOr<std::vector<DetectorEvent>> QueryEngine::Events(const EventsQuery& query,
                                                               size_t* left_out) const {
  int64_t from = 0, to = 0;
  if (!Resolve(query.time_range, &from, &to)) return absl::InvalidArgumentError(kBackwards);
  if (left_out != nullptr) *left_out = 0;
  std::vector<DetectorEvent> out;
  if (events_ == nullptr) return out;
  out = events_->List(from, to, query.detector);
  if (query.active_only) {
    out.erase(
        std::remove_if(out.begin(), out.end(), [](const DetectorEvent& e) { return !e.active(); }),
        out.end());
  }
  if (query.limit != 0 && out.size() > query.limit) {  // keep the latest
    const size_t more = out.size() - query.limit;
    out.erase(out.begin(), out.begin() + static_cast<ptrdiff_t>(more));
    if (left_out != nullptr) *left_out = more;
  }
  return out;
}

std::vector<PortInfo> QueryEngine::Ports() const {
  return ports_ != nullptr ? ports_->List() : std::vector<PortInfo>{};
}

HostTopology QueryEngine::Topology() const {
  return ports_ != nullptr ? ports_->Topology() : HostTopology{};
}

PodTable QueryEngine::Pods() const { return ports_ != nullptr ? *ports_->Pods() : PodTable{}; }

absl::Status QueryEngine::Record(const QueryTimeRange& range, RecordSink& sink) const {
  int64_t from = 0, to = 0;
  if (!Resolve(range, &from, &to)) return absl::InvalidArgumentError(kBackwards);
  if (absl::Status st = sink.OnStart(from, to); !st.ok()) return st;
  for (const SeriesSnapshot& s : store_->Snapshot()) {
    if (absl::Status st = sink.Check(); !st.ok()) return st;
    if (!Complete(s)) continue;
    SeriesSamples series = Read(s, from, to, SIZE_MAX);
    if (series.samples.empty()) continue;
    if (absl::Status st = sink.OnSeries(series); !st.ok()) return st;
  }
  if (spans_ == nullptr) return absl::OkStatus();
  const std::vector<SpanRef> spans = spans_->FindOverlapping(from, to, {}, SIZE_MAX);
  for (size_t i = 0; i < spans.size(); i += kRecordSpanBatch) {
    const size_t n = std::min(kRecordSpanBatch, spans.size() - i);
    if (absl::Status st = sink.OnSpans(absl::MakeConstSpan(spans).subspan(i, n)); !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace fabricscope
