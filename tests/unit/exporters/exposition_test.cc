// The exposition writer (exporters/exposition.h): content negotiation, the
// text and OpenMetrics layouts, exemplars and gzip.
#include "exporters/exposition.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/summary.h"
#include "prometheus/text_serializer.h"

namespace fabricscope {
namespace exposition_test {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// What Prometheus 2.42 sends (scrape.go's acceptHeader).
constexpr const char* kPrometheus2Accept =
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
// Prometheus 3 with scrape_protocols [PrometheusText0.0.4, OpenMetricsText1.0.0].
constexpr const char* kPrometheus3TextFirst =
    "text/plain;version=0.0.4;q=0.5,application/openmetrics-text;version=1.0.0;"
    "escaping=allow-utf-8;q=0.4,*/*;q=0.3";

TEST(NegotiateFormatTest, AsPrometheusAsks) {
  EXPECT_EQ(NegotiateFormat(kPrometheus2Accept), ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(NegotiateFormat(kPrometheus3TextFirst), ExpositionFormat::kText);
  EXPECT_EQ(NegotiateFormat(""), ExpositionFormat::kText);
  EXPECT_EQ(NegotiateFormat("  "), ExpositionFormat::kText);
  EXPECT_EQ(NegotiateFormat("*/*"), ExpositionFormat::kText);  // curl
  EXPECT_EQ(NegotiateFormat("text/plain"), ExpositionFormat::kText);
  EXPECT_EQ(NegotiateFormat("text/*"), ExpositionFormat::kText);
  EXPECT_EQ(NegotiateFormat("application/openmetrics-text"), ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(NegotiateFormat("Application/OpenMetrics-Text; version=\"1.0.0\""),
            ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(NegotiateFormat("application/*"), ExpositionFormat::kOpenMetrics);
  // Higher q wins whatever the order; equal q: the first listed.
  EXPECT_EQ(NegotiateFormat("text/plain;q=0.4,application/openmetrics-text;q=0.6"),
            ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(NegotiateFormat("text/plain,application/openmetrics-text"), ExpositionFormat::kText);
  EXPECT_EQ(NegotiateFormat("application/openmetrics-text,text/plain"),
            ExpositionFormat::kOpenMetrics);
  // The most specific range decides: text refused, */* still allows OpenMetrics.
  EXPECT_EQ(NegotiateFormat("text/plain;q=0,*/*"), ExpositionFormat::kOpenMetrics);
  // Protobuf first (Prometheus with native histograms): text is the fallback.
  EXPECT_EQ(NegotiateFormat("application/vnd.google.protobuf;proto=io.prometheus.client."
                            "MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3"),
            ExpositionFormat::kText);
}

TEST(NegotiateFormatTest, NotAcceptable) {
  EXPECT_EQ(NegotiateFormat("application/json"), std::nullopt);
  EXPECT_EQ(NegotiateFormat("application/openmetrics-text;version=0.0.1"), std::nullopt);
  EXPECT_EQ(NegotiateFormat("text/plain;version=0.0.5"), std::nullopt);
  EXPECT_EQ(NegotiateFormat("text/plain;q=0"), std::nullopt);
  EXPECT_EQ(NegotiateFormat("*/*;q=0"), std::nullopt);
  EXPECT_EQ(NegotiateFormat("garbage"), std::nullopt);
  EXPECT_EQ(NegotiateFormat("text/plain;q=2"), std::nullopt);  // a bad q drops the range
  EXPECT_EQ(NegotiateFormat("text/plain;q=x"), std::nullopt);
  // Ranges past kMaxAcceptRanges are not read.
  std::string many;
  for (int i = 0; i < kMaxAcceptRanges; ++i) many += "application/json,";
  EXPECT_EQ(NegotiateFormat(many + "text/plain"), std::nullopt);
}

TEST(AcceptsGzipTest, Codings) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("br, x-gzip;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_TRUE(AcceptsGzip("GZIP;q=1.0"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("*;q=0.5, gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("deflate"));
}

MetricFamily Family(const std::string& name, MetricType type, const std::string& help) {
  MetricFamily f;
  f.name = name;
  f.type = type;
  f.help = help;
  return f;
}

ClientMetric Counter(std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = v;
  return m;
}

ClientMetric Gauge(std::vector<ClientMetric::Label> labels, double v) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = v;
  return m;
}

// A stall counter, a gauge with awkward values and a histogram with
// prometheus-cpp's layout (the +Inf bucket last).
std::vector<MetricFamily> Sample() {
  std::vector<MetricFamily> out;
  MetricFamily stalls = Family("fabricscope_stalls_total", MetricType::Counter,
                               "Stalled spans by \"name\"\\verdict.\nSecond line.");
  stalls.metric.push_back(Counter({{"name", "decode"}, {"verdict", "fabric"}}, 3));
  stalls.metric.push_back(Counter({{"name", "a\"b\\c\nd"}, {"verdict", "clean"}}, 1));
  out.push_back(stalls);
  MetricFamily bytes = Family("fabricscope_store_bytes", MetricType::Gauge, "Bytes.");
  bytes.metric.push_back(Gauge({}, 1.5e-05));
  bytes.metric.push_back(Gauge({{"k", "nan"}}, std::nan("")));
  bytes.metric.push_back(Gauge({{"k", "inf"}}, -std::numeric_limits<double>::infinity()));
  bytes.metric.push_back(Gauge({{"k", "big"}}, 1e20));
  bytes.metric.push_back(Gauge({{"k", "int"}}, 10284520));
  out.push_back(bytes);
  MetricFamily hist =
      Family("fabricscope_stall_duration_seconds", MetricType::Histogram, "Durations.");
  ClientMetric h;
  h.label = {{"name", "decode"}, {"verdict", "fabric"}};
  h.histogram.sample_count = 3;
  h.histogram.sample_sum = 0.75;
  h.histogram.bucket = {{1, 0.1}, {2, 0.5}, {3, 1}, {3, std::numeric_limits<double>::infinity()}};
  hist.metric.push_back(h);
  out.push_back(hist);
  out.push_back(Family("fabricscope_empty_total", MetricType::Counter, "No samples yet."));
  return out;
}

std::vector<SeriesExemplar> SampleExemplars() {
  return {
      {"fabricscope_stalls_total",
       {{"verdict", "fabric"}, {"name", "decode"}},  // any label order
       {"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 0.3, 1700000000123456789}},
      {"fabricscope_stall_duration_seconds",
       {{"name", "decode"}, {"verdict", "fabric"}},
       {"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 0.3, 1700000001000000000}},
  };
}

TEST(WriteExpositionTest, Text) {
  std::string out;
  WriteExposition(Sample(), SampleExemplars(), ExpositionFormat::kText, &out);
  EXPECT_EQ(
      out,
      "# HELP fabricscope_stalls_total Stalled spans by \"name\"\\\\verdict.\\nSecond line.\n"
      "# TYPE fabricscope_stalls_total counter\n"
      "fabricscope_stalls_total{name=\"decode\",verdict=\"fabric\"} 3\n"
      "fabricscope_stalls_total{name=\"a\\\"b\\\\c\\nd\",verdict=\"clean\"} 1\n"
      "# HELP fabricscope_store_bytes Bytes.\n"
      "# TYPE fabricscope_store_bytes gauge\n"
      "fabricscope_store_bytes 1.5e-05\n"
      "fabricscope_store_bytes{k=\"nan\"} NaN\n"
      "fabricscope_store_bytes{k=\"inf\"} -Inf\n"
      "fabricscope_store_bytes{k=\"big\"} 1e+20\n"
      "fabricscope_store_bytes{k=\"int\"} 10284520\n"
      "# HELP fabricscope_stall_duration_seconds Durations.\n"
      "# TYPE fabricscope_stall_duration_seconds histogram\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"0.1\"} "
      "1\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"0.5\"} "
      "2\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"1\"} 3\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"+Inf\"} "
      "3\n"
      "fabricscope_stall_duration_seconds_sum{name=\"decode\",verdict=\"fabric\"} 0.75\n"
      "fabricscope_stall_duration_seconds_count{name=\"decode\",verdict=\"fabric\"} 3\n"
      "# HELP fabricscope_empty_total No samples yet.\n"
      "# TYPE fabricscope_empty_total counter\n");
}

TEST(WriteExpositionTest, OpenMetricsWithExemplars) {
  std::string out;
  WriteExposition(Sample(), SampleExemplars(), ExpositionFormat::kOpenMetrics, &out);
  EXPECT_EQ(
      out,
      "# HELP fabricscope_stalls Stalled spans by \\\"name\\\"\\\\verdict.\\nSecond line.\n"
      "# TYPE fabricscope_stalls counter\n"
      "fabricscope_stalls_total{name=\"decode\",verdict=\"fabric\"} 3 # "
      "{trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\",span_id=\"00f067aa0ba902b7\"} 0.3 "
      "1700000000.123\n"
      "fabricscope_stalls_total{name=\"a\\\"b\\\\c\\nd\",verdict=\"clean\"} 1\n"
      "# HELP fabricscope_store_bytes Bytes.\n"
      "# TYPE fabricscope_store_bytes gauge\n"
      "# UNIT fabricscope_store_bytes bytes\n"
      "fabricscope_store_bytes 1.5e-05\n"
      "fabricscope_store_bytes{k=\"nan\"} NaN\n"
      "fabricscope_store_bytes{k=\"inf\"} -Inf\n"
      "fabricscope_store_bytes{k=\"big\"} 1e+20\n"
      "fabricscope_store_bytes{k=\"int\"} 10284520\n"
      "# HELP fabricscope_stall_duration_seconds Durations.\n"
      "# TYPE fabricscope_stall_duration_seconds histogram\n"
      "# UNIT fabricscope_stall_duration_seconds seconds\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"0.1\"} 1\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"0.5\"} 2 "
      "# {trace_id=\"0af7651916cd43dd8448eb211c80319c\",span_id=\"b7ad6b7169203331\"} 0.3 "
      "1700000001.000\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"1\"} 3\n"
      "fabricscope_stall_duration_seconds_bucket{name=\"decode\",verdict=\"fabric\",le=\"+Inf\"} "
      "3\n"
      "fabricscope_stall_duration_seconds_sum{name=\"decode\",verdict=\"fabric\"} 0.75\n"
      "fabricscope_stall_duration_seconds_count{name=\"decode\",verdict=\"fabric\"} 3\n"
      "# HELP fabricscope_empty No samples yet.\n"
      "# TYPE fabricscope_empty counter\n"
      "# EOF\n");
}

TEST(WriteExpositionTest, OversizedExemplarLeftOut) {
  std::vector<SeriesExemplar> ex = SampleExemplars();
  ex[0].exemplar.trace_id = std::string(100, 'a');  // 8+100+7+16 > 128
  std::string out;
  WriteExposition(Sample(), ex, ExpositionFormat::kOpenMetrics, &out);
  EXPECT_EQ(out.find(std::string(100, 'a')), std::string::npos);
  EXPECT_NE(out.find("fabricscope_stalls_total{name=\"decode\",verdict=\"fabric\"} 3\n"),
            std::string::npos);
  // Exactly 128 characters is allowed.
  ex[0].exemplar.trace_id = std::string(128 - 8 - 7 - 16, 'b');
  out.clear();
  WriteExposition(Sample(), ex, ExpositionFormat::kOpenMetrics, &out);
  EXPECT_NE(out.find(std::string(128 - 8 - 7 - 16, 'b')), std::string::npos);
}

std::vector<std::string> SortedLines(const std::string& s) {
  std::vector<std::string> lines = absl::StrSplit(s, '\n', absl::SkipEmpty());
  std::sort(lines.begin(), lines.end());
  return lines;
}

// The text output carries the same lines as prometheus-cpp's serializer for
// every type the registry makes (only the order within a histogram differs).
// (Not HELP text with a backslash: prometheus-cpp leaves it unescaped, the
// text format escapes it as WriteExpositionTest.Text shows.)
TEST(WriteExpositionTest, TextHasTheLinesOfPrometheusCpp) {
  prometheus::Registry registry;
  auto& c = prometheus::BuildCounter().Name("c_total").Help("A counter.").Register(registry);
  c.Add({{"a", "x\"y"}}).Increment(3.25);
  c.Add({{"a", "z"}}).Increment(12345678901234.0);
  auto& g = prometheus::BuildGauge().Name("g").Help("A gauge.").Register(registry);
  g.Add({}).Set(-0.001);
  g.Add({{"b", "1"}}).Set(1.0 / 3.0);
  auto& h = prometheus::BuildHistogram().Name("h_seconds").Help("H.").Register(registry);
  auto& hh = h.Add({{"op", "read"}}, prometheus::Histogram::BucketBoundaries{0.001, 0.25, 1, 5});
  hh.Observe(0.0005);
  hh.Observe(0.3);
  hh.Observe(100);
  auto& s = prometheus::BuildSummary().Name("s").Help("S.").Register(registry);
  s.Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.99, 0.001}}).Observe(2);
  const std::vector<MetricFamily> families = registry.Collect();
  std::string ours;
  WriteExposition(families, {}, ExpositionFormat::kText, &ours);
  EXPECT_EQ(SortedLines(ours), SortedLines(prometheus::TextSerializer().Serialize(families)));
}

std::string Gunzip(const std::string& z) {
  z_stream zs{};
  EXPECT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  std::string out(1 << 20, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(z.data()));
  zs.avail_in = static_cast<uInt>(z.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - zs.avail_out);
  inflateEnd(&zs);
  return out;
}

TEST(RenderScrapeTest, NegotiatesFormatAndEncoding) {
  const auto families = Sample();
  const auto exemplars = SampleExemplars();
  ScrapeOutput text = RenderScrape(families, exemplars, "", "");
  EXPECT_EQ(text.status, 200);
  EXPECT_EQ(text.content_type, kTextContentType);
  EXPECT_EQ(text.content_encoding, "");
  EXPECT_EQ(text.body.find("trace_id"), std::string::npos) << "exemplar in the text format";
  EXPECT_EQ(text.body.find("# EOF"), std::string::npos);

  ScrapeOutput om = RenderScrape(families, exemplars, kPrometheus2Accept, "gzip");
  EXPECT_EQ(om.status, 200);
  EXPECT_EQ(om.content_type, kOpenMetricsContentType);
  EXPECT_EQ(om.content_encoding, "gzip");
  std::string plain;
  WriteExposition(families, exemplars, ExpositionFormat::kOpenMetrics, &plain);
  EXPECT_EQ(Gunzip(om.body), plain);
  // Scrapes do not change anything: the same inputs give the same answer.
  EXPECT_EQ(RenderScrape(families, exemplars, kPrometheus2Accept, "gzip").body, om.body);

  ScrapeOutput refused = RenderScrape(families, exemplars, "application/json", "gzip");
  EXPECT_EQ(refused.status, 406);
  EXPECT_EQ(refused.content_encoding, "");
  EXPECT_NE(refused.body.find("openmetrics"), std::string::npos);
}

// Streams `families` sample by sample (counters and gauges only) the way
// WriteStoreFamilies does.
std::string Streamed(const std::vector<MetricFamily>& families,
                     const std::vector<SeriesExemplar>& exemplars, ExpositionFormat format) {
  std::string out;
  ExpositionWriter w(format, exemplars, &out);
  for (const MetricFamily& f : families) {
    w.BeginFamily(f.name, f.help, f.type);
    for (const ClientMetric& m : f.metric) {
      std::vector<LabelView> labels;
      for (const auto& l : m.label) labels.push_back({l.name, l.value});
      w.AddSample(labels.data(), labels.size(),
                  f.type == MetricType::Counter ? m.counter.value : m.gauge.value);
    }
    EXPECT_EQ(w.EndFamily(), f.metric.size());
  }
  w.Finish();
  return out;
}

TEST(ExpositionWriterTest, StreamedSamplesWriteTheBytesOfWholeFamilies) {
  // Counters and gauges of Sample() (escaping, awkward numbers, an exemplar
  // given with its labels in another order), plus a second exemplar family.
  std::vector<MetricFamily> families = Sample();
  families.erase(families.begin() + 2, families.end());  // no histogram, no empty family
  std::vector<SeriesExemplar> exemplars = SampleExemplars();
  exemplars.push_back({"fabricscope_stalls_total",
                       {{"verdict", "clean"}, {"name", "a\"b\\c\nd"}},
                       {"0af7651916cd43dd8448eb211c80319c", "", 2.5, 0}});
  for (ExpositionFormat format : {ExpositionFormat::kText, ExpositionFormat::kOpenMetrics}) {
    std::string whole;
    WriteExposition(families, exemplars, format, &whole);
    EXPECT_EQ(Streamed(families, exemplars, format), whole);
  }
  const std::string om = Streamed(families, exemplars, ExpositionFormat::kOpenMetrics);
  EXPECT_NE(om.find("fabricscope_stalls_total{name=\"decode\",verdict=\"fabric\"} 3 # "
                    "{trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\""),
            std::string::npos)
      << om;
  EXPECT_NE(om.find("verdict=\"clean\"} 1 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\"} 2.5\n"),
            std::string::npos)
      << om;
}

TEST(ExpositionWriterTest, FamilyWithoutSamplesIsTakenBack) {
  std::string out = "# before\n";
  ExpositionWriter w(ExpositionFormat::kOpenMetrics, {}, &out);
  w.BeginFamily("fabricscope_empty_total", "Nothing.", MetricType::Counter);
  EXPECT_EQ(w.EndFamily(), 0u);
  w.BeginFamily("fabricscope_up", "Up.", MetricType::Gauge);
  const LabelView label{"device", "mlx5_0"};
  w.AddSample(&label, 1, 1);
  EXPECT_EQ(w.EndFamily(), 1u);
  w.Finish();
  EXPECT_EQ(out,
            "# before\n"
            "# HELP fabricscope_up Up.\n"
            "# TYPE fabricscope_up gauge\n"
            "fabricscope_up{device=\"mlx5_0\"} 1\n"
            "# EOF\n");
}

TEST(RenderScrapeTest, BodyWriterRunsOnlyForAServableFormat) {
  int calls = 0;
  auto write = [&calls](ExpositionFormat format, std::string* body) {
    ++calls;
    body->append(format == ExpositionFormat::kOpenMetrics ? "om\n" : "text\n");
  };
  EXPECT_EQ(RenderScrape(kPrometheus2Accept, "", write).body, "om\n");
  EXPECT_EQ(RenderScrape("", "", write).body, "text\n");
  ScrapeOutput refused = RenderScrape("application/json", "", write);
  EXPECT_EQ(refused.status, 406);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace exposition_test
}  // namespace fabricscope
