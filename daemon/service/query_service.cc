#include "daemon/service/query_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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

void FillSignal(const SeriesCorrelation& s, v1::SignalCorrelation* out) {
  out->set_signal(s.signal);
  out->set_signal_class(std::string(SignalClassName(s.signal_class)));
  out->set_device(s.device);
  out->set_port(s.port);
  out->set_netdev(s.netdev);
  out->set_priority(s.priority);
  out->set_direction(s.direction);
  out->set_counter(s.counter);
  out->set_source(s.source);
  out->set_raw_name(s.raw_name);
  out->set_delta(s.stats.delta);
  out->set_rate(s.stats.rate);
  out->set_baseline_rate(s.stats.baseline_rate);
  out->set_peak_rate(s.stats.peak_rate);
  out->set_pause_fraction(s.pause_fraction);
  out->set_score(s.score);
  out->set_anomalous(s.anomalous);
  out->set_coverage(s.stats.coverage);
  out->set_resets(s.stats.resets);
}

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

// One series with its samples in [from, to] (the newest max_samples).
void FillSeriesData(const Store& store, const SeriesSnapshot& s, int64_t from, int64_t to,
                    size_t max_samples, v1::SeriesData* d) {
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
  for (const std::string& l : s.signal->family->labels) labels[l] = LabelOf(s, l);
  std::vector<Sample> samples = store.ReadRange(s.id, from, to);
  size_t skip = 0;
  if (samples.size() > max_samples) {
    skip = samples.size() - max_samples;
    d->set_truncated(true);
  }
  for (size_t i = skip; i < samples.size(); ++i) {
    v1::SeriesSample* out = d->add_samples();
    out->set_ts_unix_nano(static_cast<uint64_t>(samples[i].ts_ns));
    out->set_raw(samples[i].value);
  }
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

// Parses "--since"-style ranges: to 0 is now, from 0 is a minute before.
bool ResolveRange(const v1::TimeRange& range, Clock* clock, int64_t* from, int64_t* to) {
  *to = static_cast<int64_t>(range.to_unix_nano());
  *from = static_cast<int64_t>(range.from_unix_nano());
  if (*to == 0) *to = clock->RealtimeNs();
  if (*from == 0) *from = *to - 60'000'000'000;
  return *from <= *to;
}

}  // namespace

void EventToProto(const DetectorEvent& e, v1::Event* out) {
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

void FillSpanVerdict(const Span& span, const SpanCorrelation& c, bool all_series,
                     v1::SpanVerdict* out) {
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
  for (const SeriesCorrelation& s : c.series) {
    if (!all_series && !s.anomalous) break;  // anomalous ones are a prefix
    FillSignal(s, out->add_signals());
  }
}

grpc::Status QueryService::Correlate(grpc::ServerContext*, const v1::CorrelateRequest* request,
                                     v1::CorrelateResponse* response) {
  const uint32_t limit =
      request->limit() == 0 ? kMaxSpans : std::min<uint32_t>(request->limit(), kMaxSpans);
  std::vector<SpanRef> spans;
  switch (request->selector_case()) {
    case v1::CorrelateRequest::kTraceId: {
      if (request->trace_id().size() != 16) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "trace_id must be 16 bytes");
      }
      TraceId id;
      std::copy(request->trace_id().begin(), request->trace_id().end(), id.begin());
      spans = spans_->FindByTraceId(id, limit);
      break;
    }
    case v1::CorrelateRequest::kSpanId: {
      if (request->span_id().size() != 8) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "span_id must be 8 bytes");
      }
      SpanId id;
      std::copy(request->span_id().begin(), request->span_id().end(), id.begin());
      spans = spans_->FindBySpanId(id);
      if (spans.size() > limit) spans.resize(limit);
      break;
    }
    case v1::CorrelateRequest::kTimeRange: {
      const auto& r = request->time_range();
      if (r.to_unix_nano() < r.from_unix_nano()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "time_range: to_unix_nano is before from_unix_nano");
      }
      spans =
          spans_->FindOverlapping(static_cast<int64_t>(r.from_unix_nano()),
                                  static_cast<int64_t>(r.to_unix_nano()), request->name(), limit);
      break;
    }
    case v1::CorrelateRequest::SELECTOR_NOT_SET:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "one of trace_id, span_id or time_range is required");
  }
  for (const SpanRef& span : spans) {
    const SpanCorrelation c = correlator_->Correlate(*span);
    FillSpanVerdict(*span, c, request->include_all_series(), response->add_spans());
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Series(grpc::ServerContext*, const v1::SeriesRequest* request,
                                  v1::SeriesResponse* response) {
  int64_t to = static_cast<int64_t>(request->time_range().to_unix_nano());
  int64_t from = static_cast<int64_t>(request->time_range().from_unix_nano());
  if (to == 0) to = clock_->RealtimeNs();
  if (from == 0) from = to - 60'000'000'000;
  if (to < from) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "time_range: to_unix_nano is before from_unix_nano");
  }
  const uint32_t max_series =
      request->max_series() == 0 ? kDefaultMaxSeries : request->max_series();
  const uint32_t max_samples = request->max_samples_per_series() == 0
                                   ? kDefaultMaxSamples
                                   : request->max_samples_per_series();
  const std::string& want = request->signal();
  for (const SeriesSnapshot& s : store_->Snapshot()) {
    if (s.key == nullptr || s.signal == nullptr || s.signal->family == nullptr) continue;
    if (!want.empty() && want != s.signal->name && want != s.signal->family->name &&
        want != s.key->name) {
      continue;
    }
    bool match = true;
    for (const v1::LabelMatcher& m : request->matchers()) {
      if (LabelOf(s, m.label()) != m.value()) {
        match = false;
        break;
      }
    }
    if (!match) continue;
    if (static_cast<uint32_t>(response->series_size()) >= max_series) break;
    FillSeriesData(*store_, s, from, to, max_samples, response->add_series());
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Events(grpc::ServerContext*, const v1::EventsRequest* request,
                                  v1::EventsResponse* response) {
  int64_t from = 0, to = 0;
  if (!ResolveRange(request->time_range(), clock_, &from, &to)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "time_range: to_unix_nano is before from_unix_nano");
  }
  if (events_ == nullptr) return grpc::Status::OK;
  for (const DetectorEvent& e : events_->List(from, to, request->detector())) {
    if (request->active_only() && !e.active()) continue;
    EventToProto(e, response->add_events());
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Record(grpc::ServerContext* context, const v1::RecordRequest* request,
                                  grpc::ServerWriter<v1::RecordChunk>* writer) {
  int64_t from = 0, to = 0;
  if (!ResolveRange(request->time_range(), clock_, &from, &to)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "time_range: to_unix_nano is before from_unix_nano");
  }
  for (const SeriesSnapshot& s : store_->Snapshot()) {
    if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    if (s.key == nullptr || s.signal == nullptr || s.signal->family == nullptr) continue;
    v1::RecordChunk chunk;
    FillSeriesData(*store_, s, from, to, SIZE_MAX, chunk.add_series());
    if (chunk.series(0).samples_size() == 0) continue;
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
  }
  std::vector<SpanRef> spans = spans_->FindOverlapping(from, to, {}, SIZE_MAX);
  for (size_t i = 0; i < spans.size(); i += 1000) {
    v1::RecordChunk chunk;
    for (size_t j = i; j < std::min(spans.size(), i + 1000); ++j) {
      SpanToProto(*spans[j], chunk.add_spans());
    }
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Ports(grpc::ServerContext*, const v1::PortsRequest*,
                                 v1::PortsResponse* response) {
  for (const PortInfo& p : store_->Ports()) {
    v1::Port* out = response->add_ports();
    out->set_device(p.device);
    out->set_port(p.port);
    out->set_netdev(p.netdev);
    out->set_link_layer(p.link_layer);
    out->set_state(p.state);
    out->set_rate(p.rate);
    out->set_present(p.present);
  }
  return grpc::Status::OK;
}

}  // namespace fabricscope
