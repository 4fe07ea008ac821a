// Fuzz target: the config file (daemon/config.h, ApplyConfigText), the text
// fabricscoped reads at start and on SIGHUP. An invalid file is an error that
// names the origin (and so the line); it never crashes or hangs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "daemon/config.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const fabricscope::Config defaults;
  fabricscope::Config config;
  absl::Status s = fabricscope::ApplyConfigText(text, "fuzz.conf", &config);
  if (!s.ok()) {
    FUZZ_CHECK(absl::StartsWith(s.message(), "fuzz.conf:"));
    return 0;
  }
  // What a SIGHUP reload computes next.
  (void)fabricscope::RestartOnlyChanges(defaults, config);
  return 0;
}
