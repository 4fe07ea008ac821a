#include "daemon/service/query_proto.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/correlate/signal_class.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/spans/span_kind.h"

namespace fabricscope {
namespace {

v1::Verdict ToProto(Verdict v) {
  switch (v) {
    case Verdict::kFabric:
      return v1::VERDICT_FABRIC;
    case Verdict::kClean:
      return v1::VERDICT_CLEAN;
    case Verdict::kUnknown:
      return v1::VERDICT_UNKNOWN;
  }
  return v1::VERDICT_UNSPECIFIED;
}

v1::SpanKind SpanKindToProto(SpanKind k) {
  switch (k) {
    case SpanKind::kRequest:
      return v1::SPAN_KIND_REQUEST;
    case SpanKind::kPrefill:
      return v1::SPAN_KIND_PREFILL;
    case SpanKind::kDecodeStep:
      return v1::SPAN_KIND_DECODE_STEP;
    case SpanKind::kKvTransfer:
      return v1::SPAN_KIND_KV_TRANSFER;
    case SpanKind::kCollective:
      return v1::SPAN_KIND_COLLECTIVE;
    case SpanKind::kOther:
      return v1::SPAN_KIND_OTHER;
    case SpanKind::kUnspecified:
      break;
  }
  return v1::SPAN_KIND_UNSPECIFIED;
}

// Sets out's partner from `topology` when it knows the port's.
template <typename Message>
void FillPartner(const HostTopology* topology, absl::string_view device, uint32_t port,
                 absl::string_view netdev, Message* out) {
  if (topology == nullptr) return;
  if (const LinkPartner* p = topology->FindPartner(device, port, netdev); p != nullptr) {
    LinkPartnerToProto(*p, out->mutable_partner());
  }
}

void FillSignal(const SeriesCorrelation& s, v1::SignalCorrelation* out) {
  out->set_signal(std::string(s.signal));
  out->set_signal_class(std::string(SignalClassName(s.signal_class)));
  out->set_device(std::string(s.device));
  out->set_port(s.port);
  out->set_netdev(std::string(s.netdev));
  out->set_priority(std::string(s.priority));
  out->set_direction(std::string(s.direction));
  out->set_counter(std::string(s.counter));
  out->set_source(std::string(s.source));
  out->set_raw_name(std::string(s.raw_name));
  out->set_delta(s.stats.delta);
  out->set_rate(s.stats.rate);
  out->set_baseline_rate(s.stats.baseline_rate);
  out->set_peak_rate(s.stats.peak_rate);
  out->set_pause_fraction(s.pause_fraction);
  out->set_score(s.score);
  out->set_anomalous(s.anomalous);
  out->set_coverage(s.stats.coverage);
  out->set_resets(s.stats.resets);
  out->set_blind(s.blind);
  out->set_superseded_by(s.superseded_by);
}

}  // namespace

QueryTimeRange TimeRangeFromProto(const v1::TimeRange& range) {
  return {static_cast<int64_t>(range.from_unix_nano()), static_cast<int64_t>(range.to_unix_nano())};
}

CorrelateQuery CorrelateQueryFromProto(const v1::CorrelateRequest& request) {
  CorrelateQuery q;
  switch (request.selector_case()) {
    case v1::CorrelateRequest::kTraceId:
      q.selector = CorrelateQuery::Selector::kTraceId;
      q.id = request.trace_id();
      break;
    case v1::CorrelateRequest::kSpanId:
      q.selector = CorrelateQuery::Selector::kSpanId;
      q.id = request.span_id();
      break;
    case v1::CorrelateRequest::kTimeRange:
      q.selector = CorrelateQuery::Selector::kTimeRange;
      q.time_range = TimeRangeFromProto(request.time_range());
      break;
    case v1::CorrelateRequest::SELECTOR_NOT_SET:
      break;
  }
  q.name = request.name();
  q.pod = request.pod();
  q.limit = request.limit();
  q.include_all_series = request.include_all_series();
  if (request.has_selection()) {
    q.selection.all = false;
    q.selection.stalls = request.selection().stalls();
    for (const int v : request.selection().verdicts()) {
      if (v == v1::VERDICT_FABRIC) q.selection.fabric = true;
      if (v == v1::VERDICT_CLEAN) q.selection.clean = true;
      if (v == v1::VERDICT_UNKNOWN) q.selection.unknown = true;
    }
  }
  q.max_listed = request.max_listed();
  return q;
}

void CorrelateSummaryToProto(const CorrelateSummary& s, v1::CorrelateSummary* out,
                             const HostTopology* topology) {
  auto n = [](size_t x) { return static_cast<uint32_t>(std::min<size_t>(x, UINT32_MAX)); };
  const auto at = [](const size_t(&a)[3], Verdict v) { return a[static_cast<size_t>(v)]; };
  out->set_spans(n(s.spans));
  out->set_fabric(n(at(s.by_verdict, Verdict::kFabric)));
  out->set_clean(n(at(s.by_verdict, Verdict::kClean)));
  out->set_unknown(n(at(s.by_verdict, Verdict::kUnknown)));
  out->set_stalls(n(s.stalls));
  out->set_stalls_fabric(n(at(s.stalls_by_verdict, Verdict::kFabric)));
  out->set_stalls_clean(n(at(s.stalls_by_verdict, Verdict::kClean)));
  out->set_stalls_unknown(n(at(s.stalls_by_verdict, Verdict::kUnknown)));
  for (const BlamedSignal& b : s.blamed) {
    v1::BlamedSignal* o = out->add_blamed();
    o->set_signal(b.signal);
    o->set_counter(b.counter);
    o->set_direction(b.direction);
    o->set_priority(b.priority);
    o->set_spans(n(b.spans));
  }
  out->set_not_selected(n(s.not_selected));
  out->set_over_limit(n(s.over_limit));
  for (const FabricGroup& g : s.fabric_groups) {
    v1::FabricGroup* o = out->add_fabric_groups();
    o->set_signal(g.signal);
    o->set_counter(g.counter);
    o->set_device(g.device);
    o->set_port(g.port);
    o->set_netdev(g.netdev);
    o->set_priority(g.priority);
    o->set_direction(g.direction);
    o->set_signal_class(std::string(SignalClassName(g.signal_class)));
    o->set_spans(n(g.spans));
    o->set_first_start_unix_nano(static_cast<uint64_t>(g.first_start_unix_nano));
    o->set_last_end_unix_nano(static_cast<uint64_t>(g.last_end_unix_nano));
    o->set_peak(g.peak);
    o->set_peak_score(g.peak_score);
    FillPartner(topology, g.device, g.port, g.netdev, o);
  }
  out->set_fabric_groups_left_out(n(s.fabric_groups_left_out));
}

SeriesQuery SeriesQueryFromProto(const v1::SeriesRequest& request) {
  SeriesQuery q;
  q.signal = request.signal();
  for (const v1::LabelMatcher& m : request.matchers()) q.matchers.push_back({m.label(), m.value()});
  q.time_range = TimeRangeFromProto(request.time_range());
  q.max_series = request.max_series();
  q.max_samples_per_series = request.max_samples_per_series();
  return q;
}

EventsQuery EventsQueryFromProto(const v1::EventsRequest& request) {
  EventsQuery q;
  q.time_range = TimeRangeFromProto(request.time_range());
  q.detector = request.detector();
  q.active_only = request.active_only();
  q.limit = request.limit();
  return q;
}

void LinkPartnerToProto(const LinkPartner& partner, v1::LinkPartner* out) {
  out->set_system_name(partner.system_name);
  out->set_port_id(partner.port_id);
  out->set_chassis_id(partner.chassis_id);
  out->set_port_description(partner.port_description);
  out->set_source(partner.source);
}

namespace {

void StallCheckToProto(const StallJudgement& j, v1::StallCheck* check) {
  check->set_source(std::string(StallSourceName(j.source)));
  check->set_cost_kind(std::string(StallCostName(j.cost_kind)));
  check->set_cost_seconds(j.cost * 1e-9);
  check->set_bound_seconds(j.bound * 1e-9);
  check->set_median_seconds(j.median * 1e-9);
  check->set_p99_seconds(j.p99 * 1e-9);
  check->set_samples(j.samples);
  check->set_key(j.key);
}

}  // namespace

void StepsToProto(const std::vector<SpanRef>& steps, v1::SpanVerdict* out) {
  for (const SpanRef& s : steps) {
    v1::StepEvidence* e = out->add_steps();
    e->set_trace_id(std::string(s->trace_id.begin(), s->trace_id.end()));
    e->set_span_id(std::string(s->span_id.begin(), s->span_id.end()));
    e->set_name(s->name);
    e->set_start_unix_nano(static_cast<uint64_t>(s->start_unix_nano));
    e->set_end_unix_nano(static_cast<uint64_t>(s->end_unix_nano));
    e->set_gpu(s->gpu);
    if (s->judgement.judged) StallCheckToProto(s->judgement, e->mutable_stall_check());
  }
}

void FillSpanVerdict(const Span& span, const SpanCorrelation& c, v1::SpanVerdict* out,
                     const HostTopology* topology) {
  out->set_trace_id(std::string(span.trace_id.begin(), span.trace_id.end()));
  out->set_span_id(std::string(span.span_id.begin(), span.span_id.end()));
  out->set_name(span.name);
  out->set_start_unix_nano(static_cast<uint64_t>(span.start_unix_nano));
  out->set_end_unix_nano(static_cast<uint64_t>(span.end_unix_nano));
  out->set_stall(c.stall);
  out->set_verdict(ToProto(c.verdict));
  out->set_reason(c.reason);
  out->set_rdma_device(span.rdma_device);
  out->set_rdma_port(span.rdma_port);
  out->set_network_interface_name(span.netdev);
  out->set_congestion_series(static_cast<uint32_t>(c.congestion_series));
  out->set_covered_series(static_cast<uint32_t>(c.covered_series));
  out->set_gpu(span.gpu);
  out->set_scope(c.scope);
  if (c.pod.named() || !c.pod.uid.empty()) {
    v1::PodRef* pod = out->mutable_pod();
    pod->set_namespace_(c.pod.ns);
    pod->set_name(c.pod.pod);
    pod->set_container(c.pod.container);
    pod->set_uid(c.pod.uid);
    pod->set_via(c.pod_via);
  }
  out->set_kind(std::string(SpanKindName(span.kind)));
  if (const std::pair<int64_t, int64_t> w = JudgedWindow(span);
      w.first != span.start_unix_nano || w.second != span.end_unix_nano) {
    out->set_window_start_unix_nano(static_cast<uint64_t>(w.first));
    out->set_window_end_unix_nano(static_cast<uint64_t>(w.second));
  }
  out->set_phase(span.phase);
  for (const auto& [k, v] : span.attributes) {
    if (k == "service.name" && out->service().empty()) out->set_service(v);
    if ((k == "gen_ai.response.model" || (k == "gen_ai.request.model" && out->model().empty()))) {
      out->set_model(v);
    }
  }
  if (span.judgement.judged) StallCheckToProto(span.judgement, out->mutable_stall_check());
  for (const BlindSeries& b : c.blind) {
    v1::BlindSeries* blind = out->add_blind();
    blind->set_signal(b.signal);
    blind->set_counter(b.counter);
    blind->set_device(b.device);
    blind->set_port(b.port);
    blind->set_netdev(b.netdev);
    blind->set_priority(b.priority);
    blind->set_direction(b.direction);
    blind->set_why(b.why);
    blind->set_source(b.source);
    blind->set_raw_name(b.raw_name);
  }
  for (const SeriesCorrelation& s : c.series) {
    v1::SignalCorrelation* signal = out->add_signals();
    FillSignal(s, signal);
    FillPartner(topology, s.device, s.port, s.netdev, signal);
  }
}

void SeriesToProto(const SeriesSamples& s, v1::SeriesData* d) {
  d->set_signal(s.signal->name);
  d->set_family(s.signal->family->name);
  d->set_source(s.key->source);
  d->set_raw_name(s.key->name);
  d->set_device(s.key->device);
  d->set_port(s.key->port);
  d->set_netdev(s.key->netdev);
  d->set_scale(s.signal->scale);
  d->set_last_rate(s.state.last_rate);
  d->set_rate_valid(s.state.rate_valid);
  auto& labels = *d->mutable_labels();
  for (const auto& [label, value] : s.labels) labels[label] = value;
  if (s.truncated) d->set_truncated(true);
  for (const Sample& sample : s.samples) {
    v1::SeriesSample* out = d->add_samples();
    out->set_ts_unix_nano(static_cast<uint64_t>(sample.ts_ns));
    out->set_raw(sample.value);
  }
}

void EventToProto(const DetectorEvent& e, v1::Event* out, const HostTopology* topology) {
  out->set_id(e.id);
  out->set_detector(e.detector);
  out->set_kind(e.kind);
  out->set_device(e.device);
  out->set_port(e.port);
  out->set_netdev(e.netdev);
  out->set_priority(e.priority);
  out->set_direction(e.direction);
  out->set_start_unix_nano(static_cast<uint64_t>(e.start_unix_nano));
  out->set_end_unix_nano(static_cast<uint64_t>(e.end_unix_nano));
  out->set_detected_unix_nano(static_cast<uint64_t>(e.detected_unix_nano));
  out->set_active(e.active());
  out->set_peak(e.peak);
  out->set_summary(e.summary);
  for (const std::string& s : e.signals) out->add_signals(s);
  FillPartner(topology, e.device, e.port, e.netdev, out);
}

void PortToProto(const PortInfo& p, v1::Port* out, const HostTopology* topology) {
  out->set_device(p.device);
  out->set_port(p.port);
  out->set_netdev(p.netdev);
  out->set_link_layer(p.link_layer);
  out->set_state(p.state);
  out->set_rate(p.rate);
  out->set_present(p.present);
  FillPartner(topology, p.device, p.port, p.netdev, out);
}

void SpanToProto(const Span& span, v1::Span* out) {
  out->set_trace_id(std::string(span.trace_id.begin(), span.trace_id.end()));
  out->set_span_id(std::string(span.span_id.begin(), span.span_id.end()));
  if (span.parent_span_id != SpanId{}) {
    out->set_parent_span_id(std::string(span.parent_span_id.begin(), span.parent_span_id.end()));
  }
  out->set_name(span.name);
  out->set_kind(SpanKindToProto(span.kind));
  out->set_start_unix_nano(static_cast<uint64_t>(span.start_unix_nano));
  out->set_end_unix_nano(static_cast<uint64_t>(span.end_unix_nano));
  for (const auto& [k, v] : span.attributes) {
    v1::Attribute* a = out->add_attributes();
    a->set_key(k);
    a->set_value(v);
  }
}

}  // namespace fabricscope
