// QueryService: the gRPC adapter of fabricscope.v1.Query
// (proto/fabricscope/v1/query.proto) over plain classes that know nothing
// about gRPC: the span store (which spans), the correlator (their verdicts),
// and the sample store (raw series, port inventory). It only selects,
// translates and bounds; the rules live in daemon/correlate/correlator.h.
//
// Events is served with an empty list: the detectors are a later issue.
//
// Thread-safety: gRPC calls the methods concurrently; every borrowed object is
// thread-safe and must outlive the service.
#pragma once

#include "daemon/clock.h"
#include "daemon/correlate/correlator.h"
#include "daemon/spans/span_store.h"
#include "daemon/store/store.h"
#include "fabricscope/v1/query.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fabricscope {

// Fills a SpanVerdict from a span and its correlation. With `all_series`
// every in-scope series is listed, else only the anomalous ones.
void FillSpanVerdict(const Span& span, const SpanCorrelation& correlation, bool all_series,
                     v1::SpanVerdict* out);

class QueryService final : public v1::Query::Service {
 public:
  static constexpr uint32_t kMaxSpans = 10000;
  static constexpr uint32_t kDefaultMaxSeries = 1000;
  static constexpr uint32_t kDefaultMaxSamples = 100000;

  QueryService(const SpanStore* spans, const Correlator* correlator, const Store* store,
               Clock* clock)
      : spans_(spans), correlator_(correlator), store_(store), clock_(clock) {}

  grpc::Status Correlate(grpc::ServerContext* context, const v1::CorrelateRequest* request,
                         v1::CorrelateResponse* response) override;
  grpc::Status Series(grpc::ServerContext* context, const v1::SeriesRequest* request,
                      v1::SeriesResponse* response) override;
  grpc::Status Events(grpc::ServerContext* context, const v1::EventsRequest* request,
                      v1::EventsResponse* response) override;
  grpc::Status Ports(grpc::ServerContext* context, const v1::PortsRequest* request,
                     v1::PortsResponse* response) override;

 private:
  const SpanStore* const spans_;
  const Correlator* const correlator_;
  const Store* const store_;
  Clock* const clock_;
};

}  // namespace fabricscope
