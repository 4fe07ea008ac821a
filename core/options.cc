#include "core/options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/parse.h"

namespace fabricscope {
namespace {

// FormatBytes for a message: "1MiB", "16 bytes".
std::string BytesText(uint64_t b) {
  std::string s = FormatBytes(b);
  return absl::ascii_isdigit(s.back()) ? absl::StrCat(s, " bytes") : s;
}

std::vector<std::string> SplitList(absl::string_view v) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return out;
}

// A spec of values of type T: `parse` makes the T (or says what was
// expected), `check` (optional) vets it, `render` writes it.
template <typename T>
OptionSpec Typed(const OptionKey<T>& key, std::string hint, std::string help, OptionReload reload,
                 std::function<absl::StatusOr<T>(absl::string_view)> parse,
                 std::function<std::string(const T&)> render, OptionCheck<T> check = nullptr) {
  OptionSpec spec;
  spec.name = key.name;
  spec.hint = std::move(hint);
  spec.help = std::move(help);
  spec.reload = reload;
  spec.default_value = key.default_value;
  spec.parse = [parse = std::move(parse),
                check = std::move(check)](absl::string_view v) -> absl::StatusOr<OptionValue> {
    absl::StatusOr<T> t = parse(v);
    if (!t.ok()) return t.status();
    if (check) {
      if (absl::Status s = check(*t); !s.ok()) return s;
    }
    return OptionValue(*std::move(t));
  };
  spec.render = [render = std::move(render)](const OptionValue& v) {
    const T* t = std::get_if<T>(&v);
    return t != nullptr ? render(*t) : std::string();
  };
  return spec;
}

}  // namespace

NumberRange Between(double lo, double hi) {
  return {lo, false, hi, absl::StrCat("a number from ", lo, " to ", hi),
          absl::StrCat("From ", lo, " to ", hi, ".")};
}
NumberRange Above(double lo, double hi) {
  return {lo, true, hi, absl::StrCat("a number > ", lo), absl::StrCat("A number > ", lo, ".")};
}
NumberRange AtLeast(double lo, double hi) {
  return {lo, false, hi, absl::StrCat("a number >= ", lo), absl::StrCat("A number >= ", lo, ".")};
}
NumberRange Fraction() { return {0, true, 1, "a number in (0, 1]", "A number in (0, 1]."}; }

const OptionSpec* FindOptionSpec(const std::vector<OptionSpec>& specs, absl::string_view name) {
  for (const OptionSpec& spec : specs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string FormatBytes(uint64_t b) {
  if (b % (1ull << 30) == 0) return absl::StrCat(b >> 30, "GiB");
  if (b % (1ull << 20) == 0) return absl::StrCat(b >> 20, "MiB");
  if (b % (1ull << 10) == 0) return absl::StrCat(b >> 10, "KiB");
  return absl::StrCat(b);
}

namespace option {

OptionSpec String(const OptionKey<std::string>& key, std::string hint, std::string help,
                  OptionCheck<std::string> check, OptionReload reload) {
  return Typed<std::string>(
      key, std::move(hint), std::move(help), reload,
      [](absl::string_view v) -> absl::StatusOr<std::string> { return std::string(v); },
      [](const std::string& s) { return s; }, std::move(check));
}

OptionSpec Path(const OptionKey<std::string>& key, std::string hint, std::string help,
                PathAccess access, OptionReload reload) {
  OptionSpec spec = String(key, std::move(hint), std::move(help), nullptr, reload);
  spec.path = access;
  return spec;
}

OptionSpec Bool(const OptionKey<bool>& key, std::string help, OptionReload reload) {
  return Typed<bool>(
      key, "", std::move(help), reload,
      [](absl::string_view v) -> absl::StatusOr<bool> {
        if (v == "true" || v.empty()) return true;
        if (v == "false") return false;
        return absl::InvalidArgumentError("expected true or false");
      },
      [](const bool& b) { return std::string(b ? "true" : "false"); });
}

OptionSpec List(const OptionKey<std::vector<std::string>>& key, std::string help,
                OptionCheck<std::vector<std::string>> check, OptionReload reload) {
  return Typed<std::vector<std::string>>(
      key, "LIST", std::move(help), reload,
      [](absl::string_view v) -> absl::StatusOr<std::vector<std::string>> { return SplitList(v); },
      [](const std::vector<std::string>& l) { return absl::StrJoin(l, ","); }, std::move(check));
}

OptionSpec Duration(const OptionKey<absl::Duration>& key, std::string help, OptionReload reload) {
  return Typed<absl::Duration>(key, "DURATION", std::move(help), reload, ParsePositiveDuration,
                               [](const absl::Duration& d) { return absl::FormatDuration(d); });
}

OptionSpec Integer(const OptionKey<uint64_t>& key, absl::string_view help, uint64_t lo, uint64_t hi,
                   OptionReload reload) {
  return Typed<uint64_t>(
      key, "N", absl::StrCat(help, " ", lo, " to ", hi, "."), reload,
      [lo, hi](absl::string_view v) -> absl::StatusOr<uint64_t> {
        uint64_t n;
        if (!absl::SimpleAtoi(v, &n) || n < lo || n > hi) {
          return absl::InvalidArgumentError(
              absl::StrCat("expected an integer from ", lo, " to ", hi));
        }
        return n;
      },
      [](const uint64_t& n) { return absl::StrCat(n); });
}

OptionSpec ByteSize(const OptionKey<uint64_t>& key, std::string help, uint64_t min, uint64_t max,
                    OptionReload reload) {
  return Typed<uint64_t>(
      key, "BYTES", std::move(help), reload,
      [min, max](absl::string_view v) -> absl::StatusOr<uint64_t> {
        absl::StatusOr<uint64_t> b = ParseByteSize(v);
        if (!b.ok()) return b.status();
        if (*b < min || *b > max) {
          return absl::InvalidArgumentError(
              max == UINT64_MAX
                  ? absl::StrCat("must be at least ", BytesText(min))
                  : absl::StrCat("must be from ", BytesText(min), " to ", BytesText(max)));
        }
        return *b;
      },
      [](const uint64_t& b) { return FormatBytes(b); });
}

OptionSpec Number(const OptionKey<double>& key, std::string hint, absl::string_view help,
                  NumberRange range, OptionReload reload) {
  std::string full_help = absl::StrCat(help, " ", range.help);
  return Typed<double>(
      key, std::move(hint), std::move(full_help), reload,
      [range = std::move(range)](absl::string_view v) -> absl::StatusOr<double> {
        double f;
        if (!absl::SimpleAtod(v, &f) || !range.Contains(f)) {
          return absl::InvalidArgumentError(absl::StrCat("expected ", range.expected));
        }
        return f;
      },
      [](const double& f) { return absl::StrCat(f); });
}

}  // namespace option

absl::Status OptionValues::Set(const OptionSpec& spec, absl::string_view text) {
  absl::StatusOr<OptionValue> v = spec.parse(text);
  if (!v.ok()) return v.status();
  values_[spec.name] = *std::move(v);
  return absl::OkStatus();
}

absl::Status OptionValues::Set(const std::vector<OptionSpec>& specs, absl::string_view name,
                               absl::string_view text) {
  const OptionSpec* spec = FindOptionSpec(specs, name);
  if (spec == nullptr) return absl::NotFoundError(absl::StrCat("no option \"", name, "\""));
  if (absl::Status s = Set(*spec, text); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", s.message()));
  }
  return absl::OkStatus();
}

std::string OptionValues::Render(const OptionSpec& spec) const {
  auto it = values_.find(spec.name);
  return spec.render(it == values_.end() ? spec.default_value : it->second);
}

}  // namespace fabricscope
