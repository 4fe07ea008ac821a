// Fuzz target: the /metrics content negotiation (exporters/exposition.h):
// NegotiateFormat on an Accept header, AcceptsGzip on an Accept-Encoding
// header, and RenderScrape with both on a small family. The input is
// "ACCEPT\nACCEPT_ENCODING" (no newline: all of it is the Accept header).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "exporters/exposition.h"
#include "fuzz/fuzz_check.h"
#include "prometheus/metric_family.h"

namespace {
bool ContainsIgnoreCase(absl::string_view haystack, absl::string_view needle) {
  return absl::StrContains(absl::AsciiStrToLower(haystack), needle);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  const absl::string_view accept = input.substr(0, nl);
  const absl::string_view encoding =
      nl == absl::string_view::npos ? absl::string_view() : input.substr(nl + 1);
  using fabricscope::ExpositionFormat;

  const std::optional<ExpositionFormat> format = fabricscope::NegotiateFormat(accept);
  // An empty Accept is text; OpenMetrics only when asked for by name or by a
  // wildcard; text is refused only for a non-empty header.
  if (absl::StripAsciiWhitespace(accept).empty()) {
    FUZZ_CHECK(format == ExpositionFormat::kText);
  }
  if (format == ExpositionFormat::kOpenMetrics) {
    FUZZ_CHECK(ContainsIgnoreCase(accept, "openmetrics-text") || absl::StrContains(accept, '*'));
  }
  const bool gzip = fabricscope::AcceptsGzip(encoding);
  if (gzip) {
    FUZZ_CHECK(ContainsIgnoreCase(encoding, "gzip") || absl::StrContains(encoding, '*'));
  }

  prometheus::MetricFamily f;
  f.name = "fabricscope_stalls_total";
  f.help = "Stalls.";
  f.type = prometheus::MetricType::Counter;
  prometheus::ClientMetric m;
  m.label = {{"name", "decode"}, {"verdict", "fabric"}};
  m.counter.value = 1;
  f.metric.push_back(m);
  const std::vector<prometheus::MetricFamily> families = {f};
  const std::vector<fabricscope::SeriesExemplar> exemplars = {
      {f.name, m.label, {"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 0.25, 1}}};
  const fabricscope::ScrapeOutput out =
      fabricscope::RenderScrape(families, exemplars, accept, encoding);
  FUZZ_CHECK(out.status == (format.has_value() ? 200 : 406));
  FUZZ_CHECK(!out.body.empty());
  if (out.status == 200) {
    FUZZ_CHECK(out.content_encoding == (gzip ? "gzip" : ""));
    FUZZ_CHECK(out.content_type == (format == ExpositionFormat::kOpenMetrics
                                        ? fabricscope::kOpenMetricsContentType
                                        : fabricscope::kTextContentType));
    if (!gzip) {
      FUZZ_CHECK(absl::StrContains(out.body, "trace_id") ==
                 (format == ExpositionFormat::kOpenMetrics));
    }
  } else {
    FUZZ_CHECK(out.content_encoding.empty());
  }
  return 0;
}
