#include "daemon/service/query_service.h"

#include <algorithm>
#include <cstdint>

#include "daemon/recording/recording.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/query_proto.h"

namespace fabricscope {
namespace {

// Record's chunks, written as the engine walks.
class RecordWriter final : public RecordSink {
 public:
  RecordWriter(grpc::ServerContext* context, grpc::ServerWriter<v1::RecordChunk>* writer,
               const QueryEngine* engine, const QueryService::HeaderFiller* fill_header)
      : context_(context), writer_(writer), engine_(engine), fill_header_(fill_header) {}

  absl::Status OnStart(int64_t from, int64_t to) override {
    RecordingHeader header;
    if (*fill_header_) (*fill_header_)(&header);
    header.from_unix_nano = from;
    header.to_unix_nano = to;
    header.ports = engine_->Ports();
    header.topology = engine_->Topology();
    header.pods = engine_->Pods();
    v1::RecordChunk chunk;
    chunk.set_header_line(FormatRecordingHeaderLine(header));
    return Write(chunk);
  }

  absl::Status Check() override {
    if (context_->IsCancelled()) return absl::CancelledError("cancelled");
    return absl::OkStatus();
  }
  absl::Status OnSeries(const SeriesSamples& series) override {
    v1::RecordChunk chunk;
    SeriesToProto(series, chunk.add_series());
    return Write(chunk);
  }
  absl::Status OnSpans(absl::Span<const SpanRef> spans) override {
    v1::RecordChunk chunk;
    for (const SpanRef& span : spans) {
      v1::Span proto;
      SpanToProto(*span, &proto);
      v1::RecordedSpanLine* line = chunk.add_span_lines();
      line->set_end_unix_nano(static_cast<uint64_t>(span->end_unix_nano));
      line->set_line(FormatSpanLine(proto, &span->judgement));
    }
    return Write(chunk);
  }

 private:
  absl::Status Write(const v1::RecordChunk& chunk) {
    if (!writer_->Write(chunk)) return absl::CancelledError("client gone");
    return absl::OkStatus();
  }

  grpc::ServerContext* const context_;
  grpc::ServerWriter<v1::RecordChunk>* const writer_;
  const QueryEngine* const engine_;
  const QueryService::HeaderFiller* const fill_header_;
};

}  // namespace

grpc::Status QueryService::Correlate(grpc::ServerContext* context,
                                     const v1::CorrelateRequest* request,
                                     v1::CorrelateResponse* response) {
  CorrelateSummary summary;
  CorrelateQuery query = CorrelateQueryFromProto(*request);
  // The daemon's stop cancels calls still running after its grace (200 ms):
  // a long correlation must end then, not hold SIGTERM past its bound.
  if (context != nullptr) query.cancelled = [context] { return context->IsCancelled(); };
  auto spans = engine_->Correlate(query, &summary);
  if (!spans.ok()) return ToGrpcStatus(spans.status());
  const HostTopology topology = engine_->Topology();
  CorrelateSummaryToProto(summary, response->mutable_summary(), &topology);
  for (const CorrelatedSpan& s : *spans) {
    v1::SpanVerdict* verdict = response->add_spans();
    FillSpanVerdict(*s.span, s.correlation, verdict, &topology);
    StepsToProto(s.steps, verdict);
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Series(grpc::ServerContext*, const v1::SeriesRequest* request,
                                  v1::SeriesResponse* response) {
  size_t left_out = 0;
  auto series = engine_->Series(SeriesQueryFromProto(*request), &left_out);
  if (!series.ok()) return ToGrpcStatus(series.status());
  response->set_series_left_out(static_cast<uint32_t>(std::min<size_t>(left_out, UINT32_MAX)));
  for (const SeriesSamples& s : *series) SeriesToProto(s, response->add_series());
  if (series->empty() && left_out == 0 && !request->signal().empty()) {
    // Did the signal name anything at all? Without a label matcher nothing
    // matched it: say which names there are.
    SeriesQuery any = SeriesQueryFromProto(*request);
    any.matchers.clear();
    any.max_series = 1;
    auto named = engine_->Series(any);
    if (named.ok() && named->empty()) {
      for (std::string& name : engine_->SignalNames()) {
        response->add_known_signals(std::move(name));
      }
    }
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Events(grpc::ServerContext*, const v1::EventsRequest* request,
                                  v1::EventsResponse* response) {
  size_t left_out = 0;
  auto events = engine_->Events(EventsQueryFromProto(*request), &left_out);
  if (!events.ok()) return ToGrpcStatus(events.status());
  response->set_left_out(static_cast<uint32_t>(std::min<size_t>(left_out, UINT32_MAX)));
  const HostTopology topology = engine_->Topology();
  for (const DetectorEvent& e : *events) EventToProto(e, response->add_events(), &topology);
  return grpc::Status::OK;
}

grpc::Status QueryService::Ports(grpc::ServerContext*, const v1::PortsRequest*,
                                 v1::PortsResponse* response) {
  const HostTopology topology = engine_->Topology();
  for (const PortInfo& p : engine_->Ports()) PortToProto(p, response->add_ports(), &topology);
  return grpc::Status::OK;
}

grpc::Status QueryService::Record(grpc::ServerContext* context, const v1::RecordRequest* request,
                                  grpc::ServerWriter<v1::RecordChunk>* writer) {
  RecordWriter sink(context, writer, engine_, &fill_header_);
  return ToGrpcStatus(engine_->Record(TimeRangeFromProto(request->time_range()), sink));
}

}  // namespace fabricscope
