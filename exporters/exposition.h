// The /metrics exposition writer: Prometheus text format 0.0.4 and OpenMetrics
// 1.0.0, negotiated from the scrape's Accept header, gzip-compressed when
// Accept-Encoding allows, with exemplars in OpenMetrics responses.
//
// Input is either the data model of prometheus-cpp (prometheus::MetricFamily:
// the self-metrics registry's Collect(), RenderStoreFamilies()) or samples
// streamed one at a time through ExpositionWriter (what /metrics does for the
// store's families: WriteStoreFamilies in exporters/prometheus_exporter.h);
// prometheus-cpp's serializer is not used.
//
// Format rules (both formats):
//  - Families in the order given, samples in the order given; HELP and TYPE
//    for every family, even one without samples.
//  - Numbers: integers up to 1e15 as integers, others as printf's %.16g
//    (what prometheus-cpp wrote, so text output did not change), NaN as
//    "NaN", infinities as "+Inf"/"-Inf". Histogram `le` values are written
//    the same way in both formats (e.g. le="1", not OpenMetrics' canonical
//    "1.0"): Prometheus 2.x does not normalise `le`, so the canonical form
//    would make a different series for the same bucket when a target moves
//    between formats.
//  - Histogram lines: the buckets (ending with le="+Inf"), then _sum and
//    _count.
// OpenMetrics specifics:
//  - A counter family is announced without its _total suffix (`# TYPE
//    fabricscope_stalls counter`), its samples keep it
//    (fabricscope_stalls_total).
//  - `# UNIT` where the family name (without _total) ends in a base unit
//    (seconds, bytes, ratio, celsius, volts, amperes, joules).
//  - HELP escapes `"` as well as `\` and newline; "# EOF" ends the body.
//  - No _created samples: the store's counters are hardware counters whose
//    start is not known, and prometheus-cpp's self-metrics keep no creation
//    time; OpenMetrics makes _created optional.
//  - Untyped families are "unknown"; timestamps are in seconds.
//  - Exemplars (trace_id/span_id) on counter samples and on the histogram
//    bucket their value falls in; an exemplar whose label set exceeds
//    OpenMetrics' 128 characters is left out.
//
// Thread-safety: every function is pure (no shared state); RenderScrape never
// changes its inputs, so any number of scrapers get the same answer.
// ExpositionWriter is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"

namespace fabricscope {

enum class ExpositionFormat { kText, kOpenMetrics };

inline constexpr absl::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr absl::string_view kOpenMetricsContentType =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

// An exemplar: the span behind a sample.
struct Exemplar {
  std::string trace_id;      // lower-case hex (32 characters for W3C trace ids)
  std::string span_id;       // lower-case hex (16 characters)
  double value = 0.0;        // the span's duration in seconds
  int64_t timestamp_ns = 0;  // the span's end, unix nanoseconds; 0: none written
};

// The exemplar of one series: `family` is the family's name as declared
// (e.g. fabricscope_stalls_total, fabricscope_stall_duration_seconds),
// `labels` the series' labels (any order; histograms without `le`).
struct SeriesExemplar {
  std::string family;
  std::vector<prometheus::ClientMetric::Label> labels;
  Exemplar exemplar;
};

// The format a scrape asked for, as Prometheus negotiates it: the Accept
// header's media ranges by their q value (the most specific range that
// matches a format gives that format's q; equal q: the one listed first).
// OpenMetrics is application/openmetrics-text with version 1.0.0 or none;
// text is text/plain with version 0.0.4 or none; type/* and */* match both.
// Parameters other than version and q are ignored. An empty (or absent)
// Accept is text. std::nullopt: nothing we can serve (HTTP 406). At most
// kMaxAcceptRanges ranges are read; the rest are ignored.
inline constexpr int kMaxAcceptRanges = 32;
std::optional<ExpositionFormat> NegotiateFormat(absl::string_view accept);

// Whether an Accept-Encoding header allows gzip (gzip, x-gzip or * with q>0,
// gzip not refused with q=0).
bool AcceptsGzip(absl::string_view accept_encoding);

// Appends the exposition of `families` in `format` to `out`; `exemplars`
// are written only in OpenMetrics.
void WriteExposition(const std::vector<prometheus::MetricFamily>& families,
                     const std::vector<SeriesExemplar>& exemplars, ExpositionFormat format,
                     std::string* out);

// One label of a sample given to ExpositionWriter::AddSample: views that
// need to stay valid only for the call.
struct LabelView {
  absl::string_view name;
  absl::string_view value;
};

// Streams one exposition body into a string, family by family: whole
// prometheus-cpp families (WriteFamilies, e.g. the self-metrics registry's),
// or counter and gauge families one sample at a time (BeginFamily, AddSample,
// EndFamily) straight from where the values live (the store snapshot: no
// ClientMetric, label vector or string per sample). Either way the bytes are
// those WriteExposition writes for the same families, exemplars included;
// WriteExposition is this writer with WriteFamilies and Finish.
//
// Ownership: borrows `exemplars` and `out`, which outlive the writer.
// Thread-safety: one thread at a time (it is a cursor into `out`).
class ExpositionWriter {
 public:
  // `exemplars` are looked up only in OpenMetrics (indexed once here).
  ExpositionWriter(ExpositionFormat format, const std::vector<SeriesExemplar>& exemplars,
                   std::string* out);
  ExpositionWriter(const ExpositionWriter&) = delete;
  ExpositionWriter& operator=(const ExpositionWriter&) = delete;
  ~ExpositionWriter();

  ExpositionFormat format() const { return format_; }
  // Makes room for `bytes` more output (one allocation instead of doubling).
  void Reserve(size_t bytes);

  // Writes `families` (all of them, an empty one with its HELP and TYPE).
  void WriteFamilies(const std::vector<prometheus::MetricFamily>& families);

  // Starts a family of plain samples: `type` is Counter or Gauge (anything
  // else is written as its TYPE with gauge-style sample lines). Writes the
  // HELP, TYPE and (OpenMetrics) UNIT lines. `name` stays valid until
  // EndFamily.
  void BeginFamily(absl::string_view name, absl::string_view help, prometheus::MetricType type);
  // One sample of the family begun last (no timestamp), with its exemplar
  // when it is a counter and one matches.
  void AddSample(const LabelView* labels, size_t n_labels, double value);
  // Ends the family begun last and returns its sample count; a family that
  // got no sample is taken back whole (no HELP/TYPE lines).
  size_t EndFamily();

  // Ends the body ("# EOF" in OpenMetrics); nothing may follow.
  void Finish();

 private:
  class ExemplarIndex;
  ExpositionFormat format_;
  std::string* out_;
  std::unique_ptr<ExemplarIndex> exemplars_;  // null in the text format
  // The family begun last.
  std::string family_;  // its declared name (exemplar lookups)
  absl::string_view sample_name_, sample_suffix_;
  prometheus::MetricType type_ = prometheus::MetricType::Untyped;
  bool family_exemplars_ = false;
  size_t family_start_ = 0;  // where its HELP line starts in *out_
  size_t family_samples_ = 0;
};

// gzip (RFC 1952) of `data` with zlib at its fastest level; empty on a zlib
// failure (out of memory).
std::string Gzip(absl::string_view data);

// One /metrics answer.
struct ScrapeOutput {
  int status = 200;              // 200, or 406 when the Accept cannot be served
  std::string content_type;      // kTextContentType / kOpenMetricsContentType; text/plain on 406
  std::string content_encoding;  // "gzip" or empty
  std::string body;
};

// Negotiates the format and encoding and writes the body.
ScrapeOutput RenderScrape(const std::vector<prometheus::MetricFamily>& families,
                          const std::vector<SeriesExemplar>& exemplars, absl::string_view accept,
                          absl::string_view accept_encoding);
// The same with the body written by `write_body` (called once, in the
// negotiated format, appending the whole body including Finish's end; not
// called on a 406).
ScrapeOutput RenderScrape(absl::string_view accept, absl::string_view accept_encoding,
                          absl::FunctionRef<void(ExpositionFormat, std::string*)> write_body);

}  // namespace fabricscope
