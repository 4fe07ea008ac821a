#include "daemon/ingest/span_ingester.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace fabricscope {
namespace {

namespace otlp_collector = opentelemetry::proto::collector::trace::v1;

const MetricSpec& kIngestSpans = DefineMetric(
    {.name = "fabricscope_ingest_spans_total",
     .type = MetricType::kCounter,
     .help = "Spans received over gRPC, by protocol (native, otlp) and result: accepted, a "
             "per-span rejection reason (invalid_ids, end_before_start, too_old, in_future, "
             "missing_name, too_many_attributes, attribute_too_large) or a whole-request "
             "rejection (request_too_large: INVALID_ARGUMENT; overload: RESOURCE_EXHAUSTED).",
     .labels = {"protocol", "result"},
     .component = "ingest"});

const MetricSpec& kIngestCallsRefused = DefineMetric(
    {.name = "fabricscope_ingest_calls_refused_total",
     .type = MetricType::kCounter,
     .help = "Ingest calls (unary requests, streams) refused with RESOURCE_EXHAUSTED because "
             "the ingest concurrency limit was reached, by protocol (their spans, when known, "
             "count in fabricscope_ingest_spans_total{result=\"overload\"}).",
     .labels = {"protocol"},
     .component = "ingest"});

const MetricSpec& kIngestRequestsFailed = DefineMetric(
    {.name = "fabricscope_ingest_requests_failed_total",
     .type = MetricType::kCounter,
     .help = "Ingest requests refused as a whole before their spans were read, by protocol "
             "and reason (malformed: the bytes are not a protobuf message of the request's "
             "type; answered INVALID_ARGUMENT).",
     .labels = {"protocol", "reason"},
     .component = "ingest"});

const MetricSpec& kIngestStringsRepaired = DefineMetric(
    {.name = "fabricscope_ingest_strings_repaired_total",
     .type = MetricType::kCounter,
     .help = "String fields of ingest requests (span names, attribute keys and values, resource "
             "and scope strings) that were not valid UTF-8 and were repaired, each invalid byte "
             "replaced by U+FFFD, instead of failing the whole request; by protocol and reason "
             "(invalid_utf8). Their spans are then validated and counted in "
             "fabricscope_ingest_spans_total as any other.",
     .labels = {"protocol", "reason"},
     .component = "ingest"});

constexpr IngestProtocol kProtocols[] = {IngestProtocol::kNative, IngestProtocol::kOtlp};

}  // namespace

absl::string_view IngestProtocolName(IngestProtocol protocol) {
  switch (protocol) {
    case IngestProtocol::kNative:
      return "native";
    case IngestProtocol::kOtlp:
      return "otlp";
    case IngestProtocol::kNcclInspector:
      return "nccl_inspector";
  }
  return "native";
}

std::string IngestResult::Summary() const {
  if (rejected == 0) return "";
  std::string out = absl::StrCat("rejected ", rejected, " of ", seen, " spans:");
  bool first = true;
  for (int r = 1; r < kNumRejectReasons; ++r) {
    if (by_reason[r] == 0) continue;
    absl::StrAppend(&out, first ? " " : ", ", by_reason[r], " ",
                    RejectReasonName(static_cast<RejectReason>(r)));
    for (const SpanRejectionInfo& info : rejections) {
      if (info.reason == static_cast<RejectReason>(r)) {
        absl::StrAppend(&out, " (span ", info.index, ": ", info.detail, ")");
        break;
      }
    }
    first = false;
  }
  return out;
}

SpanIngester::SpanIngester(IngestLimits limits, std::unique_ptr<SpanKindClassifier> classifier,
                           SpanStore* store, Clock* clock, MetricsRegistry* metrics)
    : limits_(limits), classifier_(std::move(classifier)), store_(store), clock_(clock) {
  auto& family = metrics->Counter(kIngestSpans);
  for (IngestProtocol p : kProtocols) {
    const int pi = static_cast<int>(p);
    const std::string protocol(IngestProtocolName(p));
    for (int r = 0; r < kNumRejectReasons; ++r) {
      by_reason_[pi][r] =
          &family.Add({{"protocol", protocol},
                       {"result", std::string(RejectReasonName(static_cast<RejectReason>(r)))}});
    }
    request_too_large_[pi] = &family.Add({{"protocol", protocol}, {"result", "request_too_large"}});
    overload_[pi] = &family.Add({{"protocol", protocol}, {"result", "overload"}});
    refused_calls_[pi] = &metrics->Counter(kIngestCallsRefused).Add({{"protocol", protocol}});
    malformed_[pi] = &metrics->Counter(kIngestRequestsFailed)
                          .Add({{"protocol", protocol}, {"reason", "malformed"}});
    repaired_[pi] = &metrics->Counter(kIngestStringsRepaired)
                         .Add({{"protocol", protocol}, {"reason", "invalid_utf8"}});
  }
  metrics_ = metrics;
}

void SpanIngester::RegisterOwn(IngestProtocol protocol) {
  // The daemon's own spans: only their results (no requests, no admission).
  const int pi = static_cast<int>(protocol);
  for (int r = 0; r < kNumRejectReasons; ++r) {
    by_reason_[pi][r] =
        &metrics_->Counter(kIngestSpans)
             .Add({{"protocol", std::string(IngestProtocolName(protocol))},
                   {"result", std::string(RejectReasonName(static_cast<RejectReason>(r)))}});
  }
}

IngestResult SpanIngester::IngestOwn(IngestProtocol protocol, std::vector<Span> spans) {
  IngestResult result;
  const int64_t now_ns = clock_->RealtimeNs();
  std::vector<Span> accepted;
  accepted.reserve(spans.size());
  for (Span& span : spans) Record(RejectReason::kNone, "", &span, &accepted, &result, now_ns);
  Commit(protocol, std::move(accepted), IngestResult{}, result);
  return result;
}

absl::StatusOr<SpanIngester::Ticket> SpanIngester::Admit(IngestProtocol protocol,
                                                         uint64_t span_count) {
  int prev = in_flight_.fetch_add(1, std::memory_order_acq_rel);
  if (prev >= static_cast<int>(limits_.max_concurrent_requests)) {
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    overload_[static_cast<int>(protocol)]->Increment(static_cast<double>(span_count));
    refused_calls_[static_cast<int>(protocol)]->Increment();
    return absl::ResourceExhaustedError(
        absl::StrCat("span ingest overloaded: ", limits_.max_concurrent_requests,
                     " ingest calls in flight; retry later"));
  }
  return Ticket(this);
}

void SpanIngester::CountMalformed(IngestProtocol protocol, absl::string_view error) {
  malformed_[static_cast<int>(protocol)]->Increment();
  uint64_t suppressed = 0;
  if (log_limiter_.Allow("malformed", &suppressed)) {
    Log(LogLevel::kWarn, "ingest", "ingest request refused: not a protobuf message of its type",
        {{"protocol", std::string(IngestProtocolName(protocol))},
         {"error", std::string(error)},
         {"suppressed", absl::StrCat(suppressed)}});
  }
}

void SpanIngester::CountRepaired(IngestProtocol protocol, uint64_t strings,
                                 absl::string_view field) {
  repaired_[static_cast<int>(protocol)]->Increment(static_cast<double>(strings));
  uint64_t suppressed = 0;
  if (log_limiter_.Allow("repaired", &suppressed)) {
    Log(LogLevel::kWarn, "ingest",
        "ingest request with strings that are not UTF-8: invalid bytes replaced by U+FFFD, "
        "spans kept",
        {{"protocol", std::string(IngestProtocolName(protocol))},
         {"strings", absl::StrCat(strings)},
         {"first_field", std::string(field)},
         {"suppressed", absl::StrCat(suppressed)}});
  }
}

void SpanIngester::CountRequestTooLarge(IngestProtocol protocol, uint64_t spans) {
  request_too_large_[static_cast<int>(protocol)]->Increment(static_cast<double>(spans));
}

void SpanIngester::Record(RejectReason reason, std::string detail, Span* span,
                          std::vector<Span>* accepted, IngestResult* result, int64_t now_ns) {
  if (reason == RejectReason::kNone) reason = ValidateSpan(*span, limits_, now_ns, &detail);
  const uint64_t index = result->seen++;
  if (reason == RejectReason::kNone) {
    ++result->accepted;
    accepted->push_back(std::move(*span));
    return;
  }
  ++result->rejected;
  ++result->by_reason[static_cast<int>(reason)];
  if (result->rejections.size() < IngestResult::kMaxReportedRejections) {
    result->rejections.push_back({index, reason, std::move(detail)});
  }
}

void SpanIngester::Commit(IngestProtocol protocol, std::vector<Span> accepted,
                          const IngestResult& before, const IngestResult& after) {
  // Store first: a span is counted as accepted only once it is acknowledged.
  if (!accepted.empty()) {
    StallLearner::PrepareSpans(learner_, &accepted);
    store_->Add(std::move(accepted));
  }
  const int pi = static_cast<int>(protocol);
  by_reason_[pi][0]->Increment(static_cast<double>(after.accepted - before.accepted));
  for (int r = 1; r < kNumRejectReasons; ++r) {
    const uint64_t n = after.by_reason[r] - before.by_reason[r];
    if (n > 0) by_reason_[pi][r]->Increment(static_cast<double>(n));
  }
}

namespace {

uint64_t OtlpSpanCount(const otlp_collector::ExportTraceServiceRequest& request) {
  uint64_t n = 0;
  for (const auto& rs : request.resource_spans()) {
    for (const auto& ss : rs.scope_spans()) n += ss.spans_size();
  }
  return n;
}

}  // namespace

template <typename ForEachSpan>
absl::Status SpanIngester::IngestSpans(IngestProtocol protocol, uint64_t n, IngestResult* result,
                                       ForEachSpan for_each) {
  if (n > limits_.max_spans_per_request) {
    CountRequestTooLarge(protocol, n);
    return absl::InvalidArgumentError(absl::StrCat("request has ", n, " spans; the limit is ",
                                                   limits_.max_spans_per_request,
                                                   " (--max-spans-per-request)"));
  }
  const IngestResult before = *result;
  const int64_t now_ns = clock_->RealtimeNs();
  const ConvertContext ctx{&limits_, classifier_.get()};
  std::vector<Span> accepted;
  accepted.reserve(n);
  std::string detail;
  for_each(ctx, [&](auto convert) {
    Span span;
    detail.clear();
    RejectReason reason = convert(&span, &detail);
    Record(reason, std::move(detail), &span, &accepted, result, now_ns);
  });
  Commit(protocol, std::move(accepted), before, *result);
  return absl::OkStatus();
}

absl::Status SpanIngester::IngestNative(const v1::PushRequest& request, const Ticket& ticket,
                                        IngestResult* result) {
  return IngestSpans(IngestProtocol::kNative, request.spans_size(), result,
                     [&request](const ConvertContext& ctx, auto record) {
                       for (const v1::Span& in : request.spans()) {
                         record([&](Span* span, std::string* detail) {
                           return ConvertNativeSpan(in, ctx, span, detail);
                         });
                       }
                     });
}

absl::Status SpanIngester::IngestOtlp(const otlp_collector::ExportTraceServiceRequest& request,
                                      const Ticket& ticket, IngestResult* result) {
  return IngestSpans(IngestProtocol::kOtlp, OtlpSpanCount(request), result,
                     [this, &request](const ConvertContext& ctx, auto record) {
                       for (const auto& rs : request.resource_spans()) {
                         const OtlpResourceInfo resource =
                             ConvertOtlpResource(rs.resource(), limits_);
                         for (const auto& ss : rs.scope_spans()) {
                           for (const auto& in : ss.spans()) {
                             record([&](Span* span, std::string* detail) {
                               return ConvertOtlpSpan(in, resource, ctx, span, detail);
                             });
                           }
                         }
                       }
                     });
}

absl::StatusOr<IngestResult> SpanIngester::PushNative(const v1::PushRequest& request) {
  auto ticket = Admit(IngestProtocol::kNative, request.spans_size());
  if (!ticket.ok()) return ticket.status();
  IngestResult result;
  if (auto s = IngestNative(request, *ticket, &result); !s.ok()) return s;
  return result;
}

absl::StatusOr<IngestResult> SpanIngester::ExportOtlp(
    const otlp_collector::ExportTraceServiceRequest& request) {
  auto ticket = Admit(IngestProtocol::kOtlp, OtlpSpanCount(request));
  if (!ticket.ok()) return ticket.status();
  IngestResult result;
  if (auto s = IngestOtlp(request, *ticket, &result); !s.ok()) return s;
  return result;
}

}  // namespace fabricscope
