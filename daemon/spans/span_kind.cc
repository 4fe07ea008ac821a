#include "daemon/spans/span_kind.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fabricscope {

absl::string_view SpanKindName(SpanKind kind) {
  switch (kind) {
    case SpanKind::kRequest:
      return "request";
    case SpanKind::kPrefill:
      return "prefill";
    case SpanKind::kDecodeStep:
      return "decode_step";
    case SpanKind::kKvTransfer:
      return "kv_transfer";
    case SpanKind::kCollective:
      return "collective";
    case SpanKind::kOther:
      return "other";
    case SpanKind::kUnspecified:
      break;
  }
  return "unspecified";
}

std::optional<SpanKind> ParseSpanKindName(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  for (SpanKind k : {SpanKind::kRequest, SpanKind::kPrefill, SpanKind::kDecodeStep,
                     SpanKind::kKvTransfer, SpanKind::kCollective, SpanKind::kOther}) {
    if (lower == SpanKindName(k)) return k;
  }
  return std::nullopt;
}

const std::vector<SpanKindPattern>& DefaultSpanKindPatterns() {
  static const auto* patterns = new std::vector<SpanKindPattern>{
      {R"(kv[ _.-]?(cache)?[ _.-]?(transfer|send|recv|receive|pull|push|load|save|store|copy|migrat)|kv[ _.-]?cache|nixl|mooncake|lmcache)",
       SpanKind::kKvTransfer},
      {R"(all[ _-]?reduce|all[ _-]?gather|reduce[ _-]?scatter|all[ _-]?to[ _-]?all|broadcast|nccl|rccl|collective)",
       SpanKind::kCollective},
      {R"(prefill|prompt[ _-]?process|context[ _-]?encod)", SpanKind::kPrefill},
      {R"(decode|token[ _-]?step|generation[ _-]?step)", SpanKind::kDecodeStep},
      {R"(request|generate|completion|chat|inference)", SpanKind::kRequest},
  };
  return *patterns;
}

absl::StatusOr<std::vector<SpanKindPattern>> ParseSpanKindPatterns(absl::string_view text) {
  std::vector<SpanKindPattern> out;
  for (absl::string_view entry : absl::StrSplit(text, absl::ByAnyChar(";\n"))) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) continue;
    size_t eq = entry.rfind('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry \"", entry, "\" is not REGEX=KIND (entries are separated by ';')"));
    }
    absl::string_view regex = absl::StripAsciiWhitespace(entry.substr(0, eq));
    absl::string_view kind_name = absl::StripAsciiWhitespace(entry.substr(eq + 1));
    auto kind = ParseSpanKindName(kind_name);
    if (!kind.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry \"", entry, "\": unknown kind \"", kind_name,
                       "\" (request, prefill, decode_step, kv_transfer, collective, other)"));
    }
    if (auto s = CheckRegexBounds(regex); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry \"", entry.substr(0, 64), "\": ", s.message()));
    }
    try {
      std::regex re{std::string(regex), std::regex::ECMAScript | std::regex::icase};
    } catch (const std::regex_error& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry \"", entry, "\": not a valid regex: ", e.what()));
    }
    out.push_back({std::string(regex), *kind});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SpanKindClassifier>> SpanKindClassifier::Create(
    std::vector<SpanKindPattern> user_patterns) {
  std::vector<Compiled> compiled;
  for (const std::vector<SpanKindPattern>* list :
       {static_cast<const std::vector<SpanKindPattern>*>(&user_patterns),
        &DefaultSpanKindPatterns()}) {
    for (const SpanKindPattern& p : *list) {
      try {
        compiled.push_back(
            {std::regex(p.regex, std::regex::ECMAScript | std::regex::icase | std::regex::optimize),
             p.kind});
      } catch (const std::regex_error& e) {
        return absl::InvalidArgumentError(
            absl::StrCat("span kind pattern \"", p.regex, "\" is not a valid regex: ", e.what()));
      }
    }
  }
  return std::unique_ptr<SpanKindClassifier>(new SpanKindClassifier(std::move(compiled)));
}

SpanKind SpanKindClassifier::Match(absl::string_view name) const {
  for (const Compiled& c : compiled_) {
    if (std::regex_search(name.begin(), name.end(), c.re)) return c.kind;
  }
  return SpanKind::kOther;
}

SpanKind SpanKindClassifier::Classify(absl::string_view name) const {
  {
    std::shared_lock lock(mu_);
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second;
  }
  // Only the first 256 bytes are matched: span names are client input, and
  // std::regex's matching cost (and recursion) grows with the text.
  SpanKind kind = Match(name.substr(0, 256));
  std::unique_lock lock(mu_);
  if (cache_.size() < kMaxCachedNames) cache_.emplace(std::string(name), kind);
  return kind;
}

}  // namespace fabricscope
