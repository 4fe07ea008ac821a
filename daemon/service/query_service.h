// QueryService: the gRPC adapter of fabricscope.v1.Query
// (proto/fabricscope/v1/query.proto) over plain classes that know nothing
// about gRPC: the span store (which spans), the correlator (their verdicts),
// and the sample store (raw series, port inventory). It only selects,
// translates and bounds; the rules live in daemon/correlate/correlator.h.
//
// Events come from the detectors' event ring (daemon/detect/event_log.h).
//
// Thread-safety: gRPC calls the methods concurrently; every borrowed object is
// thread-safe and must outlive the service.
#pragma once

#include "core/clock.h"
#include "daemon/correlate/correlator.h"
#include "daemon/detect/event_log.h"
#include "daemon/spans/span_store.h"
#include "store/store.h"
#include "fabricscope/v1/query.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fabricscope {

// Fills a SpanVerdict from a span and its correlation. With `all_series`
// every in-scope series is listed, else only the anomalous ones.
void FillSpanVerdict(const Span& span, const SpanCorrelation& correlation, bool all_series,
                     v1::SpanVerdict* out);

// The wire form of a detector event.
void EventToProto(const DetectorEvent& e, v1::Event* out);

// The wire form of a held span (ids, name, kind, times, attributes).
void SpanToProto(const Span& span, v1::Span* out);

class QueryService final : public v1::Query::Service {
 public:
  static constexpr uint32_t kMaxSpans = 10000;
  static constexpr uint32_t kDefaultMaxSeries = 1000;
  static constexpr uint32_t kDefaultMaxSamples = 100000;

  // `events` may be null (no detectors: Events returns an empty list).
  QueryService(const SpanStore* spans, const Correlator* correlator, const Store* store,
               const EventLog* events, Clock* clock)
      : spans_(spans), correlator_(correlator), store_(store), events_(events), clock_(clock) {}

  grpc::Status Correlate(grpc::ServerContext* context, const v1::CorrelateRequest* request,
                         v1::CorrelateResponse* response) override;
  grpc::Status Series(grpc::ServerContext* context, const v1::SeriesRequest* request,
                      v1::SeriesResponse* response) override;
  grpc::Status Events(grpc::ServerContext* context, const v1::EventsRequest* request,
                      v1::EventsResponse* response) override;
  grpc::Status Ports(grpc::ServerContext* context, const v1::PortsRequest* request,
                     v1::PortsResponse* response) override;
  grpc::Status Record(grpc::ServerContext* context, const v1::RecordRequest* request,
                      grpc::ServerWriter<v1::RecordChunk>* writer) override;

 private:
  const SpanStore* const spans_;
  const Correlator* const correlator_;
  const Store* const store_;
  const EventLog* const events_;
  Clock* const clock_;
};

}  // namespace fabricscope
