#include "daemon/service/ingest_service.h"

#include "absl/strings/str_cat.h"

namespace fabricscope {

static_assert(static_cast<int>(RejectReason::kInvalidIds) == v1::REJECTION_REASON_INVALID_IDS);
static_assert(static_cast<int>(RejectReason::kEndBeforeStart) ==
              v1::REJECTION_REASON_END_BEFORE_START);
static_assert(static_cast<int>(RejectReason::kTooOld) == v1::REJECTION_REASON_TOO_OLD);
static_assert(static_cast<int>(RejectReason::kInFuture) == v1::REJECTION_REASON_IN_FUTURE);
static_assert(static_cast<int>(RejectReason::kMissingName) == v1::REJECTION_REASON_MISSING_NAME);
static_assert(static_cast<int>(RejectReason::kTooManyAttributes) ==
              v1::REJECTION_REASON_TOO_MANY_ATTRIBUTES);
static_assert(static_cast<int>(RejectReason::kAttributeTooLarge) ==
              v1::REJECTION_REASON_ATTRIBUTE_TOO_LARGE);

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

void FillPushResponse(const IngestResult& result, v1::PushResponse* response) {
  response->set_accepted_spans(result.accepted);
  response->set_rejected_spans(result.rejected);
  for (const SpanRejectionInfo& r : result.rejections) {
    v1::SpanRejection* out = response->add_rejections();
    out->set_index(r.index);
    out->set_reason(static_cast<v1::RejectionReason>(r.reason));
    out->set_message(r.detail);
  }
}

grpc::Status IngestService::Push(grpc::ServerContext* context, const v1::PushRequest* request,
                                 v1::PushResponse* response) {
  auto result = ingester_->PushNative(*request);
  if (!result.ok()) return ToGrpcStatus(result.status());
  FillPushResponse(*result, response);
  return grpc::Status::OK;
}

grpc::Status IngestService::PushStream(grpc::ServerContext* context,
                                       grpc::ServerReader<v1::PushRequest>* reader,
                                       v1::PushResponse* response) {
  v1::PushRequest message;
  if (!reader->Read(&message)) return grpc::Status::OK;  // an empty stream
  // One admission slot for the whole stream.
  auto ticket = ingester_->Admit(IngestProtocol::kNative, message.spans_size());
  if (!ticket.ok()) return ToGrpcStatus(ticket.status());
  IngestResult total;
  uint64_t message_index = 0;
  do {
    absl::Status s = ingester_->IngestNative(message, *ticket, &total);
    if (!s.ok()) {
      return grpc::Status(
          static_cast<grpc::StatusCode>(s.code()),
          absl::StrCat("stream message ", message_index, ": ", s.message(), "; ", total.accepted,
                       " spans of earlier messages were accepted (stored)"));
    }
    ++message_index;
    message.Clear();
  } while (reader->Read(&message));
  FillPushResponse(total, response);
  return grpc::Status::OK;
}

}  // namespace fabricscope
