// SpanIngester: the protocol-independent span ingest path. The gRPC services
// (daemon/service/ingest_service.h, otlp_trace_service.h) are thin adapters
// over it; it knows the wire messages but nothing about gRPC.
//
// One call = admission, request limit, per-span conversion + validation, one
// SpanStore::Add for the accepted spans, and counting every span in
// fabricscope_ingest_spans_total{protocol,result}:
//   - admission: at most IngestLimits::max_concurrent_requests calls (unary
//     requests and open streams) at once; beyond that RESOURCE_EXHAUSTED,
//     result="overload", nothing stored;
//   - more than max_spans_per_request spans in one request (or one stream
//     message): INVALID_ARGUMENT, result="request_too_large", nothing of that
//     request stored;
//   - otherwise each span is accepted (result="accepted", stored before the
//     call returns: acknowledged) or rejected with its reason.
//
// Thread-safety: thread-safe; calls run concurrently on gRPC threads. The
// store, clock and metrics registry are borrowed and must outlive it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/ingest/span_convert.h"
#include "daemon/ingest/span_validation.h"
#include "daemon/spans/span_kind.h"
#include "daemon/spans/span_store.h"
#include "fabricscope/v1/ingest.pb.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace fabricscope {

// kNcclInspector: spans the daemon makes itself from NCCL Inspector dump
// files (daemon/ingest/nccl_inspector.h), through IngestOwn.
enum class IngestProtocol : uint8_t { kNative = 0, kOtlp = 1, kNcclInspector = 2 };
// "native", "otlp", "nccl_inspector"
absl::string_view IngestProtocolName(IngestProtocol protocol);

struct SpanRejectionInfo {
  uint64_t index = 0;  // position in the request (or stream)
  RejectReason reason = RejectReason::kNone;
  std::string detail;
};

// Outcome of one request, or accumulated over the messages of a stream.
struct IngestResult {
  uint64_t seen = 0;  // spans looked at (accepted + rejected)
  uint64_t accepted = 0;
  uint64_t rejected = 0;
  std::array<uint64_t, kNumRejectReasons> by_reason{};  // rejected, by RejectReason
  // The first kMaxReportedRejections rejections, in order.
  std::vector<SpanRejectionInfo> rejections;
  static constexpr size_t kMaxReportedRejections = 1000;

  // "rejected 3 of 10 spans: 2 end_before_start (span 0: end is 5ns before
  // start), 1 invalid_ids (...)"; empty when nothing was rejected.
  std::string Summary() const;
};

class SpanIngester {
 public:
  SpanIngester(IngestLimits limits, std::unique_ptr<SpanKindClassifier> classifier,
               SpanStore* store, Clock* clock, MetricsRegistry* metrics);

  // Spans the daemon made itself (the NCCL Inspector tailer): validated,
  // judged and stored as a request's would be, counted in
  // fabricscope_ingest_spans_total under `protocol`. No admission: the caller
  // bounds what it passes.
  // RegisterOwn(protocol) first (once, before any call; it declares the
  // protocol's series).
  IngestResult IngestOwn(IngestProtocol protocol, std::vector<Span> spans);
  void RegisterOwn(IngestProtocol protocol);

  // Judges every accepted span (and adds the spans derived from it) before it
  // is stored: StallLearner::PrepareSpans. Borrowed; set before the first
  // call, or never (no judgement: the correlator's StallPolicy decides).
  void SetStallLearner(StallLearner* learner) { learner_ = learner; }

  // An admission slot; released when destroyed. Move-only.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (owner_ != nullptr) owner_->in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    }

   private:
    friend class SpanIngester;
    explicit Ticket(SpanIngester* owner) : owner_(owner) {}
    SpanIngester* owner_;
  };

  // Takes an admission slot, or answers RESOURCE_EXHAUSTED and counts
  // `span_count` spans as result="overload".
  absl::StatusOr<Ticket> Admit(IngestProtocol protocol, uint64_t span_count);

  // Ingests one native request under `ticket`, accumulating into `*result`
  // (indexes continue from result->seen). Non-OK only for a request over the
  // span limit (INVALID_ARGUMENT; nothing stored).
  absl::Status IngestNative(const v1::PushRequest& request, const Ticket& ticket,
                            IngestResult* result);
  // Same for an OTLP export request.
  absl::Status IngestOtlp(
      const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest& request,
      const Ticket& ticket, IngestResult* result);

  // Admit + IngestNative / IngestOtlp for a unary call.
  absl::StatusOr<IngestResult> PushNative(const v1::PushRequest& request);
  absl::StatusOr<IngestResult> ExportOtlp(
      const opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest& request);

  // A request whose bytes are not a protobuf message of its type (the
  // gRPC services decode them: daemon/ingest/wire_decode.h): counted in
  // fabricscope_ingest_requests_failed_total{reason="malformed"} and
  // logged (rate-limited) with the decoder's `error`.
  void CountMalformed(IngestProtocol protocol, absl::string_view error);
  // `strings` string fields of a request were not UTF-8 and were repaired
  // (fabricscope_ingest_strings_repaired_total); `field` is the first
  // repaired field, for the rate-limited log line.
  void CountRepaired(IngestProtocol protocol, uint64_t strings, absl::string_view field);

  const IngestLimits& limits() const { return limits_; }
  int in_flight() const { return in_flight_.load(std::memory_order_acquire); }

 private:
  prometheus::Counter& Counter(IngestProtocol protocol, absl::string_view result);
  void CountRequestTooLarge(IngestProtocol protocol, uint64_t spans);
  // Validates `span` (already converted, or rejected with `reason`), moves it
  // into `accepted` or records the rejection.
  void Record(RejectReason reason, std::string detail, Span* span, std::vector<Span>* accepted,
              IngestResult* result, int64_t now_ns);
  void Commit(IngestProtocol protocol, std::vector<Span> accepted, const IngestResult& before,
              const IngestResult& after);
  // What IngestNative and IngestOtlp share: the request limit on `n` spans,
  // then every span `for_each` hands over (for_each(ctx, record) calls
  // record(convert) per span, convert(Span*, std::string* detail) ->
  // RejectReason), validated, recorded and committed as one batch.
  template <typename ForEachSpan>
  absl::Status IngestSpans(IngestProtocol protocol, uint64_t n, IngestResult* result,
                           ForEachSpan for_each);

  const IngestLimits limits_;
  const std::unique_ptr<SpanKindClassifier> classifier_;
  SpanStore* const store_;
  MetricsRegistry* metrics_ = nullptr;
  StallLearner* learner_ = nullptr;
  Clock* const clock_;
  std::atomic<int> in_flight_{0};
  // [protocol][RejectReason], plus the two request-level results.
  prometheus::Counter* by_reason_[3][kNumRejectReasons] = {};
  prometheus::Counter* request_too_large_[2] = {};
  prometheus::Counter* overload_[2] = {};
  prometheus::Counter* refused_calls_[2] = {};
  prometheus::Counter* malformed_[2] = {};
  prometheus::Counter* repaired_[2] = {};
  LogRateLimiter log_limiter_{absl::Minutes(1)};
};

}  // namespace fabricscope
