// Span kinds by name, and the classifier that gives a span without an explicit
// kind one from its name.
//
// A span's kind comes, in order of precedence, from: the native API's `kind`
// field; the `fabricscope.kind` attribute (a kind name below); the span name,
// matched against the --span-kind-patterns (user patterns first, then the
// defaults); else `other`.
//
// The default patterns recognise the span names common inference servers emit
// (case-insensitive search, first match wins, in this order):
//   kv_transfer  kv transfers/cache moves ("kv_transfer", "kv cache send",
//                "KVCacheTransfer", nixl, mooncake, lmcache)
//   collective   "allreduce", "all_gather", "reduce_scatter", "all_to_all",
//                "broadcast", nccl/rccl, "collective"
//   prefill      "prefill", "prompt processing", "context encoding"
//   decode_step  "decode", "token step", "generation step"
//   request      "request" (vLLM "llm_request"), "generate" (TGI), "completion",
//                "chat", "inference"
//
// Thread-safety: a SpanKindClassifier is immutable after Create() apart from
// its internal name cache (mutex-guarded, bounded); Classify is thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <regex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/parse.h"
#include "daemon/spans/span.h"

namespace fabricscope {

// "request", "prefill", "decode_step", "kv_transfer", "collective", "other",
// "unspecified".
absl::string_view SpanKindName(SpanKind kind);
// Inverse of SpanKindName for the six concrete kinds (case-insensitive);
// nullopt for anything else (including "unspecified").
std::optional<SpanKind> ParseSpanKindName(absl::string_view name);

struct SpanKindPattern {
  std::string regex;  // ECMAScript, case-insensitive, searched (not full match)
  SpanKind kind;
};

// Parses --span-kind-patterns: `REGEX=KIND` entries separated by `;` (a regex
// may contain commas), split at the LAST `=` of each entry; empty entries are
// ignored. Errors name the bad entry (the caller adds the option name).
absl::StatusOr<std::vector<SpanKindPattern>> ParseSpanKindPatterns(absl::string_view text);

// The built-in patterns (see the file comment).
const std::vector<SpanKindPattern>& DefaultSpanKindPatterns();

class SpanKindClassifier {
 public:
  // `user_patterns` are tried before the defaults. Fails on an invalid regex.
  static absl::StatusOr<std::unique_ptr<SpanKindClassifier>> Create(
      std::vector<SpanKindPattern> user_patterns);

  // The kind for a span name; `other` when nothing matches. Results are
  // cached per name (at most kMaxCachedNames names; beyond that the patterns
  // run every time), since span names are few and regexes are slow.
  SpanKind Classify(absl::string_view name) const;

  static constexpr size_t kMaxCachedNames = 4096;

 private:
  struct Compiled {
    std::regex re;
    SpanKind kind;
  };
  explicit SpanKindClassifier(std::vector<Compiled> compiled) : compiled_(std::move(compiled)) {}
  SpanKind Match(absl::string_view name) const;

  const std::vector<Compiled> compiled_;
  mutable std::shared_mutex mu_;
  mutable absl::flat_hash_map<std::string, SpanKind> cache_;  // guarded by mu_
};

}  // namespace fabricscope
