#include "core/json.h"

#include "absl/strings/str_cat.h"

namespace fabricscope {

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\r':
        out->append("\\r");
        break;
      default:
        if (u < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(u, absl::kZeroPad2));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

std::string JsonString(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendJsonString(&out, s);
  return out;
}

}  // namespace fabricscope
