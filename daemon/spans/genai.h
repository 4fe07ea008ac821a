// GenAI request spans as serving stacks emit them (vLLM's `llm_request`,
// SGLang, TensorRT-LLM): one OpenTelemetry span per request, from the
// request's arrival to its last token, carrying the OpenTelemetry GenAI
// attributes below (latencies in seconds, as the stacks write them). No
// fabricscope attribute is needed; docs/spans.md has the mapping table.
//
//   gen_ai.latency.time_in_queue          arrival -> scheduled
//   gen_ai.latency.time_to_first_token    arrival -> first output token
//   gen_ai.latency.e2e                    arrival -> last output token
//   gen_ai.latency.time_in_model_prefill  prefill compute
//   gen_ai.latency.time_in_model_decode   decode compute (first -> last token)
//   gen_ai.latency.kv_cache_transfer_time TensorRT-LLM: KV-cache transfer
//   gen_ai.usage.prompt_tokens, gen_ai.usage.completion_tokens
//   gen_ai.response.model (else gen_ai.request.model)
//   span events kv_cache_transfer_start / kv_cache_transfer_end (TensorRT-LLM;
//   the OTLP converter keeps their times as the attributes
//   fabricscope.event.kv_cache_transfer_start / _end, unix ns)
//
// A span is a GenAI request when it has time_to_first_token, or both
// time_in_queue and time_in_model_prefill (first token = their sum). Such a
// span is of kind `request` when nothing else gave it a kind (it would be
// `other`), and is told apart by phase:
//   queue    [start, start + time_in_queue]       never judged: waiting for a
//                                                  batch slot is not the fabric
//   prefill  [start + queue, start + ttft]
//   decode   [start + ttft, end]                   the window the correlator
//                                                  judges (Span::window_*), and
//                                                  the phase its stall cost
//                                                  measures: time per output
//                                                  token (TPOT) = decode time /
//                                                  (completion tokens - 1)
// A request with fewer than two output tokens has no decode phase: it is
// judged over its prefill, its cost is prefill time per prompt token.
//
// Dilution: a request's TPOT averages its whole decode. A 600 ms storm inside
// a 10 s decode raises its TPOT by 6 %, inside the learned spread, so such a
// request is not a stall; the collective spans of the same host inside its
// decode (NCCL Inspector) are the step-level evidence.
//
// KV-cache transfer: the event pair (or, without it, the transfer time placed
// to end at the first token, marked estimated) becomes a span of kind
// kv_transfer of its own (KvTransferSpanOf), judged like any other.
//
// Unknown attributes are ignored; a value that does not parse as a
// non-negative number is treated as absent.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "daemon/spans/span.h"

namespace fabricscope {

struct GenAiRequest {
  std::string model;    // "" when absent
  std::string service;  // service.name, "" when absent
  // Seconds; < 0 when absent.
  double queue_s = -1;
  double ttft_s = -1;
  double e2e_s = -1;
  double prefill_s = -1;
  double decode_s = -1;
  double kv_transfer_s = -1;
  int64_t prompt_tokens = -1;  // < 0 when absent
  int64_t completion_tokens = -1;
  int64_t kv_start_unix_nano = 0;  // from the event pair; 0 when absent
  int64_t kv_end_unix_nano = 0;

  // Unix ns of the first output token, clamped into [start, end].
  int64_t FirstTokenUnixNano(const Span& span) const;
  // Seconds of decode (first -> last token): time_in_model_decode, else end -
  // first token.
  double DecodeSeconds(const Span& span) const;
  // Time per output token in ns, < 0 without at least two output tokens.
  double TimePerOutputTokenNs(const Span& span) const;
  // Prefill ns per prompt token, < 0 without prompt tokens.
  double PrefillPerTokenNs(const Span& span) const;
};

// The GenAI view of a span; nullopt when it is not a GenAI request span (see
// the file comment).
std::optional<GenAiRequest> ReadGenAiRequest(const Span& span);

// Sets a GenAI request span's kind (`other` becomes `request`), phase and
// judged window. Returns whether the span is a GenAI request.
bool ApplyGenAiRequest(Span* span);

// The span of the request's KV-cache transfer, when it has one: kind
// kv_transfer, same trace, a span id derived from the request's, parented to
// it, name "kv_cache_transfer", the request's scope hints and resource
// attributes, plus fabricscope.derived_from=<request span id hex> and
// fabricscope.estimated=true when placed from the transfer time alone.
std::optional<Span> KvTransferSpanOf(const Span& request);

// The attribute that marks a derived span (recordings leave them out: a
// replay derives them again).
inline constexpr const char kDerivedFromAttribute[] = "fabricscope.derived_from";

}  // namespace fabricscope
