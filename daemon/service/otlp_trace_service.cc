#include "daemon/service/otlp_trace_service.h"

#include "daemon/service/grpc_status.h"
#include "daemon/service/raw_codec.h"

namespace fabricscope {

namespace otlp_collector = opentelemetry::proto::collector::trace::v1;

grpc::ServerUnaryReactor* OtlpTraceService::Export(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  otlp_collector::ExportTraceServiceRequest message;
  grpc::Status decoded =
      DecodeIngestRequest(*request, &message, IngestProtocol::kOtlp, ingester_);
  if (!decoded.ok()) {
    reactor->Finish(decoded);
    return reactor;
  }
  auto result = ingester_->ExportOtlp(message);
  if (!result.ok()) {
    reactor->Finish(ToGrpcStatus(result.status()));
    return reactor;
  }
  otlp_collector::ExportTraceServiceResponse answer;
  // A full success leaves partial_success unset (some SDKs warn on an empty one).
  if (result->rejected > 0) {
    auto* partial = answer.mutable_partial_success();
    partial->set_rejected_spans(static_cast<int64_t>(result->rejected));
    partial->set_error_message(result->Summary());
  }
  EncodeResponse(answer, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace fabricscope
