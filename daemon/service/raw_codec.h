// The ingest methods' own message decoding. gRPC's generated handlers parse a
// request strictly before the method runs, and answer INTERNAL to bytes that
// do not parse -- one string that is not UTF-8 among ten thousand spans, or
// no protobuf at all -- counted nowhere. The ingest methods (OTLP Export,
// native Push) are therefore registered as raw callback methods: they get
// the request's bytes and decode them here (daemon/ingest/wire_decode.h:
// strings repaired, the rest refused with INVALID_ARGUMENT and counted).
//
// Thread-safety: pure functions over their arguments; the ingester is
// thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "daemon/ingest/span_ingester.h"
#include "daemon/service/grpc_status.h"
#include "google/protobuf/message.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace fabricscope {

// Decodes `bytes` into `*message`: a strict parse straight from the buffer's
// slices; when that fails, DecodeRepairingUtf8 over a copy. Repaired
// strings and malformed requests are counted by `ingester` for `protocol`.
// Not OK: INVALID_ARGUMENT naming the request type and the error.
grpc::Status DecodeIngestRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* message,
                                 IngestProtocol protocol, SpanIngester* ingester);

// Serializes a response message into `*out`.
void EncodeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out);

// One unary ingest call over raw bytes: decodes the Request
// (DecodeIngestRequest), runs `ingest` (const Request& ->
// absl::StatusOr<IngestResult>), fills a Response with `fill` (const
// IngestResult&, Response*), encodes it and finishes the call.
template <class Request, class Response, class Ingest, class Fill>
grpc::ServerUnaryReactor* ServeIngestCall(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer& request,
                                          grpc::ByteBuffer* response, IngestProtocol protocol,
                                          SpanIngester* ingester, Ingest ingest, Fill fill) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  Request message;
  grpc::Status status = DecodeIngestRequest(request, &message, protocol, ingester);
  if (status.ok()) {
    absl::StatusOr<IngestResult> result = ingest(message);
    if (result.ok()) {
      Response answer;
      fill(*result, &answer);
      EncodeResponse(answer, response);
    } else {
      status = ToGrpcStatus(result.status());
    }
  }
  reactor->Finish(status);
  return reactor;
}

}  // namespace fabricscope
