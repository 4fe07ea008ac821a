#include "daemon/service/otlp_trace_service.h"

#include "daemon/service/raw_codec.h"

namespace fabricscope {

namespace otlp_collector = opentelemetry::proto::collector::trace::v1;

grpc::ServerUnaryReactor* OtlpTraceService::Export(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  return ServeIngestCall<otlp_collector::ExportTraceServiceRequest,
                         otlp_collector::ExportTraceServiceResponse>(
      context, *request, response, IngestProtocol::kOtlp, ingester_,
      [this](const otlp_collector::ExportTraceServiceRequest& r) {
        return ingester_->ExportOtlp(r);
      },
      [](const IngestResult& result, otlp_collector::ExportTraceServiceResponse* answer) {
        // A full success leaves partial_success unset (some SDKs warn on an
        // empty one).
        if (result.rejected == 0) return;
        auto* partial = answer->mutable_partial_success();
        partial->set_rejected_spans(static_cast<int64_t>(result.rejected));
        partial->set_error_message(result.Summary());
      });
}

}  // namespace fabricscope
