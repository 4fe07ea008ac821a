#include "daemon/spans/genai.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fabricscope {
namespace {

// A non-negative finite number, else `absent`.
double Seconds(absl::string_view v, double absent = -1) {
  double d = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(v), &d) || !std::isfinite(d) || d < 0) {
    return absent;
  }
  return d;
}

int64_t Count(absl::string_view v) {
  int64_t n = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &n) || n < 0) {
    // OTLP renders a double-valued count as "12.0".
    double d = Seconds(v);
    return d >= 0 && d < 9e15 ? static_cast<int64_t>(d) : -1;
  }
  return n;
}

int64_t UnixNano(absl::string_view v) {
  int64_t n = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &n) && n > 0 ? n : 0;
}

int64_t Clamp(int64_t t, const Span& span) {
  return std::clamp(t, span.start_unix_nano, std::max(span.start_unix_nano, span.end_unix_nano));
}

// Seconds as ns, bounded to [0, 10^6 s]: an attribute's value can be any
// number, and a span's times plus it must not overflow.
int64_t SecondsToNs(double s) {
  return static_cast<int64_t>(std::llround(std::clamp(s, 0.0, 1e6) * 1e9));
}

}  // namespace

int64_t GenAiRequest::FirstTokenUnixNano(const Span& span) const {
  const double ttft = ttft_s >= 0 ? ttft_s : queue_s + prefill_s;
  return Clamp(span.start_unix_nano + SecondsToNs(ttft), span);
}

double GenAiRequest::DecodeSeconds(const Span& span) const {
  if (decode_s >= 0) return decode_s;
  return static_cast<double>(std::max(span.start_unix_nano, span.end_unix_nano) -
                             FirstTokenUnixNano(span)) *
         1e-9;
}

double GenAiRequest::TimePerOutputTokenNs(const Span& span) const {
  if (completion_tokens < 2) return -1;
  return DecodeSeconds(span) * 1e9 / static_cast<double>(completion_tokens - 1);
}

double GenAiRequest::PrefillPerTokenNs(const Span& span) const {
  if (prompt_tokens < 1) return -1;
  double prefill = prefill_s;
  if (prefill < 0) {
    prefill = static_cast<double>(FirstTokenUnixNano(span) - span.start_unix_nano) * 1e-9 -
              std::max(0.0, queue_s);
  }
  return std::max(0.0, prefill) * 1e9 / static_cast<double>(prompt_tokens);
}

std::optional<GenAiRequest> ReadGenAiRequest(const Span& span) {
  GenAiRequest g;
  std::string request_model;
  for (const auto& [k, v] : span.attributes) {
    if (!absl::StartsWith(k, "gen_ai.") && !absl::StartsWith(k, "fabricscope.event.") &&
        k != "service.name") {
      continue;
    }
    if (k == "gen_ai.latency.time_in_queue") {
      g.queue_s = Seconds(v);
    } else if (k == "gen_ai.latency.time_to_first_token") {
      g.ttft_s = Seconds(v);
    } else if (k == "gen_ai.latency.e2e") {
      g.e2e_s = Seconds(v);
    } else if (k == "gen_ai.latency.time_in_model_prefill") {
      g.prefill_s = Seconds(v);
    } else if (k == "gen_ai.latency.time_in_model_decode") {
      g.decode_s = Seconds(v);
    } else if (k == "gen_ai.latency.kv_cache_transfer_time") {
      g.kv_transfer_s = Seconds(v);
    } else if (k == "gen_ai.usage.prompt_tokens" || k == "gen_ai.usage.input_tokens") {
      g.prompt_tokens = Count(v);
    } else if (k == "gen_ai.usage.completion_tokens" || k == "gen_ai.usage.output_tokens") {
      g.completion_tokens = Count(v);
    } else if (k == "gen_ai.response.model") {
      g.model = v;
    } else if (k == "gen_ai.request.model") {
      request_model = v;
    } else if (k == "service.name") {
      g.service = v;
    } else if (k == "fabricscope.event.kv_cache_transfer_start") {
      g.kv_start_unix_nano = UnixNano(v);
    } else if (k == "fabricscope.event.kv_cache_transfer_end") {
      g.kv_end_unix_nano = UnixNano(v);
    }
  }
  if (g.model.empty()) g.model = std::move(request_model);
  if (g.ttft_s < 0 && !(g.queue_s >= 0 && g.prefill_s >= 0)) return std::nullopt;
  return g;
}

bool ApplyGenAiRequest(Span* span) {
  const std::optional<GenAiRequest> g = ReadGenAiRequest(*span);
  if (!g.has_value()) return false;
  if (span->kind == SpanKind::kOther || span->kind == SpanKind::kUnspecified) {
    span->kind = SpanKind::kRequest;
  }
  const int64_t end = std::max(span->start_unix_nano, span->end_unix_nano);
  const int64_t first = g->FirstTokenUnixNano(*span);
  if (g->completion_tokens >= 2 && end > first) {
    span->phase = "decode";
    span->window_start_unix_nano = first;
    span->window_end_unix_nano = end;
  } else {
    const int64_t queued =
        Clamp(span->start_unix_nano + SecondsToNs(std::max(0.0, g->queue_s)), *span);
    span->phase = "prefill";
    span->window_start_unix_nano = queued;
    span->window_end_unix_nano = std::max(queued, first);
  }
  return true;
}

std::optional<Span> KvTransferSpanOf(const Span& request) {
  const std::optional<GenAiRequest> g = ReadGenAiRequest(request);
  if (!g.has_value()) return std::nullopt;
  int64_t t0 = 0, t1 = 0;
  bool estimated = false;
  if (g->kv_start_unix_nano > 0 && g->kv_end_unix_nano >= g->kv_start_unix_nano) {
    t0 = g->kv_start_unix_nano;
    t1 = g->kv_end_unix_nano;
  } else if (g->kv_transfer_s > 0) {
    // The transfer precedes generation: it ends at the first token.
    t1 = g->FirstTokenUnixNano(request);
    t0 = std::max(request.start_unix_nano, t1 - SecondsToNs(g->kv_transfer_s));
    estimated = true;
  } else {
    return std::nullopt;
  }
  Span kv;
  kv.trace_id = request.trace_id;
  kv.parent_span_id = request.span_id;
  // A span id of its own: the request's, bit-inverted in the first byte's
  // high bit (stable across replays, distinct from the request's).
  kv.span_id = request.span_id;
  kv.span_id[0] ^= 0x80;
  kv.name = "kv_cache_transfer";
  kv.kind = SpanKind::kKvTransfer;
  kv.start_unix_nano = t0;
  kv.end_unix_nano = t1;
  for (const auto& [k, v] : request.attributes) {
    if (k == "service.name" || k == "host.name" || k == "process.pid" ||
        k == "gen_ai.response.model" || k == "gen_ai.request.model" || k == "rdma.device" ||
        k == "rdma.port" || k == "network.interface.name" || k == "fabricscope.gpu") {
      kv.attributes.emplace_back(k, v);
    }
  }
  kv.attributes.emplace_back(
      kDerivedFromAttribute,
      absl::BytesToHexString(absl::string_view(
          reinterpret_cast<const char*>(request.span_id.data()), request.span_id.size())));
  if (estimated) kv.attributes.emplace_back("fabricscope.estimated", "true");
  kv.rdma_device = request.rdma_device;
  kv.rdma_port = request.rdma_port;
  kv.netdev = request.netdev;
  kv.gpu = request.gpu;
  kv.pid = request.pid;
  kv.protocol = request.protocol;
  return kv;
}

}  // namespace fabricscope
