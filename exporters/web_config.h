// The exporter-toolkit web configuration file (--web.config.file), the YAML
// format of node_exporter and the other Prometheus exporters:
//
//   tls_server_config:
//     cert_file: server.pem          # relative paths: to the file's directory
//     key_file: server.key
//     client_auth_type: RequireAndVerifyClientCert
//     client_ca_file: ca.pem
//     min_version: TLS12             # TLS10..TLS13; max_version likewise
//   http_server_config:
//     headers:
//       X-Frame-Options: deny
//   basic_auth_users:
//     prometheus: $2y$10$...         # bcrypt ($2a$, $2b$, $2y$)
//
// Supported client_auth_type values: NoClientCert (default),
// VerifyClientCertIfGiven and RequireAndVerifyClientCert; RequestClientCert
// and RequireAnyClientCert (certificates accepted unverified) are refused,
// as are the toolkit keys this server does not implement (cert, key inline,
// cipher_suites, curve_preferences, client_allowed_sans,
// prefer_server_cipher_suites): security settings are never ignored. http2 is
// accepted and has no effect (HTTP/1.1 only). http_server_config.headers may
// set the toolkit's header list (Strict-Transport-Security,
// X-Content-Type-Options, X-Frame-Options, X-XSS-Protection,
// Content-Security-Policy). Any other key is an error that names it.
//
// ParseWebConfig only parses and checks (no file is read: fuzzed);
// LoadWebConfig reads the file and the TLS files it names.
//
// Thread-safety: the functions are reentrant; BasicAuthenticator is
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "exporters/http_server.h"

namespace fabricscope {

struct WebConfig {
  struct Tls {
    std::string cert_file, key_file, client_ca_file;  // absolute or as given
    // NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert.
    std::string client_auth_type = "NoClientCert";
    std::string min_version, max_version;  // "" or TLS10..TLS13
  };
  bool has_tls = false;
  Tls tls;
  // Response headers added to every answer (http_server_config.headers).
  std::vector<std::pair<std::string, std::string>> headers;
  // user -> bcrypt hash, in file order.
  std::vector<std::pair<std::string, std::string>> users;
};

// Files larger than this are refused.
inline constexpr size_t kMaxWebConfigBytes = 1 << 20;

// Parses `yaml`; relative file names are resolved against `base_dir` (the
// config file's directory; "" leaves them as given). Errors name the key
// (e.g. "tls_server_config.client_auth_typ: unknown key").
absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view yaml, absl::string_view base_dir);

// Reads and parses `path`.
absl::StatusOr<WebConfig> LoadWebConfig(const std::string& path);

// The server's TLS settings from `config.tls` (reads the certificate, key and
// CA files). Needs config.has_tls.
absl::StatusOr<TlsOptions> LoadTlsOptions(const WebConfig& config);

// Whether `password` matches the bcrypt `hash` (libcrypt's crypt_rn).
bool BcryptMatches(absl::string_view password, const std::string& hash);

// Checks basic-auth credentials against a user table with bcrypt hashes.
// bcrypt is deliberately slow (tens of ms at cost 10), so successful checks
// are remembered (at most kCacheEntries, keyed by a SHA-256 over user,
// password and hash: no plain password is kept); failures are never cached.
// An unknown user costs one bcrypt too, so timing does not tell users apart.
class BasicAuthenticator {
 public:
  static constexpr size_t kCacheEntries = 64;
  explicit BasicAuthenticator(std::vector<std::pair<std::string, std::string>> users);
  bool empty() const { return users_.empty(); }
  bool Check(const std::string& user, const std::string& password) const;

 private:
  std::vector<std::pair<std::string, std::string>> users_;
  std::string dummy_hash_;  // checked for unknown users
  mutable std::mutex mu_;
  mutable std::list<std::string> lru_;  // guarded by mu_; front: most recent
  mutable absl::flat_hash_map<std::string, std::list<std::string>::iterator> cache_;  // mu_
};

}  // namespace fabricscope
