#include "collectors/ethtool_text.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

// One parsed line. Returns false for a blank line (nothing to do).
enum class LineKind { kBlank, kHeader, kStat, kBad };

LineKind SplitLine(absl::string_view line, bool first, absl::string_view* name, uint64_t* value) {
  line = absl::StripAsciiWhitespace(line);
  // Blank lines, and '#' comments (the i40e capture carries two).
  if (line.empty() || line[0] == '#') return LineKind::kBlank;
  size_t colon = line.rfind(':');
  if (colon == absl::string_view::npos) return LineKind::kBad;
  absl::string_view v = absl::StripAsciiWhitespace(line.substr(colon + 1));
  *name = absl::StripAsciiWhitespace(line.substr(0, colon));
  if (v.empty()) {
    // "NIC statistics:" (any header-like line) is allowed only first.
    return first && !name->empty() ? LineKind::kHeader : LineKind::kBad;
  }
  if (name->empty()) return LineKind::kBad;
  for (char c : v) {
    if (c < '0' || c > '9') return LineKind::kBad;
  }
  if (!absl::SimpleAtoi(v, value)) return LineKind::kBad;
  return LineKind::kStat;
}

bool IsSpace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// The per-tick fast path of the values-only parse: true (and *value) when
// `line` is exactly `[ws]expected[ws]:[ws]digits[ws]` with a value that fits
// 64 bits. SplitLine reads such a line as the stat `expected` with the same
// value (no ':' after the one that ends the name, so it is the last; the
// name, trimmed, is `expected`, which has no surrounding whitespace), so
// taking this path changes no outcome; any other line (blank, comment,
// another name, garbage) returns false and goes through SplitLine.
bool FastStat(absl::string_view line, absl::string_view expected, uint64_t* value) {
  const char* p = line.data();
  const char* const end = p + line.size();
  while (p < end && IsSpace(*p)) ++p;
  if (expected.empty() || static_cast<size_t>(end - p) < expected.size() ||
      std::memcmp(p, expected.data(), expected.size()) != 0) {
    return false;
  }
  p += expected.size();
  while (p < end && IsSpace(*p)) ++p;
  if (p == end || *p != ':') return false;
  ++p;
  while (p < end && IsSpace(*p)) ++p;
  const char* const digits = p;
  uint64_t v = 0;
  for (; p < end && *p >= '0' && *p <= '9'; ++p) {
    if (__builtin_mul_overflow(v, uint64_t{10}, &v) ||
        __builtin_add_overflow(v, static_cast<uint64_t>(*p - '0'), &v)) {
      return false;  // overflow: SplitLine reports the line
    }
  }
  if (p == digits) return false;
  while (p < end && IsSpace(*p)) ++p;
  if (p != end) return false;
  *value = v;
  return true;
}

// Calls on_stat(name, value) for each stat line of `text` until it returns
// false. fast(line, &value) (values-only parse) may accept a line as the
// next expected stat before the general split; it then calls
// on_fast(value) instead.
template <typename OnStat, typename Fast, typename OnFast>
absl::Status ForEachStat(absl::string_view text, OnStat on_stat, Fast fast, OnFast on_fast) {
  bool first = true;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == absl::string_view::npos) nl = text.size();
    absl::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    absl::string_view name;
    uint64_t value = 0;
    if (fast(line, &value)) {
      on_fast(value);
      first = false;
      continue;
    }
    switch (SplitLine(line, first, &name, &value)) {
      case LineKind::kBlank:
        continue;
      case LineKind::kHeader:
        break;
      case LineKind::kStat:
        if (!on_stat(name, value)) return absl::OkStatus();
        break;
      case LineKind::kBad:
        return UnparsableError(absl::StrCat("line ", line_no, ": not `name: value`: \"",
                                            absl::CHexEscape(line.substr(0, 80)), "\""));
    }
    first = false;
  }
  return absl::OkStatus();
}

template <typename OnStat>
absl::Status ForEachStat(absl::string_view text, OnStat on_stat) {
  return ForEachStat(
      text, on_stat, [](absl::string_view, uint64_t*) { return false; }, [](uint64_t) {});
}

}  // namespace

absl::Status ParseEthtoolStatsText(absl::string_view text, EthtoolTextStats* out) {
  out->names.clear();
  out->values.clear();
  absl::flat_hash_set<absl::string_view> seen;
  absl::Status s = ForEachStat(text, [&](absl::string_view name, uint64_t value) {
    if (seen.insert(name).second) {
      out->names.emplace_back(name);
      out->values.push_back(value);
    }
    return true;
  });
  if (!s.ok()) {
    out->names.clear();
    out->values.clear();
    return s;
  }
  if (out->names.empty()) return UnparsableError("no statistics");
  return absl::OkStatus();
}

absl::Status ParseEthtoolStatsValues(absl::string_view text,
                                     const std::vector<std::string>& expected_names,
                                     std::vector<uint64_t>* values, bool* names_match) {
  values->resize(expected_names.size());
  size_t i = 0;
  bool match = true;
  absl::Status s = ForEachStat(
      text,
      [&](absl::string_view name, uint64_t value) {
        if (i >= expected_names.size() || expected_names[i] != name) {
          match = false;
          return false;
        }
        (*values)[i++] = value;
        return true;
      },
      [&](absl::string_view line, uint64_t* value) {
        return i < expected_names.size() && FastStat(line, expected_names[i], value);
      },
      [&](uint64_t value) { (*values)[i++] = value; });
  if (!s.ok()) return s;
  *names_match = match && i == expected_names.size();
  return absl::OkStatus();
}

}  // namespace fabricscope
