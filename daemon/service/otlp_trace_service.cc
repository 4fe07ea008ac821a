#include "daemon/service/otlp_trace_service.h"

#include "daemon/service/grpc_status.h"

namespace fabricscope {

grpc::Status OtlpTraceService::Export(
    grpc::ServerContext* context,
    const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest* request,
    opentelemetry::proto::collector::trace::v1::ExportTraceServiceResponse* response) {
  auto result = ingester_->ExportOtlp(*request);
  if (!result.ok()) return ToGrpcStatus(result.status());
  // A full success leaves partial_success unset (some SDKs warn on an empty one).
  if (result->rejected > 0) {
    auto* partial = response->mutable_partial_success();
    partial->set_rejected_spans(static_cast<int64_t>(result->rejected));
    partial->set_error_message(result->Summary());
  }
  return grpc::Status::OK;
}

}  // namespace fabricscope
