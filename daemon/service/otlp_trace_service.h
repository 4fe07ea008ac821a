// OtlpTraceService: the gRPC adapter of OTLP's
// opentelemetry.proto.collector.trace.v1.TraceService/Export over
// SpanIngester, so unmodified OpenTelemetry SDKs and Collectors export to the
// daemon. Per-span rejections are reported the OTLP way: the call succeeds
// with partial_success{rejected_spans, error_message}; whole-request failures
// are INVALID_ARGUMENT (too many spans) and RESOURCE_EXHAUSTED (overload).
//
// Thread-safety: as IngestService.
#pragma once

#include "daemon/ingest/span_ingester.h"
#include "grpcpp/grpcpp.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"

namespace fabricscope {

class OtlpTraceService final
    : public opentelemetry::proto::collector::trace::v1::TraceService::WithRawCallbackMethod_Export<
          opentelemetry::proto::collector::trace::v1::TraceService::Service> {
 public:
  explicit OtlpTraceService(SpanIngester* ingester) : ingester_(ingester) {}

  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;

 private:
  SpanIngester* const ingester_;
};

}  // namespace fabricscope
