// The project's one JSON string writer: every JSON (and JSON-quoted) string
// the daemon, its recordings and the CLI write goes through AppendJsonString.
//
// The escaping: `"` and `\` are backslash-escaped; \n, \t and \r use their
// short escapes; every other byte below 0x20 is written as \u00XX (lowercase
// hex). All other bytes, DEL and bytes >= 0x80 included, are copied as they
// are: UTF-8 text stays readable, and invalid UTF-8 is passed through
// unchanged rather than replaced (the reader decides what to do with it).
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace fabricscope {

// Appends `s` as a JSON string literal, quotes included, to `*out`.
void AppendJsonString(std::string* out, absl::string_view s);

// `s` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view s);

}  // namespace fabricscope
