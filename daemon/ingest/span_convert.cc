#include "daemon/ingest/span_convert.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/spans/genai.h"

namespace fabricscope {
namespace {

namespace otlp_common = opentelemetry::proto::common::v1;
namespace otlp_trace = opentelemetry::proto::trace::v1;

constexpr int kMaxAnyValueDepth = 8;

template <size_t N>
bool CopyId(const std::string& bytes, std::array<uint8_t, N>* out) {
  if (bytes.size() != N) return false;
  std::memcpy(out->data(), bytes.data(), N);
  return true;
}

RejectReason ConvertIds(const std::string& trace_id, const std::string& span_id,
                        const std::string& parent_span_id, Span* out, std::string* detail) {
  if (!CopyId(trace_id, &out->trace_id)) {
    if (detail) *detail = absl::StrCat("trace_id must be 16 bytes, got ", trace_id.size());
    return RejectReason::kInvalidIds;
  }
  if (!CopyId(span_id, &out->span_id)) {
    if (detail) *detail = absl::StrCat("span_id must be 8 bytes, got ", span_id.size());
    return RejectReason::kInvalidIds;
  }
  if (parent_span_id.empty()) {
    out->parent_span_id = SpanId{};
  } else if (!CopyId(parent_span_id, &out->parent_span_id)) {
    if (detail) {
      *detail =
          absl::StrCat("parent_span_id must be empty or 8 bytes, got ", parent_span_id.size());
    }
    return RejectReason::kInvalidIds;
  }
  return RejectReason::kNone;
}

// The wire's unsigned nanoseconds into the span's signed ones. A time past
// INT64_MAX (year 2262) is in the future, whatever the limits: it must not
// wrap to a negative time and read as too old.
RejectReason ConvertTimes(uint64_t start, uint64_t end, Span* out, std::string* detail) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (start > kMax || end > kMax) {
    if (detail) {
      *detail = absl::StrCat(end > kMax ? "end" : "start", " time ", end > kMax ? end : start,
                             "ns is past the year 2262");
    }
    return RejectReason::kInFuture;
  }
  out->start_unix_nano = static_cast<int64_t>(start);
  out->end_unix_nano = static_cast<int64_t>(end);
  return RejectReason::kNone;
}

RejectReason CheckAttributeCount(int count, const IngestLimits& limits, std::string* detail) {
  if (count > static_cast<int>(limits.max_attributes_per_span)) {
    if (detail) {
      *detail = absl::StrCat(count, " attributes; the limit is ", limits.max_attributes_per_span,
                             " (--max-attributes-per-span)");
    }
    return RejectReason::kTooManyAttributes;
  }
  return RejectReason::kNone;
}

// What both converters check first: the ids, then the attribute count.
RejectReason ConvertIdsAndCount(const std::string& trace_id, const std::string& span_id,
                                const std::string& parent_span_id, int attributes,
                                const IngestLimits& limits, Span* out, std::string* detail) {
  if (auto r = ConvertIds(trace_id, span_id, parent_span_id, out, detail);
      r != RejectReason::kNone) {
    return r;
  }
  return CheckAttributeCount(attributes, limits, detail);
}

// The span's name and times (after every length check).
RejectReason SetNameAndTimes(const std::string& name, uint64_t start, uint64_t end, Span* out,
                             std::string* detail) {
  out->name = name;
  return ConvertTimes(start, end, out, detail);
}

RejectReason AttributeTooLarge(absl::string_view key, const IngestLimits& limits,
                               std::string* detail) {
  if (detail) {
    *detail = absl::StrCat("attribute \"", key.substr(0, 64), "\" is longer than ",
                           limits.max_attribute_bytes, " bytes (--max-attribute-bytes)");
  }
  return RejectReason::kAttributeTooLarge;
}

// Reads the well-known attributes into the span's typed fields and sets the
// kind. `explicit_kind` is the native kind field (kUnspecified for OTLP).
void ApplyWellKnown(SpanKind explicit_kind, const SpanKindClassifier& classifier, Span* span) {
  SpanKind attr_kind = SpanKind::kUnspecified;
  for (const auto& [key, value] : span->attributes) {
    if (key.empty() || (key[0] != 'f' && key[0] != 'r' && key[0] != 'n' && key[0] != 'p')) {
      continue;
    }
    if (key == "fabricscope.kind") {
      if (auto k = ParseSpanKindName(value); k.has_value()) attr_kind = *k;
    } else if (key == "fabricscope.stall") {
      if (absl::EqualsIgnoreCase(value, "true")) span->stall_flag = true;
    } else if (key == "fabricscope.gpu") {
      if (span->gpu.empty()) span->gpu = std::string(absl::StripAsciiWhitespace(value));
    } else if (key == "rdma.device") {
      if (span->rdma_device.empty()) span->rdma_device = value;
    } else if (key == "rdma.port") {
      uint32_t port;
      if (span->rdma_port == 0 && absl::SimpleAtoi(value, &port)) span->rdma_port = port;
    } else if (key == "network.interface.name") {
      if (span->netdev.empty()) span->netdev = value;
    } else if (key == "process.pid") {
      if (span->pid == 0) span->pid = ParseProcessPid(value);
    }
  }
  if (explicit_kind != SpanKind::kUnspecified) {
    span->kind = explicit_kind;
  } else if (attr_kind != SpanKind::kUnspecified) {
    span->kind = attr_kind;
  } else {
    span->kind = classifier.Classify(span->name);
  }
  // GenAI request spans: kind, phase and judged window (daemon/spans/genai.h).
  span->window_start_unix_nano = span->window_end_unix_nano = 0;
  span->phase.clear();
  span->judgement = StallJudgement{};
  ApplyGenAiRequest(span);
}

SpanKind FromNativeKind(v1::SpanKind k) {
  switch (k) {
    case v1::SPAN_KIND_REQUEST:
      return SpanKind::kRequest;
    case v1::SPAN_KIND_PREFILL:
      return SpanKind::kPrefill;
    case v1::SPAN_KIND_DECODE_STEP:
      return SpanKind::kDecodeStep;
    case v1::SPAN_KIND_KV_TRANSFER:
      return SpanKind::kKvTransfer;
    case v1::SPAN_KIND_COLLECTIVE:
      return SpanKind::kCollective;
    case v1::SPAN_KIND_OTHER:
      return SpanKind::kOther;
    default:
      return SpanKind::kUnspecified;
  }
}

bool Append(absl::string_view piece, size_t max_bytes, std::string* out) {
  if (out->size() + piece.size() > max_bytes) return false;
  out->append(piece.data(), piece.size());
  return true;
}

bool RenderAnyValue(const otlp_common::AnyValue& v, size_t max_bytes, int depth, std::string* out) {
  if (depth > kMaxAnyValueDepth) return Append("...", max_bytes, out);
  switch (v.value_case()) {
    case otlp_common::AnyValue::kStringValue:
      return Append(v.string_value(), max_bytes, out);
    case otlp_common::AnyValue::kBoolValue:
      return Append(v.bool_value() ? "true" : "false", max_bytes, out);
    case otlp_common::AnyValue::kIntValue:
      return Append(absl::StrCat(v.int_value()), max_bytes, out);
    case otlp_common::AnyValue::kDoubleValue: {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof(buf), v.double_value());
      return Append(absl::string_view(buf, r.ptr - buf), max_bytes, out);
    }
    case otlp_common::AnyValue::kBytesValue:
      if (out->size() + 2 * v.bytes_value().size() > max_bytes) return false;
      return Append(HexEncode(v.bytes_value()), max_bytes, out);
    case otlp_common::AnyValue::kArrayValue: {
      if (!Append("[", max_bytes, out)) return false;
      bool first = true;
      for (const auto& e : v.array_value().values()) {
        if (!first && !Append(",", max_bytes, out)) return false;
        first = false;
        if (!RenderAnyValue(e, max_bytes, depth + 1, out)) return false;
      }
      return Append("]", max_bytes, out);
    }
    case otlp_common::AnyValue::kKvlistValue: {
      if (!Append("{", max_bytes, out)) return false;
      bool first = true;
      for (const auto& kv : v.kvlist_value().values()) {
        if (!first && !Append(",", max_bytes, out)) return false;
        first = false;
        if (!Append(kv.key(), max_bytes, out) || !Append("=", max_bytes, out)) return false;
        if (!RenderAnyValue(kv.value(), max_bytes, depth + 1, out)) return false;
      }
      return Append("}", max_bytes, out);
    }
    case otlp_common::AnyValue::VALUE_NOT_SET:
      break;
  }
  return true;
}

// Converts one OTLP attribute; false when key + value exceed the limit.
bool ConvertOtlpAttribute(const otlp_common::KeyValue& kv, const IngestLimits& limits,
                          Attributes* out) {
  const size_t max = limits.max_attribute_bytes;
  if (kv.key().size() > max) return false;
  std::string value;
  if (!AnyValueToString(kv.value(), max - kv.key().size(), &value)) return false;
  out->emplace_back(kv.key(), std::move(value));
  return true;
}

}  // namespace

std::string HexEncode(absl::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 0xf];
  }
  return out;
}

bool AnyValueToString(const otlp_common::AnyValue& value, size_t max_bytes, std::string* out) {
  out->clear();
  return RenderAnyValue(value, max_bytes, 0, out);
}

RejectReason ConvertNativeSpan(const v1::Span& in, const ConvertContext& ctx, Span* out,
                               std::string* detail) {
  const IngestLimits& limits = *ctx.limits;
  if (auto r = ConvertIdsAndCount(in.trace_id(), in.span_id(), in.parent_span_id(),
                                  in.attributes_size(), limits, out, detail);
      r != RejectReason::kNone) {
    return r;
  }
  for (const v1::Attribute& a : in.attributes()) {
    if (a.key().size() + a.value().size() > limits.max_attribute_bytes) {
      return AttributeTooLarge(a.key(), limits, detail);
    }
  }
  for (const std::string* s : {&in.rdma_device(), &in.network_interface_name()}) {
    if (s->size() > limits.max_attribute_bytes) {
      return AttributeTooLarge(s == &in.rdma_device() ? "rdma_device" : "network_interface_name",
                               limits, detail);
    }
  }
  if (in.name().size() > limits.max_attribute_bytes) {
    return AttributeTooLarge("name", limits, detail);
  }
  if (RejectReason r =
          SetNameAndTimes(in.name(), in.start_unix_nano(), in.end_unix_nano(), out, detail);
      r != RejectReason::kNone) {
    return r;
  }
  out->attributes.clear();
  out->attributes.reserve(in.attributes_size());
  for (const v1::Attribute& a : in.attributes()) out->attributes.emplace_back(a.key(), a.value());
  out->rdma_device = in.rdma_device();
  out->rdma_port = in.rdma_port();
  out->netdev = in.network_interface_name();
  out->gpu.clear();
  out->pid = 0;
  out->stall_flag = in.stall();
  out->protocol = "native";
  ApplyWellKnown(FromNativeKind(in.kind()), *ctx.classifier, out);
  return RejectReason::kNone;
}

// The resource attributes every span of the resource keeps: host, service,
// process, and the Kubernetes pod (OpenTelemetry's k8s.* resource
// conventions, as the OTel Collector's k8sattributes processor or
// OTEL_RESOURCE_ATTRIBUTES set them: a span's pod scopes its correlation).
namespace {
bool IsKeptResourceAttribute(absl::string_view key) {
  return key == "host.name" || key == "service.name" || key == "process.pid" ||
         key == "k8s.namespace.name" || key == "k8s.pod.name" || key == "k8s.pod.uid" ||
         key == "k8s.container.name";
}
}  // namespace

OtlpResourceInfo ConvertOtlpResource(const opentelemetry::proto::resource::v1::Resource& resource,
                                     const IngestLimits& limits) {
  OtlpResourceInfo info;
  for (const otlp_common::KeyValue& kv : resource.attributes()) {
    if (!IsKeptResourceAttribute(kv.key())) continue;
    // OTLP keys are unique; a resource that repeats one keeps its last value
    // (so at most seven attributes are appended to every span).
    info.kept.erase(std::remove_if(info.kept.begin(), info.kept.end(),
                                   [&kv](const auto& a) { return a.first == kv.key(); }),
                    info.kept.end());
    if (!ConvertOtlpAttribute(kv, limits, &info.kept)) info.too_large = true;
  }
  return info;
}

RejectReason ConvertOtlpSpan(const otlp_trace::Span& in, const OtlpResourceInfo& resource,
                             const ConvertContext& ctx, Span* out, std::string* detail) {
  const IngestLimits& limits = *ctx.limits;
  if (auto r = ConvertIdsAndCount(in.trace_id(), in.span_id(), in.parent_span_id(),
                                  in.attributes_size(), limits, out, detail);
      r != RejectReason::kNone) {
    return r;
  }
  if (resource.too_large) {
    if (detail) {
      *detail = absl::StrCat(
          "a kept resource attribute (host.name, service.name, process.pid, k8s.*) "
          "is longer than ",
          limits.max_attribute_bytes, " bytes (--max-attribute-bytes)");
    }
    return RejectReason::kAttributeTooLarge;
  }
  if (in.name().size() > limits.max_attribute_bytes) {
    return AttributeTooLarge("name", limits, detail);
  }
  out->attributes.clear();
  out->attributes.reserve(in.attributes_size() + resource.kept.size());
  for (const otlp_common::KeyValue& kv : in.attributes()) {
    if (!ConvertOtlpAttribute(kv, limits, &out->attributes)) {
      return AttributeTooLarge(kv.key(), limits, detail);
    }
  }
  for (const auto& kv : resource.kept) out->attributes.push_back(kv);
  // The KV-cache transfer events of a GenAI request (TensorRT-LLM), as
  // attributes: the only events kept, and they survive a recording.
  for (const otlp_trace::Span::Event& e : in.events()) {
    if ((e.name() == "kv_cache_transfer_start" || e.name() == "kv_cache_transfer_end") &&
        e.time_unix_nano() > 0 && e.time_unix_nano() <= uint64_t{INT64_MAX}) {
      out->attributes.emplace_back(absl::StrCat("fabricscope.event.", e.name()),
                                   absl::StrCat(e.time_unix_nano()));
    }
  }
  if (RejectReason r = SetNameAndTimes(in.name(), in.start_time_unix_nano(),
                                       in.end_time_unix_nano(), out, detail);
      r != RejectReason::kNone) {
    return r;
  }
  out->rdma_device.clear();
  out->rdma_port = 0;
  out->netdev.clear();
  out->gpu.clear();
  out->pid = 0;
  out->stall_flag = false;
  out->protocol = "otlp";
  ApplyWellKnown(SpanKind::kUnspecified, *ctx.classifier, out);
  return RejectReason::kNone;
}

}  // namespace fabricscope
