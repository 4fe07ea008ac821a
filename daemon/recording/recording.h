// The JSON Lines recording format (docs/recording.md): parsing and writing
// of its line types, sample and span, shared by `fabricscope push`
// (span lines), `fabricscope record` / `analyze` and `fabricscoped --replay`,
// the recording line that heads what `fabricscope record` writes
// (recording_header.h), and the incident line that heads a recording of a
// detector episode
// (--incident-dir, daemon/recording/incident_writer.h; `fabricscope
// incidents` reads it, replay and analysis skip it).
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
#include "daemon/detect/event_log.h"
#include "daemon/recording/recording_header.h"
#include "daemon/spans/span.h"
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

// The first line of an incident recording: what it is a recording of.
struct IncidentHeader {
  // The window recorded: from --incident-before before the first episode
  // started to --incident-after after the last one ended (see `ended`).
  int64_t from_unix_nano = 0;
  int64_t to_unix_nano = 0;
  // The port whose series it holds ("" / 0 where unknown).
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  // How the window was closed: "ended" (every episode ended), "capped" (an
  // episode was still active --incident-max-duration after the first began),
  // "stopped" (the daemon stopped before the window was over).
  std::string closed = "ended";
  // The episodes on that port the recording covers, by start (end 0: still
  // active when written); `episodes_omitted` more were merged in but not
  // listed (bounded).
  std::vector<DetectorEvent> episodes;
  uint64_t episodes_omitted = 0;

  // The episode a recording is named and listed after: the longest (one
  // still active lasts until to_unix_nano), the earliest of equals; null
  // without episodes.
  const DetectorEvent* Headline() const;
};

// One line of a recording.
struct RecordingLine {
  enum Type { kSample, kSpan, kIncident, kHeader } type = kSample;
  int64_t ts_ns = 0;   // kSample
  SeriesKey key;       // kSample
  uint64_t value = 0;  // kSample
  v1::Span span;       // kSpan
  // kSpan: the daemon's stall judgement of the span when it was recorded
  // (judged = false: none recorded; the reader judges it).
  StallJudgement judgement;
  IncidentHeader incident;  // kIncident
  RecordingHeader header;   // kHeader (recording_header.h)
};
absl::StatusOr<RecordingLine> ParseRecordingLine(absl::string_view line);

// The lines, without the trailing newline.
std::string FormatSampleLine(int64_t ts_ns, const SeriesKey& key, uint64_t value);
// {"span":{...}}, with "judgement":{...} after it when `judgement` is given
// and judged (docs/recording.md).
std::string FormatSpanLine(const v1::Span& span, const StallJudgement* judgement = nullptr);
// The span object alone (what `fabricscope push` reads).
std::string FormatSpanJson(const v1::Span& span);
// {"incident":{...}} (docs/recording.md).
std::string FormatIncidentLine(const IncidentHeader& incident);

}  // namespace fabricscope
