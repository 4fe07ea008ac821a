// Fuzz target: the JSON Lines recording reader (daemon/recording/recording.h):
// ParseRecordingLine on the input as one line, ParseSpanJson on it (what
// `fabricscope push` reads), and the writer/reader round trip: a line the
// reader accepts, written back with FormatSampleLine / FormatSpanLine, reads
// back to the same sample / span (the fields the writer carries, the stall
// judgement), and a header or incident line is written back alike.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/recording/recording.h"
#include "fuzz/fuzz_check.h"

namespace {

void CheckSameWrittenFields(const fabricscope::v1::Span& a, const fabricscope::v1::Span& b) {
  FUZZ_CHECK(a.trace_id() == b.trace_id());
  FUZZ_CHECK(a.span_id() == b.span_id());
  FUZZ_CHECK(a.parent_span_id() == b.parent_span_id());
  FUZZ_CHECK(a.name() == b.name());
  FUZZ_CHECK(a.start_unix_nano() == b.start_unix_nano());
  FUZZ_CHECK(a.end_unix_nano() == b.end_unix_nano());
  FUZZ_CHECK(a.attributes_size() == b.attributes_size());
  for (int i = 0; i < a.attributes_size(); ++i) {
    FUZZ_CHECK(a.attributes(i).key() == b.attributes(i).key());
    FUZZ_CHECK(a.attributes(i).value() == b.attributes(i).value());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view line(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<fabricscope::RecordingLine> rec = fabricscope::ParseRecordingLine(line);
  if (rec.ok() && rec->type == fabricscope::RecordingLine::kSample) {
    FUZZ_CHECK(rec->ts_ns >= 0);
    FUZZ_CHECK(!rec->key.source.empty() && !rec->key.name.empty());
    const std::string written = fabricscope::FormatSampleLine(rec->ts_ns, rec->key, rec->value);
    absl::StatusOr<fabricscope::RecordingLine> again = fabricscope::ParseRecordingLine(written);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->type == fabricscope::RecordingLine::kSample);
    FUZZ_CHECK(again->ts_ns == rec->ts_ns);
    FUZZ_CHECK(again->key == rec->key);
    FUZZ_CHECK(again->value == rec->value);
  } else if (rec.ok() && rec->type == fabricscope::RecordingLine::kIncident) {
    // Written again, read again: the same line (the first writing fixes
    // number spellings, e.g. a peak's precision).
    const std::string written = fabricscope::FormatIncidentLine(rec->incident);
    absl::StatusOr<fabricscope::RecordingLine> again = fabricscope::ParseRecordingLine(written);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->type == fabricscope::RecordingLine::kIncident);
    FUZZ_CHECK(fabricscope::FormatIncidentLine(again->incident) == written);
  } else if (rec.ok() && rec->type == fabricscope::RecordingLine::kHeader) {
    // The same for a header: written, read, written again alike; its pods
    // bounded as the kubernetes source bounds them.
    FUZZ_CHECK(rec->header.pods.devices.size() <= fabricscope::kMaxPodDevices);
    FUZZ_CHECK(rec->header.pods.processes.size() <= fabricscope::kMaxPodProcesses);
    const std::string written = fabricscope::FormatRecordingHeaderLine(rec->header);
    absl::StatusOr<fabricscope::RecordingLine> again = fabricscope::ParseRecordingLine(written);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->type == fabricscope::RecordingLine::kHeader);
    FUZZ_CHECK(fabricscope::FormatRecordingHeaderLine(again->header) == written);
    // Applying its options never half-applies: an error leaves the settings.
    fabricscope::AnalysisSettings settings;
    (void)fabricscope::ApplyRecordedOptions(rec->header.options, &settings);
  } else if (rec.ok()) {
    const std::string written = fabricscope::FormatSpanLine(rec->span, &rec->judgement);
    absl::StatusOr<fabricscope::RecordingLine> again = fabricscope::ParseRecordingLine(written);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->type == fabricscope::RecordingLine::kSpan);
    CheckSameWrittenFields(rec->span, again->span);
    FUZZ_CHECK(again->judgement.judged == rec->judgement.judged);
    FUZZ_CHECK(again->judgement.stall == rec->judgement.stall);
    FUZZ_CHECK(again->judgement.key == rec->judgement.key);
    FUZZ_CHECK(fabricscope::FormatSpanLine(again->span, &again->judgement) == written);
  }

  absl::StatusOr<fabricscope::v1::Span> span = fabricscope::ParseSpanJson(line);
  if (span.ok()) {
    FUZZ_CHECK(span->trace_id().size() == 16);
    FUZZ_CHECK(span->span_id().size() == 8);
    FUZZ_CHECK(span->parent_span_id().empty() || span->parent_span_id().size() == 8);
    absl::StatusOr<fabricscope::v1::Span> again =
        fabricscope::ParseSpanJson(fabricscope::FormatSpanJson(*span));
    FUZZ_CHECK(again.ok());
    CheckSameWrittenFields(*span, *again);
  }

  (void)fabricscope::ParseJson(line);
  return 0;
}
