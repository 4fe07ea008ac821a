// Declared options: what one option of the daemon is (name, value syntax,
// default, bounds, help, reload class) and the typed builders every option is
// made with. The daemon's own options are declared in daemon/config.cc; a
// plugin (collector or detector) declares its own next to its code, as
// OptionKey constants and the OptionSpecs of its class
// (collectors/registry.h, daemon/detect/detector.h), and reads them from an
// OptionValues. --help, the config file parser, docs/options.md
// (--dump-options-reference) and the fuzz seed generator all read the one list
// daemon/config.cc assembles from the daemon's options and the registries.
//
// A value is parsed once, when it is set (the error says what was expected;
// the caller names the option and where it came from), and kept typed.
// Rendering a value gives the text --help shows as the default and that
// RestartOnlyChanges compares.
//
// Thread-safety: specs and keys are immutable values; an OptionValues is a
// plain value (copy it to share).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fabricscope {

// The types an option's value can have.
using OptionValue =
    std::variant<bool, uint64_t, double, absl::Duration, std::string, std::vector<std::string>>;

// Whether SIGHUP applies a new value (kReloadable) or the running value stays
// until a restart (kRestart).
enum class OptionReload { kRestart, kReloadable };

// What the daemon does with a path an option names, so that it can check at
// start-up that the user it runs as can (daemon/privileges.h).
enum class PathAccess {
  kNone,      // not a path
  kReadFile,  // open for reading
  kReadDir,   // list and read below it (r-x)
  kWriteDir,  // create files in it (-wx); a missing one must be creatable
  kSocket,    // connect to a unix socket (w on the socket)
};

// A plugin's handle on one of its options: the name and the default, typed.
// Declare it once in the plugin's .cc, build the spec from it and read the
// value with OptionValues::Get.
template <typename T>
struct OptionKey {
  std::string name;
  T default_value;
};

struct OptionSpec {
  std::string name;  // the flag (--name) and the config file key
  std::string hint;  // the value's syntax, e.g. "DURATION"; empty: a boolean flag
  std::string help;  // what it does, with the accepted values
  OptionReload reload = OptionReload::kRestart;
  PathAccess path = PathAccess::kNone;  // a String naming a path: how it is used
  OptionValue default_value;
  // Text -> value; InvalidArgument says what was expected.
  std::function<absl::StatusOr<OptionValue>(absl::string_view)> parse;
  // Value -> text (the --help default; RestartOnlyChanges compares these).
  std::function<std::string(const OptionValue&)> render;

  bool reloadable() const { return reload == OptionReload::kReloadable; }
};

// The numbers a Number option accepts: from `lo` (excluded when `lo_open`) to
// `hi`, what an error says was expected, and what the help appends.
struct NumberRange {
  double lo;
  bool lo_open;
  double hi;
  std::string expected;
  std::string help;

  bool Contains(double f) const { return (lo_open ? f > lo : f >= lo) && f <= hi; }
};
// [lo, hi]: "From LO to HI."
NumberRange Between(double lo, double hi);
// (lo, hi], hi only a sanity bound: "A number > LO."
NumberRange Above(double lo, double hi);
// [lo, hi], hi only a sanity bound: "A number >= LO."
NumberRange AtLeast(double lo, double hi);
// (0, 1].
NumberRange Fraction();

// Checks a parsed value before it is accepted; the message says what was
// expected (the caller prefixes the option).
template <typename T>
using OptionCheck = std::function<absl::Status(const T&)>;

// The builders. Each takes the option's key (name and default), the help and
// the bounds, and returns the spec.
namespace option {

// Any string, or one `check` accepts.
OptionSpec String(const OptionKey<std::string>& key, std::string hint, std::string help,
                  OptionCheck<std::string> check = nullptr,
                  OptionReload reload = OptionReload::kRestart);
// A path (empty: none) used as `access` says; checked at start-up.
OptionSpec Path(const OptionKey<std::string>& key, std::string hint, std::string help,
                PathAccess access, OptionReload reload = OptionReload::kRestart);
// true or false; given bare (--name, or an empty value) it means true.
OptionSpec Bool(const OptionKey<bool>& key, std::string help,
                OptionReload reload = OptionReload::kRestart);
// A comma-separated list (blanks around items dropped).
OptionSpec List(const OptionKey<std::vector<std::string>>& key, std::string help,
                OptionCheck<std::vector<std::string>> check = nullptr,
                OptionReload reload = OptionReload::kRestart);
// A finite duration > 0 ("10ms", "1s").
OptionSpec Duration(const OptionKey<absl::Duration>& key, std::string help,
                    OptionReload reload = OptionReload::kRestart);
// An integer from `lo` to `hi`; the help gets " LO to HI." appended.
OptionSpec Integer(const OptionKey<uint64_t>& key, absl::string_view help, uint64_t lo, uint64_t hi,
                   OptionReload reload = OptionReload::kRestart);
// A byte size ("256MiB", core/parse.h) from `min` to `max`.
OptionSpec ByteSize(const OptionKey<uint64_t>& key, std::string help, uint64_t min,
                    uint64_t max = UINT64_MAX, OptionReload reload = OptionReload::kRestart);
// A number in `range`; the help gets the range's text appended.
OptionSpec Number(const OptionKey<double>& key, std::string hint, absl::string_view help,
                  NumberRange range, OptionReload reload = OptionReload::kRestart);

}  // namespace option

// The spec named `name` among `specs`, or null.
const OptionSpec* FindOptionSpec(const std::vector<OptionSpec>& specs, absl::string_view name);

// "1MiB" for whole binary units, else the number of bytes.
std::string FormatBytes(uint64_t b);

// The values set for a group of declared options (a plugin's); an option not
// set reads as its key's default.
class OptionValues {
 public:
  // Parses `text` with the spec and keeps the value; on error nothing changes.
  absl::Status Set(const OptionSpec& spec, absl::string_view text);
  // The same for whichever of `specs` is named `name`: the parse error
  // prefixed with the name, or NotFound when none of them is.
  absl::Status Set(const std::vector<OptionSpec>& specs, absl::string_view name,
                   absl::string_view text);
  // Keeps a value of the option's own type (tests, programs that configure in
  // code); the spec's parse is not involved.
  template <typename T>
  void SetValue(const OptionKey<T>& key, T value) {
    values_[key.name] = OptionValue(std::move(value));
  }

  template <typename T>
  T Get(const OptionKey<T>& key) const {
    auto it = values_.find(key.name);
    if (it == values_.end()) return key.default_value;
    const T* v = std::get_if<T>(&it->second);
    return v != nullptr ? *v : key.default_value;
  }
  // The value set for `spec`, else its default, rendered.
  std::string Render(const OptionSpec& spec) const;

  bool operator==(const OptionValues&) const = default;

 private:
  std::map<std::string, OptionValue, std::less<>> values_;
};

}  // namespace fabricscope
