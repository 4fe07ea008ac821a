// Fuzz target: OTLP trace ingest (opentelemetry TraceService/Export) without
// the gRPC server: the bytes are decoded as an ExportTraceServiceRequest (as
// the Export method does: strings that are not UTF-8 repaired), then
// every ResourceSpans goes through ConvertOtlpResource and each span through
// ConvertOtlpSpan (daemon/ingest/span_convert.h) and ValidateSpan, exactly as
// SpanIngester::IngestOtlp does. AnyValueToString is also driven directly on
// every attribute value with a small bound.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/ingest/span_convert.h"
#include "daemon/ingest/span_validation.h"
#include "daemon/spans/span_kind.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/span_checks.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace otlp = opentelemetry::proto;

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fabricscope::fuzz::SilenceProtobufLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fabricscope::IngestLimits* const limits = fabricscope::fuzz::FuzzLimits();
  static const std::unique_ptr<fabricscope::SpanKindClassifier> classifier =
      *fabricscope::SpanKindClassifier::Create({});

  otlp::collector::trace::v1::ExportTraceServiceRequest request;
  if (!fabricscope::fuzz::DecodeAsIngestDoes(data, size, &request)) return 0;
  const fabricscope::ConvertContext ctx{limits, classifier.get()};
  for (const auto& rs : request.resource_spans()) {
    const fabricscope::OtlpResourceInfo resource =
        fabricscope::ConvertOtlpResource(rs.resource(), *limits);
    FUZZ_CHECK(resource.kept.size() <= 3);  // host.name, service.name, process.pid
    for (const auto& ss : rs.scope_spans()) {
      for (const auto& in : ss.spans()) {
        for (const auto& kv : in.attributes()) {
          std::string out;
          if (fabricscope::AnyValueToString(kv.value(), 16, &out)) FUZZ_CHECK(out.size() <= 16);
        }
        fabricscope::Span span;
        std::string detail;
        fabricscope::RejectReason reason =
            fabricscope::ConvertOtlpSpan(in, resource, ctx, &span, &detail);
        if (reason == fabricscope::RejectReason::kNone) {
          reason = fabricscope::ValidateSpan(span, *limits, fabricscope::fuzz::kNowNs, &detail);
        }
        FUZZ_CHECK(!fabricscope::RejectReasonName(reason).empty());
        if (reason != fabricscope::RejectReason::kNone) {
          FUZZ_CHECK(!detail.empty());
          continue;
        }
        FUZZ_CHECK(!resource.too_large);
        FUZZ_CHECK(span.attributes.size() >= resource.kept.size());
        fabricscope::fuzz::CheckAcceptedSpan(span, *limits,
                                             span.attributes.size() - resource.kept.size());
      }
    }
  }
  return 0;
}
