#include "tools/fabricscope/push.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "fabricscope/v1/ingest.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"

namespace fabricscope::cli {
namespace {

// A minimal JSON reader, enough for one span object per line. Values keep
// their raw text so that non-string attribute values can be sent verbatim.
struct JsonValue {
  enum Type { kNull, kBool, kNumber, kString, kArray, kObject } type = kNull;
  std::string str;                                        // decoded string (kString)
  absl::string_view raw;                                  // the value's JSON text
  std::vector<std::pair<std::string, JsonValue>> fields;  // kObject
  std::vector<JsonValue> items;                           // kArray

  const JsonValue* Get(absl::string_view key) const {
    for (const auto& [k, v] : fields) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

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

int Usage() {
  std::fputs(
      "usage: fabricscope [--server=HOST:PORT] [--output=human|json] push [--batch=N] "
      "< spans.jsonl\n",
      stderr);
  return 2;
}

}  // namespace

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

int RunPush(const CliContext& ctx, const std::vector<std::string>& args) {
  size_t batch = 512;
  for (const std::string& a : args) {
    absl::string_view v = a;
    if (absl::ConsumePrefix(&v, "--batch=")) {
      if (!absl::SimpleAtoi(v, &batch) || batch == 0 || batch > 100000) {
        std::fputs("fabricscope push: --batch must be from 1 to 100000\n", stderr);
        return 2;
      }
    } else {
      return Usage();
    }
  }
  // Read and parse all input first: bad input sends nothing.
  std::vector<v1::Span> spans;
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    auto span = ParseSpanJson(line);
    if (!span.ok()) {
      std::fprintf(stderr, "fabricscope push: stdin line %zu: %s\n", line_no,
                   std::string(span.status().message()).c_str());
      return 2;
    }
    spans.push_back(*std::move(span));
  }

  auto channel = grpc::CreateChannel(ctx.server, grpc::InsecureChannelCredentials());
  auto stub = v1::Ingest::NewStub(channel);
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::PushResponse response;
  auto writer = stub->PushStream(&call, &response);
  for (size_t i = 0; i < spans.size(); i += batch) {
    v1::PushRequest req;
    for (size_t j = i; j < std::min(spans.size(), i + batch); ++j) *req.add_spans() = spans[j];
    if (!writer->Write(req)) break;  // the server ended the call; Finish() says why
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "fabricscope push: %s: %s (%s)\n", ctx.server.c_str(),
                 status.error_message().c_str(),
                 status.error_code() == grpc::StatusCode::UNAVAILABLE ? "is the daemon running?"
                 : status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED
                     ? "daemon overloaded; retry later"
                     : "request rejected");
    return 1;
  }
  if (ctx.output == "json") {
    std::string json;
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    opts.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(response, &json, opts);
    std::printf("%s\n", json.c_str());
  } else {
    std::printf("accepted %llu, rejected %llu of %zu spans\n",
                static_cast<unsigned long long>(response.accepted_spans()),
                static_cast<unsigned long long>(response.rejected_spans()), spans.size());
    for (const v1::SpanRejection& r : response.rejections()) {
      const std::string& full = v1::RejectionReason_Name(r.reason());
      absl::string_view reason = full;
      absl::ConsumePrefix(&reason, "REJECTION_REASON_");
      std::printf("  span %llu (input line order): %s: %s\n",
                  static_cast<unsigned long long>(r.index()), absl::AsciiStrToLower(reason).c_str(),
                  r.message().c_str());
    }
  }
  return response.rejected_spans() == 0 ? 0 : 1;
}

}  // namespace fabricscope::cli
