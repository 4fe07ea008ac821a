// Fuzz target: native span ingest (fabricscope.v1.Ingest/Push) without the
// gRPC server: the bytes are decoded as a fabricscope.v1.PushRequest (as
// the Push method does: strings that are not UTF-8 repaired), then each
// span goes through ConvertNativeSpan (daemon/ingest/span_convert.h) and
// ValidateSpan (span_validation.h) exactly as SpanIngester::IngestNative does.
// Accepted spans must respect the ingest limits, and must survive the
// recording writer/reader (FormatSpanJson -> ParseSpanJson), since
// `fabricscope record` and `analyze` carry them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "daemon/ingest/span_convert.h"
#include "daemon/ingest/span_validation.h"
#include "daemon/recording/recording.h"
#include "daemon/spans/span_kind.h"
#include "fabricscope/v1/ingest.pb.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/span_checks.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fabricscope::fuzz::SilenceProtobufLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fabricscope::IngestLimits* const limits = fabricscope::fuzz::FuzzLimits();
  static const std::unique_ptr<fabricscope::SpanKindClassifier> classifier =
      *fabricscope::SpanKindClassifier::Create({});

  fabricscope::v1::PushRequest request;
  if (!fabricscope::fuzz::DecodeAsIngestDoes(data, size, &request)) return 0;
  const fabricscope::ConvertContext ctx{limits, classifier.get()};
  for (const fabricscope::v1::Span& in : request.spans()) {
    fabricscope::Span span;
    std::string detail;
    fabricscope::RejectReason reason = fabricscope::ConvertNativeSpan(in, ctx, &span, &detail);
    if (reason == fabricscope::RejectReason::kNone) {
      reason = fabricscope::ValidateSpan(span, *limits, fabricscope::fuzz::kNowNs, &detail);
    }
    FUZZ_CHECK(!fabricscope::RejectReasonName(reason).empty());
    if (reason != fabricscope::RejectReason::kNone) {
      FUZZ_CHECK(!detail.empty());
      continue;
    }
    fabricscope::fuzz::CheckAcceptedSpan(span, *limits, /*own_attributes=*/span.attributes.size());
    FUZZ_CHECK(span.name == in.name());

    absl::StatusOr<fabricscope::v1::Span> again =
        fabricscope::ParseSpanJson(fabricscope::FormatSpanJson(in));
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->trace_id() == in.trace_id() && again->span_id() == in.span_id());
    FUZZ_CHECK(again->name() == in.name());
  }
  return 0;
}
