// Fuzz target: the exporter-toolkit web config file (exporters/web_config.h,
// ParseWebConfig), the YAML fabricscoped reads at start and on SIGHUP. An
// invalid file is an error with a message; an accepted one holds only what
// the server can use: bcrypt hashes, allowed headers without control
// characters, a complete TLS section.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "exporters/web_config.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<fabricscope::WebConfig> c = fabricscope::ParseWebConfig(text, "/etc/fabricscope");
  if (!c.ok()) {
    FUZZ_CHECK(!c.status().message().empty());
    return 0;
  }
  for (const auto& [user, hash] : c->users) {
    FUZZ_CHECK(!user.empty() && !absl::StrContains(user, ':'));
    FUZZ_CHECK(hash.size() == 60 && absl::StartsWith(hash, "$2"));
  }
  for (const auto& [name, value] : c->headers) {
    FUZZ_CHECK(!name.empty());
    for (char ch : value) FUZZ_CHECK(static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f);
  }
  if (c->has_tls) {
    FUZZ_CHECK(!c->tls.cert_file.empty() && !c->tls.key_file.empty());
    FUZZ_CHECK(c->tls.client_auth_type == "NoClientCert" || !c->tls.client_ca_file.empty());
    // Relative names were resolved against the config file's directory.
    FUZZ_CHECK(c->tls.cert_file.front() == '/' && c->tls.key_file.front() == '/');
  }
  return 0;
}
