#include "daemon/service/ingest_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/raw_codec.h"

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

grpc::ServerUnaryReactor* IngestService::Push(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  return ServeIngestCall<v1::PushRequest, v1::PushResponse>(
      context, *request, response, IngestProtocol::kNative, ingester_,
      [this](const v1::PushRequest& r) { return ingester_->PushNative(r); }, FillPushResponse);
}

namespace {

const MetricSpec& kIdleCancelled = DefineMetric(
    {.name = "fabricscope_ingest_streams_idle_cancelled_total",
     .type = MetricType::kCounter,
     .help = "Ingest streams cancelled because they sent nothing for the stream idle timeout.",
     .labels = {},
     .component = "ingest"});

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

IngestService::IngestService(SpanIngester* ingester, absl::Duration stream_idle_timeout,
                             MetricsRegistry* metrics)
    : ingester_(ingester), idle_ns_(absl::ToInt64Nanoseconds(stream_idle_timeout)) {
  if (metrics != nullptr) idle_cancelled_ = &metrics->Counter(kIdleCancelled).Add({});
  watchdog_ = std::thread([this] { Watch(); });
}

IngestService::~IngestService() {
  stop_.Notify();
  if (watchdog_.joinable()) watchdog_.join();
}

void IngestService::Touch(grpc::ServerContext* context) {
  std::lock_guard lock(mu_);
  streams_[context] = SteadyNs();
}

void IngestService::Watch() {
  // Checks every quarter of the timeout (at most once a second).
  const auto period = std::chrono::nanoseconds(std::min<int64_t>(idle_ns_ / 4, 1'000'000'000));
  while (!stop_.WaitUntil(std::chrono::steady_clock::now() + period)) {
    const int64_t now = SteadyNs();
    std::lock_guard lock(mu_);
    for (auto& [ctx, last] : streams_) {
      if (last != INT64_MAX && now - last > idle_ns_) {
        ctx->TryCancel();  // its Read returns false; the handler unregisters it
        last = INT64_MAX;  // cancel once
        if (idle_cancelled_ != nullptr) idle_cancelled_->Increment();
      }
    }
  }
}

grpc::Status IngestService::PushStream(grpc::ServerContext* context,
                                       grpc::ServerReader<v1::PushRequest>* reader,
                                       v1::PushResponse* response) {
  // One admission slot for the whole stream, taken before the first read: a
  // stream that never sends must not hold a server thread unadmitted.
  auto ticket = ingester_->Admit(IngestProtocol::kNative, 0);
  if (!ticket.ok()) return ToGrpcStatus(ticket.status());
  Touch(context);
  struct Unregister {
    IngestService* self;
    grpc::ServerContext* ctx;
    ~Unregister() {
      std::lock_guard lock(self->mu_);
      self->streams_.erase(ctx);
    }
  } unregister{this, context};
  v1::PushRequest message;
  if (!reader->Read(&message)) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "stream idle for too long (or cancelled)");
    }
    return grpc::Status::OK;  // an empty stream
  }
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
    Touch(context);
  } while (reader->Read(&message));
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        absl::StrCat("stream idle for too long (or cancelled); ", total.accepted,
                                     " spans were accepted (stored)"));
  }
  FillPushResponse(total, response);
  return grpc::Status::OK;
}

}  // namespace fabricscope
