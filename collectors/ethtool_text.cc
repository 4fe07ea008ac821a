#include "collectors/ethtool_text.h"

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

template <typename OnStat>
absl::Status ForEachStat(absl::string_view text, OnStat on_stat) {
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
  absl::Status s = ForEachStat(text, [&](absl::string_view name, uint64_t value) {
    if (i >= expected_names.size() || expected_names[i] != name) {
      match = false;
      return false;
    }
    (*values)[i++] = value;
    return true;
  });
  if (!s.ok()) return s;
  *names_match = match && i == expected_names.size();
  return absl::OkStatus();
}

}  // namespace fabricscope
