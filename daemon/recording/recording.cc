#include "daemon/recording/recording.h"

#include <cmath>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "daemon/correlate/stall_learner.h"

namespace fabricscope {
namespace {

class JsonReader {
 public:
  explicit JsonReader(absl::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    JsonValue v;
    if (auto s = Parse(&v, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("trailing characters");
    return v;
  }

 private:
  absl::Status Error(absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid JSON at column ", pos_ + 1, ": ", what));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(absl::string_view lit) {
    if (text_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    out->clear();
    while (pos_ < text_.size()) {
      char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return Error("bad \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // surrogate pair
            uint32_t lo;
            if (!Consume("\\u") || !Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) {
              return Error("bad surrogate pair");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
    return Error("unterminated string");
  }

  bool Hex4(uint32_t* cp) {
    if (pos_ + 4 > text_.size()) return false;
    *cp = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      int d = absl::ascii_isdigit(c)   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return false;
      *cp = *cp * 16 + d;
    }
    return true;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  absl::Status Parse(JsonValue* v, int depth) {
    if (depth > 32) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    const size_t start = pos_;
    const char c = text_[pos_];
    absl::Status s;
    if (c == '{') {
      v->type = JsonValue::kObject;
      ++pos_;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
      } else {
        while (true) {
          SkipSpace();
          if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a key");
          std::string key;
          if (s = ParseString(&key); !s.ok()) return s;
          SkipSpace();
          if (!Consume(":")) return Error("expected ':'");
          JsonValue child;
          if (s = Parse(&child, depth + 1); !s.ok()) return s;
          v->fields.emplace_back(std::move(key), std::move(child));
          SkipSpace();
          if (Consume(",")) continue;
          if (Consume("}")) break;
          return Error("expected ',' or '}'");
        }
      }
    } else if (c == '[') {
      v->type = JsonValue::kArray;
      ++pos_;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
      } else {
        while (true) {
          JsonValue child;
          if (s = Parse(&child, depth + 1); !s.ok()) return s;
          v->items.push_back(std::move(child));
          SkipSpace();
          if (Consume(",")) continue;
          if (Consume("]")) break;
          return Error("expected ',' or ']'");
        }
      }
    } else if (c == '"') {
      v->type = JsonValue::kString;
      if (s = ParseString(&v->str); !s.ok()) return s;
    } else if (Consume("true") || Consume("false")) {
      v->type = JsonValue::kBool;
    } else if (Consume("null")) {
      v->type = JsonValue::kNull;
    } else if (c == '-' || absl::ascii_isdigit(c)) {
      v->type = JsonValue::kNumber;
      ++pos_;
      while (pos_ < text_.size() &&
             (absl::ascii_isdigit(text_[pos_]) || text_[pos_] == '.' || text_[pos_] == 'e' ||
              text_[pos_] == 'E' || text_[pos_] == '+' || text_[pos_] == '-')) {
        ++pos_;
      }
    } else {
      return Error("unexpected character");
    }
    v->raw = text_.substr(start, pos_ - start);
    return absl::OkStatus();
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::Status HexField(const JsonValue& obj, absl::string_view key, size_t bytes, bool required,
                      std::string* out) {
  const JsonValue* v = obj.Get(key);
  if (v == nullptr || v->type == JsonValue::kNull ||
      (v->type == JsonValue::kString && v->str.empty() && !required)) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("missing \"", key, "\""));
    return absl::OkStatus();
  }
  if (v->type != JsonValue::kString || v->str.size() != 2 * bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\" must be ", 2 * bytes, " hex digits"));
  }
  for (char c : v->str) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be hex"));
    }
  }
  *out = absl::HexStringToBytes(v->str);
  return absl::OkStatus();
}

absl::Status Uint64Field(const JsonValue& obj, absl::string_view key, bool required,
                         uint64_t* out) {
  const JsonValue* v = obj.Get(key);
  if (v == nullptr || v->type == JsonValue::kNull) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("missing \"", key, "\""));
    return absl::OkStatus();
  }
  absl::string_view text = v->type == JsonValue::kString ? absl::string_view(v->str) : v->raw;
  if ((v->type != JsonValue::kNumber && v->type != JsonValue::kString) ||
      !absl::SimpleAtoi(text, out)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a non-negative integer"));
  }
  return absl::OkStatus();
}

std::string StringOf(const JsonValue& v) {
  return v.type == JsonValue::kString ? v.str : std::string(v.raw);
}

v1::SpanKind KindFromName(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "request") return v1::SPAN_KIND_REQUEST;
  if (n == "prefill") return v1::SPAN_KIND_PREFILL;
  if (n == "decode_step") return v1::SPAN_KIND_DECODE_STEP;
  if (n == "kv_transfer") return v1::SPAN_KIND_KV_TRANSFER;
  if (n == "collective") return v1::SPAN_KIND_COLLECTIVE;
  if (n == "other") return v1::SPAN_KIND_OTHER;
  return v1::SPAN_KIND_UNSPECIFIED;
}

}  // namespace

absl::StatusOr<JsonValue> ParseJson(absl::string_view text) {
  JsonReader reader(text);
  return reader.ParseDocument();
}

absl::StatusOr<v1::Span> ParseSpanJson(absl::string_view line) {
  JsonReader reader(line);
  auto doc = reader.ParseDocument();
  if (!doc.ok()) return doc.status();
  const JsonValue* obj = &*doc;
  if (obj->type == JsonValue::kObject) {
    if (const JsonValue* wrapped = obj->Get("span"); wrapped != nullptr) obj = wrapped;
  }
  if (obj->type != JsonValue::kObject) {
    return absl::InvalidArgumentError("expected a JSON object per line");
  }
  v1::Span span;
  if (auto s = HexField(*obj, "trace_id", 16, true, span.mutable_trace_id()); !s.ok()) return s;
  if (auto s = HexField(*obj, "span_id", 8, true, span.mutable_span_id()); !s.ok()) return s;
  if (auto s = HexField(*obj, "parent_span_id", 8, false, span.mutable_parent_span_id()); !s.ok()) {
    return s;
  }
  if (const JsonValue* name = obj->Get("name"); name != nullptr) span.set_name(StringOf(*name));
  if (const JsonValue* kind = obj->Get("kind"); kind != nullptr) {
    if (kind->type != JsonValue::kString || (KindFromName(kind->str) == v1::SPAN_KIND_UNSPECIFIED &&
                                             !kind->str.empty() && kind->str != "unspecified")) {
      return absl::InvalidArgumentError(
          "\"kind\" must be one of request, prefill, decode_step, kv_transfer, collective, other");
    }
    span.set_kind(KindFromName(kind->str));
  }
  uint64_t start = 0, end = 0;
  if (auto s = Uint64Field(*obj, "start_unix_nano", true, &start); !s.ok()) return s;
  if (auto s = Uint64Field(*obj, "end_unix_nano", true, &end); !s.ok()) return s;
  span.set_start_unix_nano(start);
  span.set_end_unix_nano(end);
  if (const JsonValue* attrs = obj->Get("attributes"); attrs != nullptr) {
    if (attrs->type != JsonValue::kObject && attrs->type != JsonValue::kNull) {
      return absl::InvalidArgumentError("\"attributes\" must be an object");
    }
    for (const auto& [k, v] : attrs->fields) {
      auto* a = span.add_attributes();
      a->set_key(k);
      a->set_value(StringOf(v));
    }
  }
  if (const JsonValue* v = obj->Get("rdma_device"); v != nullptr && v->type == JsonValue::kString) {
    span.set_rdma_device(v->str);
  }
  uint64_t port = 0;
  if (auto s = Uint64Field(*obj, "rdma_port", false, &port); !s.ok()) return s;
  span.set_rdma_port(static_cast<uint32_t>(port));
  for (const char* key : {"network_interface_name", "netdev"}) {
    if (const JsonValue* v = obj->Get(key); v != nullptr && v->type == JsonValue::kString) {
      span.set_network_interface_name(v->str);
    }
  }
  for (const char* key : {"stall", "stall_flag"}) {
    if (const JsonValue* v = obj->Get(key); v != nullptr && v->type == JsonValue::kBool) {
      span.set_stall(span.stall() || v->raw == "true");
    }
  }
  return span;
}

namespace {

absl::Status StringField(const JsonValue& obj, absl::string_view key, bool required,
                         std::string* out) {
  const JsonValue* v = obj.Get(key);
  if (v == nullptr || v->type == JsonValue::kNull) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("missing \"", key, "\""));
    return absl::OkStatus();
  }
  if (v->type != JsonValue::kString) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a string"));
  }
  *out = v->str;
  return absl::OkStatus();
}

std::string Hex(const std::string& bytes) { return absl::BytesToHexString(bytes); }

absl::Status Int64Field(const JsonValue& obj, absl::string_view key, bool required, int64_t* out) {
  uint64_t v = 0;
  if (auto s = Uint64Field(obj, key, required, &v); !s.ok()) return s;
  if (v > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" too large"));
  }
  *out = static_cast<int64_t>(v);
  return absl::OkStatus();
}

absl::Status PortField(const JsonValue& obj, uint32_t* out) {
  uint64_t port = 0;
  if (auto s = Uint64Field(obj, "port", false, &port); !s.ok()) return s;
  if (port > UINT32_MAX) return absl::InvalidArgumentError("\"port\" too large");
  *out = static_cast<uint32_t>(port);
  return absl::OkStatus();
}

// One episode of an incident line: a DetectorEvent's fields.
absl::Status ParseEpisode(const JsonValue& obj, DetectorEvent* e) {
  if (obj.type != JsonValue::kObject) {
    return absl::InvalidArgumentError("\"episodes\" must hold objects");
  }
  if (auto s = Uint64Field(obj, "id", false, &e->id); !s.ok()) return s;
  for (auto [key, field] :
       {std::pair{"detector", &e->detector}, std::pair{"kind", &e->kind},
        std::pair{"device", &e->device}, std::pair{"netdev", &e->netdev},
        std::pair{"priority", &e->priority}, std::pair{"direction", &e->direction},
        std::pair{"summary", &e->summary}}) {
    if (auto s = StringField(obj, key, false, field); !s.ok()) return s;
  }
  if (auto s = PortField(obj, &e->port); !s.ok()) return s;
  if (auto s = Int64Field(obj, "start_unix_nano", true, &e->start_unix_nano); !s.ok()) return s;
  if (auto s = Int64Field(obj, "end_unix_nano", false, &e->end_unix_nano); !s.ok()) return s;
  if (auto s = Int64Field(obj, "detected_unix_nano", false, &e->detected_unix_nano); !s.ok()) {
    return s;
  }
  if (const JsonValue* peak = obj.Get("peak"); peak != nullptr && peak->type != JsonValue::kNull) {
    if (peak->type != JsonValue::kNumber || !absl::SimpleAtod(peak->raw, &e->peak)) {
      return absl::InvalidArgumentError("\"peak\" must be a number");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseIncident(const JsonValue& obj, IncidentHeader* h) {
  if (obj.type != JsonValue::kObject) {
    return absl::InvalidArgumentError("\"incident\" must be an object");
  }
  if (auto s = Int64Field(obj, "from_unix_nano", true, &h->from_unix_nano); !s.ok()) return s;
  if (auto s = Int64Field(obj, "to_unix_nano", true, &h->to_unix_nano); !s.ok()) return s;
  if (auto s = StringField(obj, "device", false, &h->device); !s.ok()) return s;
  if (auto s = StringField(obj, "netdev", false, &h->netdev); !s.ok()) return s;
  if (auto s = StringField(obj, "closed", false, &h->closed); !s.ok()) return s;
  if (auto s = PortField(obj, &h->port); !s.ok()) return s;
  if (auto s = Uint64Field(obj, "episodes_omitted", false, &h->episodes_omitted); !s.ok()) {
    return s;
  }
  if (const JsonValue* eps = obj.Get("episodes"); eps != nullptr) {
    if (eps->type != JsonValue::kArray) {
      return absl::InvalidArgumentError("\"episodes\" must be an array");
    }
    for (const JsonValue& item : eps->items) {
      DetectorEvent e;
      if (auto s = ParseEpisode(item, &e); !s.ok()) return s;
      h->episodes.push_back(std::move(e));
    }
  }
  return absl::OkStatus();
}

std::string JsonDouble(double v) { return std::isfinite(v) ? absl::StrCat(v) : "0"; }

absl::Status DoubleField(const JsonValue& obj, absl::string_view key, double* out) {
  const JsonValue* v = obj.Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (v->type != JsonValue::kNumber || !absl::SimpleAtod(v->raw, out) || !std::isfinite(*out)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a finite number"));
  }
  return absl::OkStatus();
}

// A span line's "judgement" (FormatSpanLine).
absl::Status ParseJudgement(const JsonValue& obj, StallJudgement* j) {
  if (obj.type != JsonValue::kObject) {
    return absl::InvalidArgumentError("\"judgement\" must be an object");
  }
  *j = StallJudgement{};
  j->judged = true;
  if (const JsonValue* stall = obj.Get("stall"); stall != nullptr) {
    if (stall->type != JsonValue::kBool) {
      return absl::InvalidArgumentError("\"judgement\".\"stall\" must be true or false");
    }
    j->stall = stall->raw == "true";
  }
  std::string source, cost_kind;
  if (auto s = StringField(obj, "source", false, &source); !s.ok()) return s;
  if (auto s = StringField(obj, "cost_kind", false, &cost_kind); !s.ok()) return s;
  if (!source.empty()) {
    std::optional<StallSource> parsed = ParseStallSourceName(source);
    if (!parsed.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown judgement source \"", source, "\""));
    }
    j->source = *parsed;
  }
  if (!cost_kind.empty()) {
    std::optional<StallCost> parsed = ParseStallCostName(cost_kind);
    if (!parsed.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown cost kind \"", cost_kind, "\""));
    }
    j->cost_kind = *parsed;
  }
  for (auto [key, field] : {std::pair{"cost", &j->cost}, std::pair{"bound", &j->bound},
                            std::pair{"median", &j->median}, std::pair{"p99", &j->p99}}) {
    if (auto s = DoubleField(obj, key, field); !s.ok()) return s;
  }
  if (auto s = Uint64Field(obj, "samples", false, &j->samples); !s.ok()) return s;
  return StringField(obj, "key", false, &j->key);
}

const char* KindName(v1::SpanKind k) {
  switch (k) {
    case v1::SPAN_KIND_REQUEST:
      return "request";
    case v1::SPAN_KIND_PREFILL:
      return "prefill";
    case v1::SPAN_KIND_DECODE_STEP:
      return "decode_step";
    case v1::SPAN_KIND_KV_TRANSFER:
      return "kv_transfer";
    case v1::SPAN_KIND_COLLECTIVE:
      return "collective";
    case v1::SPAN_KIND_OTHER:
      return "other";
    default:
      return "";
  }
}

}  // namespace

absl::StatusOr<RecordingLine> ParseRecordingLine(absl::string_view line) {
  auto doc = ParseJson(line);
  if (!doc.ok()) return doc.status();
  if (doc->type != JsonValue::kObject) {
    return absl::InvalidArgumentError("expected a JSON object per line");
  }
  RecordingLine out;
  if (const JsonValue* incident = doc->Get("incident"); incident != nullptr) {
    out.type = RecordingLine::kIncident;
    if (auto s = ParseIncident(*incident, &out.incident); !s.ok()) return s;
    return out;
  }
  if (const JsonValue* header = doc->Get("recording"); header != nullptr) {
    auto h = RecordingHeaderFromJson(*header);
    if (!h.ok()) return h.status();
    out.type = RecordingLine::kHeader;
    out.header = *std::move(h);
    return out;
  }
  if (doc->Get("span") != nullptr) {
    auto span = ParseSpanJson(line);
    if (!span.ok()) return span.status();
    out.type = RecordingLine::kSpan;
    out.span = *std::move(span);
    if (const JsonValue* j = doc->Get("judgement"); j != nullptr) {
      if (auto st = ParseJudgement(*j, &out.judgement); !st.ok()) return st;
    }
    return out;
  }
  out.type = RecordingLine::kSample;
  uint64_t ts = 0, port = 0;
  if (auto s = Uint64Field(*doc, "ts_ns", true, &ts); !s.ok()) return s;
  if (ts > static_cast<uint64_t>(INT64_MAX))
    return absl::InvalidArgumentError("\"ts_ns\" too large");
  out.ts_ns = static_cast<int64_t>(ts);
  if (auto s = Uint64Field(*doc, "value", true, &out.value); !s.ok()) return s;
  if (auto s = Uint64Field(*doc, "port", false, &port); !s.ok()) return s;
  if (port > UINT32_MAX) return absl::InvalidArgumentError("\"port\" too large");
  out.key.port = static_cast<uint32_t>(port);
  if (auto s = StringField(*doc, "source", true, &out.key.source); !s.ok()) return s;
  if (auto s = StringField(*doc, "name", true, &out.key.name); !s.ok()) return s;
  if (auto s = StringField(*doc, "device", false, &out.key.device); !s.ok()) return s;
  if (auto s = StringField(*doc, "netdev", false, &out.key.netdev); !s.ok()) return s;
  if (out.key.source.empty() || out.key.name.empty()) {
    return absl::InvalidArgumentError("\"source\" and \"name\" must not be empty");
  }
  return out;
}

std::string FormatSampleLine(int64_t ts_ns, const SeriesKey& key, uint64_t value) {
  std::string out = absl::StrCat("{\"ts_ns\":", ts_ns, ",\"device\":");
  AppendJsonString(&out, key.device);
  absl::StrAppend(&out, ",\"port\":", key.port, ",\"netdev\":");
  AppendJsonString(&out, key.netdev);
  out.append(",\"source\":");
  AppendJsonString(&out, key.source);
  out.append(",\"name\":");
  AppendJsonString(&out, key.name);
  absl::StrAppend(&out, ",\"value\":", value, "}");
  return out;
}

std::string FormatSpanJson(const v1::Span& span) {
  std::string out = absl::StrCat("{\"trace_id\":\"", Hex(span.trace_id()), "\",\"span_id\":\"",
                                 Hex(span.span_id()), "\"");
  if (!span.parent_span_id().empty()) {
    absl::StrAppend(&out, ",\"parent_span_id\":\"", Hex(span.parent_span_id()), "\"");
  }
  out.append(",\"name\":");
  AppendJsonString(&out, span.name());
  absl::StrAppend(&out, ",\"kind\":\"", KindName(span.kind()),
                  "\",\"start_unix_nano\":", span.start_unix_nano(),
                  ",\"end_unix_nano\":", span.end_unix_nano(), ",\"attributes\":{");
  for (int i = 0; i < span.attributes_size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendJsonString(&out, span.attributes(i).key());
    out.push_back(':');
    AppendJsonString(&out, span.attributes(i).value());
  }
  out.append("}}");
  return out;
}

const DetectorEvent* IncidentHeader::Headline() const {
  const DetectorEvent* best = nullptr;
  int64_t best_length = 0;
  for (const DetectorEvent& e : episodes) {
    const int64_t length = (e.active() ? to_unix_nano : e.end_unix_nano) - e.start_unix_nano;
    if (best == nullptr || length > best_length ||
        (length == best_length && e.start_unix_nano < best->start_unix_nano)) {
      best = &e;
      best_length = length;
    }
  }
  return best;
}

std::string FormatIncidentLine(const IncidentHeader& h) {
  std::string out = absl::StrCat("{\"incident\":{\"from_unix_nano\":", h.from_unix_nano,
                                 ",\"to_unix_nano\":", h.to_unix_nano, ",\"device\":");
  AppendJsonString(&out, h.device);
  absl::StrAppend(&out, ",\"port\":", h.port, ",\"netdev\":");
  AppendJsonString(&out, h.netdev);
  out.append(",\"closed\":");
  AppendJsonString(&out, h.closed);
  out.append(",\"episodes\":[");
  for (size_t i = 0; i < h.episodes.size(); ++i) {
    const DetectorEvent& e = h.episodes[i];
    absl::StrAppend(&out, i > 0 ? "," : "", "{\"id\":", e.id);
    for (auto [key, value] : {std::pair{"detector", &e.detector}, std::pair{"kind", &e.kind},
                              std::pair{"device", &e.device}}) {
      absl::StrAppend(&out, ",\"", key, "\":");
      AppendJsonString(&out, *value);
    }
    absl::StrAppend(&out, ",\"port\":", e.port);
    for (auto [key, value] : {std::pair{"netdev", &e.netdev}, std::pair{"priority", &e.priority},
                              std::pair{"direction", &e.direction}}) {
      absl::StrAppend(&out, ",\"", key, "\":");
      AppendJsonString(&out, *value);
    }
    absl::StrAppend(&out, ",\"start_unix_nano\":", e.start_unix_nano,
                    ",\"end_unix_nano\":", e.active() ? "null" : absl::StrCat(e.end_unix_nano),
                    ",\"detected_unix_nano\":", e.detected_unix_nano,
                    ",\"peak\":", JsonDouble(e.peak), ",\"summary\":");
    AppendJsonString(&out, e.summary);
    out.push_back('}');
  }
  absl::StrAppend(&out, "],\"episodes_omitted\":", h.episodes_omitted, "}}");
  return out;
}

std::string FormatSpanLine(const v1::Span& span, const StallJudgement* judgement) {
  std::string out = absl::StrCat("{\"span\":", FormatSpanJson(span));
  if (judgement != nullptr && judgement->judged) {
    const StallJudgement& j = *judgement;
    absl::StrAppend(&out, ",\"judgement\":{\"stall\":", j.stall ? "true" : "false",
                    ",\"source\":\"", StallSourceName(j.source), "\",\"cost_kind\":\"",
                    StallCostName(j.cost_kind), "\",\"cost\":", JsonDouble(j.cost),
                    ",\"bound\":", JsonDouble(j.bound), ",\"median\":", JsonDouble(j.median),
                    ",\"p99\":", JsonDouble(j.p99), ",\"samples\":", j.samples, ",\"key\":");
    AppendJsonString(&out, j.key);
    out.push_back('}');
  }
  out.push_back('}');
  return out;
}

}  // namespace fabricscope
