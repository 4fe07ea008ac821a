#include "exporters/exposition.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "prometheus/metric_type.h"

namespace fabricscope {
namespace {

// ---- Content negotiation ----

struct MediaRange {
  absl::string_view type;
  absl::string_view subtype;
  absl::string_view version;  // empty: none given
  bool has_version = false;
  double q = 1.0;
  int order = 0;
};

absl::string_view Unquote(absl::string_view v) {
  v = absl::StripAsciiWhitespace(v);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

// Parses "q" values: a number in [0, 1]; false for anything else.
bool ParseQ(absl::string_view v, double* q) {
  double d = 0;
  if (!absl::SimpleAtod(Unquote(v), &d) || !(d >= 0.0 && d <= 1.0)) return false;
  *q = d;
  return true;
}

std::vector<MediaRange> ParseAccept(absl::string_view accept) {
  std::vector<MediaRange> out;
  int order = 0;
  for (absl::string_view item : absl::StrSplit(accept, ',')) {
    if (order >= kMaxAcceptRanges) break;
    std::vector<absl::string_view> parts = absl::StrSplit(item, ';');
    absl::string_view media = absl::StripAsciiWhitespace(parts[0]);
    if (media.empty()) continue;
    ++order;
    const size_t slash = media.find('/');
    if (slash == absl::string_view::npos || slash == 0 || slash + 1 == media.size()) continue;
    MediaRange r;
    r.type = absl::StripAsciiWhitespace(media.substr(0, slash));
    r.subtype = absl::StripAsciiWhitespace(media.substr(slash + 1));
    r.order = order;
    bool ok = true;
    for (size_t i = 1; i < parts.size() && ok; ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(parts[i]);
      if (p.empty()) continue;
      const size_t eq = p.find('=');
      if (eq == absl::string_view::npos) continue;  // a bare parameter: ignored
      absl::string_view key = absl::StripAsciiWhitespace(p.substr(0, eq));
      absl::string_view value = p.substr(eq + 1);
      if (absl::EqualsIgnoreCase(key, "q")) {
        ok = ParseQ(value, &r.q);
      } else if (absl::EqualsIgnoreCase(key, "version")) {
        r.version = Unquote(value);
        r.has_version = true;
      }
    }
    if (ok) out.push_back(r);
  }
  return out;
}

struct Match {
  int specificity = -1;  // -1: no range matches
  double q = 0;
  int order = 0;
};

// The most specific range of `ranges` that matches type/subtype with one of
// `versions`.
Match BestMatch(const std::vector<MediaRange>& ranges, absl::string_view type,
                absl::string_view subtype, std::initializer_list<absl::string_view> versions) {
  Match best;
  for (const MediaRange& r : ranges) {
    int spec = -1;
    if (r.type == "*" && r.subtype == "*") {
      spec = 0;
    } else if (absl::EqualsIgnoreCase(r.type, type)) {
      if (r.subtype == "*") {
        spec = 1;
      } else if (absl::EqualsIgnoreCase(r.subtype, subtype)) {
        if (!r.has_version) {
          spec = 2;
        } else if (std::find(versions.begin(), versions.end(), r.version) != versions.end()) {
          spec = 3;
        }
      }
    }
    if (spec > best.specificity) best = {spec, r.q, r.order};
  }
  return best;
}

// ---- Number and string formatting ----

// absl::string_view is not std::string_view in every abseil build.
inline void Put(std::string* out, absl::string_view v) { out->append(v.data(), v.size()); }

// Longest text FormatDouble writes: %.16g of a double ("-1.234567890123456e-308").
constexpr size_t kMaxDoubleChars = 32;

// Writes `v` at `p` (room for kMaxDoubleChars) and returns the end.
char* FormatDouble(double v, char* p) {
  if (std::isnan(v)) {
    std::memcpy(p, "NaN", 3);
    return p + 3;
  }
  if (std::isinf(v)) {
    std::memcpy(p, v > 0 ? "+Inf" : "-Inf", 4);
    return p + 4;
  }
  if (std::fabs(v) < 1e15 && v == std::trunc(v)) {
    return std::to_chars(p, p + kMaxDoubleChars, static_cast<int64_t>(v)).ptr;
  }
  return std::to_chars(p, p + kMaxDoubleChars, v, std::chars_format::general, 16).ptr;
}

void AppendDouble(double v, std::string* out) {
  char buf[kMaxDoubleChars];
  out->append(buf, FormatDouble(v, buf));
}

void AppendInt(uint64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

void AppendLabelValue(absl::string_view v, std::string* out) {
  size_t start = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c != '\\' && c != '"' && c != '\n') continue;
    out->append(v.data() + start, i - start);
    out->append(c == '\\' ? "\\\\" : c == '"' ? "\\\"" : "\\n");
    start = i + 1;
  }
  out->append(v.data() + start, v.size() - start);
}

void AppendHelp(absl::string_view v, bool escape_quotes, std::string* out) {
  size_t start = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c != '\\' && c != '\n' && !(escape_quotes && c == '"')) continue;
    out->append(v.data() + start, i - start);
    out->append(c == '\\' ? "\\\\" : c == '"' ? "\\\"" : "\\n");
    start = i + 1;
  }
  out->append(v.data() + start, v.size() - start);
}

// `name{labels[,extra_name="extra_value"]} `; no braces without labels.
// `Label` has string `name` and `value` members (ClientMetric::Label,
// LabelView).
template <typename Label>
void AppendSeries(absl::string_view name, absl::string_view suffix, const Label* labels,
                  size_t n_labels, absl::string_view extra_name, const std::string* extra_value,
                  std::string* out) {
  Put(out, name);
  Put(out, suffix);
  if (n_labels > 0 || extra_value != nullptr) {
    out->push_back('{');
    for (size_t i = 0; i < n_labels; ++i) {
      if (i > 0) out->push_back(',');
      Put(out, labels[i].name);
      out->append("=\"");
      AppendLabelValue(labels[i].value, out);
      out->push_back('"');
    }
    if (extra_value != nullptr) {
      if (n_labels > 0) out->push_back(',');
      Put(out, extra_name);
      out->append("=\"");
      out->append(*extra_value);
      out->push_back('"');
    }
    out->push_back('}');
  }
  out->push_back(' ');
}

void AppendSeries(absl::string_view name, absl::string_view suffix,
                  const std::vector<prometheus::ClientMetric::Label>& labels,
                  absl::string_view extra_name, const std::string* extra_value, std::string* out) {
  AppendSeries(name, suffix, labels.data(), labels.size(), extra_name, extra_value, out);
}

void AppendTimestamp(int64_t timestamp_ms, ExpositionFormat format, std::string* out) {
  if (timestamp_ms == 0) return;
  out->push_back(' ');
  if (format == ExpositionFormat::kText) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof(buf), timestamp_ms);
    out->append(buf, r.ptr);
  } else {
    AppendDouble(static_cast<double>(timestamp_ms) / 1e3, out);
  }
}

// The combined length of an exemplar's label names and values.
size_t ExemplarLabelChars(const Exemplar& e) {
  return (e.trace_id.empty() ? 0 : 8 + e.trace_id.size()) +
         (e.span_id.empty() ? 0 : 7 + e.span_id.size());
}

void AppendExemplar(const Exemplar& e, std::string* out) {
  out->append(" # {");
  bool first = true;
  if (!e.trace_id.empty()) {
    out->append("trace_id=\"");
    AppendLabelValue(e.trace_id, out);
    out->push_back('"');
    first = false;
  }
  if (!e.span_id.empty()) {
    if (!first) out->push_back(',');
    out->append("span_id=\"");
    AppendLabelValue(e.span_id, out);
    out->push_back('"');
  }
  out->append("} ");
  AppendDouble(e.value, out);
  if (e.timestamp_ns > 0) {
    out->push_back(' ');
    AppendInt(static_cast<uint64_t>(e.timestamp_ns / 1'000'000'000), out);
    out->push_back('.');
    const int ms = static_cast<int>((e.timestamp_ns / 1'000'000) % 1000);
    out->push_back(static_cast<char>('0' + ms / 100));
    out->push_back(static_cast<char>('0' + ms / 10 % 10));
    out->push_back(static_cast<char>('0' + ms % 10));
  }
}

// Exemplar lookup key: family name, then the labels sorted by name (then
// value).
template <typename Label>
std::string ExemplarKey(absl::string_view family, const Label* labels, size_t n_labels) {
  absl::InlinedVector<LabelView, 12> sorted;
  for (size_t i = 0; i < n_labels; ++i) sorted.push_back({labels[i].name, labels[i].value});
  std::sort(sorted.begin(), sorted.end(), [](const LabelView& a, const LabelView& b) {
    return a.name != b.name ? a.name < b.name : a.value < b.value;
  });
  std::string key(family);
  for (const LabelView& l : sorted) {
    key.push_back('\0');
    Put(&key, l.name);
    key.push_back('\0');
    Put(&key, l.value);
  }
  return key;
}

absl::string_view TypeName(prometheus::MetricType type, ExpositionFormat format) {
  switch (type) {
    case prometheus::MetricType::Counter:
      return "counter";
    case prometheus::MetricType::Gauge:
      return "gauge";
    case prometheus::MetricType::Histogram:
      return "histogram";
    case prometheus::MetricType::Summary:
      return "summary";
    default:
      return format == ExpositionFormat::kText ? "untyped" : "unknown";
  }
}

// OpenMetrics' unit of a family name, or empty.
absl::string_view UnitOf(absl::string_view family) {
  for (absl::string_view unit :
       {"seconds", "bytes", "ratio", "celsius", "volts", "amperes", "joules"}) {
    if (family.size() > unit.size() + 1 && absl::EndsWith(family, unit) &&
        family[family.size() - unit.size() - 1] == '_') {
      return unit;
    }
  }
  return {};
}

// The names a family's samples are written with.
struct SampleName {
  absl::string_view name;
  absl::string_view suffix;  // "_total" for OpenMetrics counters
};

// The family's HELP, TYPE and (OpenMetrics) UNIT lines.
SampleName WriteHeader(absl::string_view name, absl::string_view help, prometheus::MetricType type,
                       ExpositionFormat format, std::string* out) {
  const bool om = format == ExpositionFormat::kOpenMetrics;
  // The name samples are written with, and the family's announced name.
  SampleName sample{name, {}};
  absl::string_view family_name = name;
  if (om && type == prometheus::MetricType::Counter) {
    if (absl::ConsumeSuffix(&family_name, "_total")) {
      sample.name = family_name;
    }
    sample.suffix = "_total";
  }
  out->append("# HELP ");
  Put(out, family_name);
  out->push_back(' ');
  AppendHelp(help, om, out);
  out->append("\n# TYPE ");
  Put(out, family_name);
  out->push_back(' ');
  Put(out, TypeName(type, format));
  out->push_back('\n');
  if (om) {
    absl::string_view unit = UnitOf(family_name);
    if (!unit.empty()) {
      out->append("# UNIT ");
      Put(out, family_name);
      out->push_back(' ');
      Put(out, unit);
      out->push_back('\n');
    }
  }
  return sample;
}

template <typename Index>
void WriteFamily(const prometheus::MetricFamily& f, const Index* exemplars, ExpositionFormat format,
                 std::string* out) {
  const auto [sample_name, sample_suffix] = WriteHeader(f.name, f.help, f.type, format, out);
  const bool with_exemplars = exemplars != nullptr && exemplars->HasFamily(f.name);
  std::string le;
  for (const prometheus::ClientMetric& m : f.metric) {
    const Exemplar* ex =
        with_exemplars ? exemplars->Find(f.name, m.label.data(), m.label.size()) : nullptr;
    switch (f.type) {
      case prometheus::MetricType::Counter:
        AppendSeries(sample_name, sample_suffix, m.label, {}, nullptr, out);
        AppendDouble(m.counter.value, out);
        AppendTimestamp(m.timestamp_ms, format, out);
        if (ex != nullptr) AppendExemplar(*ex, out);
        out->push_back('\n');
        break;
      case prometheus::MetricType::Gauge:
        AppendSeries(sample_name, {}, m.label, {}, nullptr, out);
        AppendDouble(m.gauge.value, out);
        AppendTimestamp(m.timestamp_ms, format, out);
        out->push_back('\n');
        break;
      case prometheus::MetricType::Histogram: {
        bool inf_written = false;
        bool exemplar_written = false;
        for (const auto& b : m.histogram.bucket) {
          le.clear();
          AppendDouble(b.upper_bound, &le);
          inf_written |= std::isinf(b.upper_bound) && b.upper_bound > 0;
          AppendSeries(sample_name, "_bucket", m.label, "le", &le, out);
          AppendInt(b.cumulative_count, out);
          AppendTimestamp(m.timestamp_ms, format, out);
          if (ex != nullptr && !exemplar_written && ex->value <= b.upper_bound) {
            AppendExemplar(*ex, out);
            exemplar_written = true;
          }
          out->push_back('\n');
        }
        if (!inf_written) {  // both formats require the +Inf bucket
          le = "+Inf";
          AppendSeries(sample_name, "_bucket", m.label, "le", &le, out);
          AppendInt(m.histogram.sample_count, out);
          AppendTimestamp(m.timestamp_ms, format, out);
          out->push_back('\n');
        }
        AppendSeries(sample_name, "_sum", m.label, {}, nullptr, out);
        AppendDouble(m.histogram.sample_sum, out);
        AppendTimestamp(m.timestamp_ms, format, out);
        out->push_back('\n');
        AppendSeries(sample_name, "_count", m.label, {}, nullptr, out);
        AppendInt(m.histogram.sample_count, out);
        AppendTimestamp(m.timestamp_ms, format, out);
        out->push_back('\n');
        break;
      }
      case prometheus::MetricType::Summary: {
        for (const auto& q : m.summary.quantile) {
          le.clear();
          AppendDouble(q.quantile, &le);
          AppendSeries(sample_name, {}, m.label, "quantile", &le, out);
          AppendDouble(q.value, out);
          AppendTimestamp(m.timestamp_ms, format, out);
          out->push_back('\n');
        }
        AppendSeries(sample_name, "_sum", m.label, {}, nullptr, out);
        AppendDouble(m.summary.sample_sum, out);
        AppendTimestamp(m.timestamp_ms, format, out);
        out->push_back('\n');
        AppendSeries(sample_name, "_count", m.label, {}, nullptr, out);
        AppendInt(m.summary.sample_count, out);
        AppendTimestamp(m.timestamp_ms, format, out);
        out->push_back('\n');
        break;
      }
      default:
        AppendSeries(sample_name, {}, m.label, {}, nullptr, out);
        AppendDouble(m.untyped.value, out);
        AppendTimestamp(m.timestamp_ms, format, out);
        out->push_back('\n');
        break;
    }
  }
}

}  // namespace

std::optional<ExpositionFormat> NegotiateFormat(absl::string_view accept) {
  if (absl::StripAsciiWhitespace(accept).empty()) return ExpositionFormat::kText;
  const std::vector<MediaRange> ranges = ParseAccept(accept);
  const Match om = BestMatch(ranges, "application", "openmetrics-text", {"1.0.0"});
  const Match text = BestMatch(ranges, "text", "plain", {"0.0.4"});
  const bool om_ok = om.specificity >= 0 && om.q > 0;
  const bool text_ok = text.specificity >= 0 && text.q > 0;
  if (om_ok && (!text_ok || om.q > text.q || (om.q == text.q && om.order < text.order))) {
    return ExpositionFormat::kOpenMetrics;
  }
  if (text_ok) return ExpositionFormat::kText;
  return std::nullopt;
}

bool AcceptsGzip(absl::string_view accept_encoding) {
  double gzip_q = -1, star_q = -1;
  int n = 0;
  for (absl::string_view item : absl::StrSplit(accept_encoding, ',')) {
    if (++n > kMaxAcceptRanges) break;
    std::vector<absl::string_view> parts = absl::StrSplit(item, ';');
    absl::string_view coding = absl::StripAsciiWhitespace(parts[0]);
    double q = 1.0;
    bool ok = true;
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(parts[i]);
      if (absl::StartsWithIgnoreCase(p, "q=")) ok = ParseQ(p.substr(2), &q);
    }
    if (!ok) continue;
    if (absl::EqualsIgnoreCase(coding, "gzip") || absl::EqualsIgnoreCase(coding, "x-gzip")) {
      gzip_q = std::max(gzip_q, q);
    } else if (coding == "*") {
      star_q = std::max(star_q, q);
    }
  }
  return gzip_q >= 0 ? gzip_q > 0 : star_q > 0;
}

class ExpositionWriter::ExemplarIndex {
 public:
  explicit ExemplarIndex(const std::vector<SeriesExemplar>& exemplars) {
    for (const SeriesExemplar& e : exemplars) {
      if (ExemplarLabelChars(e.exemplar) > 128 || ExemplarLabelChars(e.exemplar) == 0) continue;
      families_.insert(e.family);
      by_series_[ExemplarKey(e.family, e.labels.data(), e.labels.size())] = &e.exemplar;
    }
  }
  bool HasFamily(absl::string_view family) const { return families_.contains(family); }
  template <typename Label>
  const Exemplar* Find(absl::string_view family, const Label* labels, size_t n_labels) const {
    auto it = by_series_.find(ExemplarKey(family, labels, n_labels));
    return it == by_series_.end() ? nullptr : it->second;
  }

 private:
  absl::flat_hash_set<std::string> families_;
  absl::flat_hash_map<std::string, const Exemplar*> by_series_;
};

ExpositionWriter::ExpositionWriter(ExpositionFormat format,
                                   const std::vector<SeriesExemplar>& exemplars, std::string* out)
    : format_(format), out_(out) {
  if (format == ExpositionFormat::kOpenMetrics && !exemplars.empty()) {
    exemplars_ = std::make_unique<ExemplarIndex>(exemplars);
  }
}

ExpositionWriter::~ExpositionWriter() = default;

void ExpositionWriter::Reserve(size_t bytes) { out_->reserve(out_->size() + bytes); }

void ExpositionWriter::WriteFamilies(const std::vector<prometheus::MetricFamily>& families) {
  size_t samples = 0;
  for (const auto& f : families) samples += f.metric.size();
  Reserve(samples * 96 + families.size() * 160);
  for (const auto& f : families) WriteFamily(f, exemplars_.get(), format_, out_);
}

void ExpositionWriter::BeginFamily(absl::string_view name, absl::string_view help,
                                   prometheus::MetricType type) {
  family_start_ = out_->size();
  family_samples_ = 0;
  type_ = type;
  family_exemplars_ = exemplars_ != nullptr && type == prometheus::MetricType::Counter &&
                      exemplars_->HasFamily(name);
  if (family_exemplars_) family_.assign(name.data(), name.size());
  const SampleName sample = WriteHeader(name, help, type, format_, out_);
  // Views into `name`: the caller keeps it alive until EndFamily.
  sample_name_ = sample.name;
  sample_suffix_ = sample.suffix;
}

void ExpositionWriter::AddSample(const LabelView* labels, size_t n_labels, double value) {
  ++family_samples_;
  // The line is put together in a buffer on the stack and appended once (one
  // capacity check and copy per line instead of one per piece); a line that
  // might not fit goes the piecewise way. Same bytes either way.
  constexpr size_t kLineBuffer = 1024;
  size_t bound = sample_name_.size() + sample_suffix_.size() + 4 + kMaxDoubleChars;
  for (size_t i = 0; i < n_labels && bound <= kLineBuffer; ++i) {
    bound += labels[i].name.size() + 2 * labels[i].value.size() + 4;  // ,name="value"
  }
  if (bound > kLineBuffer) {
    AppendSeries(sample_name_, sample_suffix_, labels, n_labels, {}, nullptr, out_);
    AppendDouble(value, out_);
  } else {
    char buf[kLineBuffer];
    char* p = buf;
    auto put = [&p](absl::string_view v) {
      if (v.empty()) return;  // an empty view's data() may be null: no memcpy
      std::memcpy(p, v.data(), v.size());
      p += v.size();
    };
    put(sample_name_);
    put(sample_suffix_);
    if (n_labels > 0) {
      *p++ = '{';
      for (size_t i = 0; i < n_labels; ++i) {
        if (i > 0) *p++ = ',';
        put(labels[i].name);
        *p++ = '=';
        *p++ = '"';
        for (const char c : labels[i].value) {  // AppendLabelValue
          if (c == '\\' || c == '"') {
            *p++ = '\\';
            *p++ = c;
          } else if (c == '\n') {
            *p++ = '\\';
            *p++ = 'n';
          } else {
            *p++ = c;
          }
        }
        *p++ = '"';
      }
      *p++ = '}';
    }
    *p++ = ' ';
    p = FormatDouble(value, p);
    out_->append(buf, p);
  }
  if (family_exemplars_) {
    if (const Exemplar* ex = exemplars_->Find(family_, labels, n_labels); ex != nullptr) {
      AppendExemplar(*ex, out_);
    }
  }
  out_->push_back('\n');
}

size_t ExpositionWriter::EndFamily() {
  if (family_samples_ == 0) out_->resize(family_start_);
  family_exemplars_ = false;
  return family_samples_;
}

void ExpositionWriter::Finish() {
  if (format_ == ExpositionFormat::kOpenMetrics) out_->append("# EOF\n");
}

void WriteExposition(const std::vector<prometheus::MetricFamily>& families,
                     const std::vector<SeriesExemplar>& exemplars, ExpositionFormat format,
                     std::string* out) {
  ExpositionWriter writer(format, exemplars, out);
  writer.WriteFamilies(families);
  writer.Finish();
}

std::string Gzip(absl::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return {};
  }
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t written = out.size() - zs.avail_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return {};
  out.resize(written);
  return out;
}

ScrapeOutput RenderScrape(const std::vector<prometheus::MetricFamily>& families,
                          const std::vector<SeriesExemplar>& exemplars, absl::string_view accept,
                          absl::string_view accept_encoding) {
  return RenderScrape(accept, accept_encoding, [&](ExpositionFormat format, std::string* body) {
    WriteExposition(families, exemplars, format, body);
  });
}

ScrapeOutput RenderScrape(absl::string_view accept, absl::string_view accept_encoding,
                          absl::FunctionRef<void(ExpositionFormat, std::string*)> write_body) {
  ScrapeOutput o;
  const std::optional<ExpositionFormat> format = NegotiateFormat(accept);
  if (!format.has_value()) {
    o.status = 406;
    o.content_type = "text/plain; charset=utf-8";
    o.body =
        "406 Not Acceptable: /metrics serves text/plain;version=0.0.4 and "
        "application/openmetrics-text;version=1.0.0\n";
    return o;
  }
  o.content_type = std::string(*format == ExpositionFormat::kOpenMetrics ? kOpenMetricsContentType
                                                                         : kTextContentType);
  write_body(*format, &o.body);
  if (AcceptsGzip(accept_encoding)) {
    std::string z = Gzip(o.body);
    if (!z.empty()) {
      o.body = std::move(z);
      o.content_encoding = "gzip";
    }
  }
  return o;
}

}  // namespace fabricscope
