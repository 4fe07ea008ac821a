#include "daemon/service/raw_codec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/ingest/wire_decode.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace fabricscope {

grpc::Status DecodeIngestRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* message,
                                 IngestProtocol protocol, SpanIngester* ingester) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; the reader needs a mutable buffer
  {
    grpc::ProtoBufferReader reader(&copy);
    if (reader.status().ok() && message->ParseFromZeroCopyStream(&reader)) {
      return grpc::Status::OK;
    }
  }
  std::vector<grpc::Slice> slices;
  std::string flat;
  if (bytes.Dump(&slices).ok()) {
    flat.reserve(bytes.Length());
    for (const grpc::Slice& s : slices) {
      flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  message->Clear();
  DecodeOutcome outcome = DecodeRepairingUtf8(flat, message);
  if (!outcome.ok) {
    ingester->CountMalformed(protocol, outcome.error);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("request is not a valid ",
                                     message->GetDescriptor()->full_name(), ": ", outcome.error));
  }
  if (outcome.repaired_strings > 0) {
    ingester->CountRepaired(protocol, outcome.repaired_strings, outcome.first_repaired_field);
  }
  return grpc::Status::OK;
}

void EncodeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  *out = grpc::ByteBuffer(&slice, 1);
}

}  // namespace fabricscope
