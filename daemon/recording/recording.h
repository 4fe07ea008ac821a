// The JSON Lines recording format (docs/recording.md): parsing and writing
// of its two line types, sample and span, shared by `fabricscope push`
// (span lines), `fabricscope record` / `analyze` and `fabricscoped --replay`.
//
// The JSON reader is deliberately small: objects, arrays, strings (with
// escapes and \u sequences), numbers kept as their text, true/false/null;
// nesting is bounded, so a hostile line cannot exhaust the stack.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/series.h"
#include "fabricscope/v1/span.pb.h"

namespace fabricscope {

// A parsed JSON value. Values keep their raw text so that non-string
// attribute values can be passed on verbatim.
struct JsonValue {
  // Declared here, defined below: the member containers hold JsonValue, which
  // is incomplete until the closing brace (clang 14 with libstdc++ 12).
  JsonValue();
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
inline JsonValue::JsonValue() = default;

// Parses one JSON document; `raw` views point into `text`, which must outlive
// the result.
absl::StatusOr<JsonValue> ParseJson(absl::string_view text);

// One span object (or {"span": {...}}), the fields of docs/recording.md.
absl::StatusOr<v1::Span> ParseSpanJson(absl::string_view line);

// One line of a recording.
struct RecordingLine {
  enum Type { kSample, kSpan } type = kSample;
  int64_t ts_ns = 0;   // kSample
  SeriesKey key;       // kSample
  uint64_t value = 0;  // kSample
  v1::Span span;       // kSpan
};
absl::StatusOr<RecordingLine> ParseRecordingLine(absl::string_view line);

// The lines, without the trailing newline.
std::string FormatSampleLine(int64_t ts_ns, const SeriesKey& key, uint64_t value);
std::string FormatSpanLine(const v1::Span& span);
// The span object alone (what `fabricscope push` reads).
std::string FormatSpanJson(const v1::Span& span);

}  // namespace fabricscope
