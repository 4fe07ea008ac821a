#include "exporters/web_config.h"

#include <crypt.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

namespace fabricscope {
namespace {

using Status = absl::Status;

Status KeyError(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", what));
}

std::string Join(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

// A map node's string value (null: ""), or an error naming `key`.
absl::StatusOr<std::string> ScalarValue(const YAML::Node& node, absl::string_view key) {
  if (node.IsNull()) return std::string();
  if (!node.IsScalar()) return KeyError(key, "expected a string");
  return node.Scalar();
}

absl::StatusOr<bool> BoolValue(const YAML::Node& node, absl::string_view key) {
  if (!node.IsScalar()) return KeyError(key, "expected true or false");
  const std::string v = absl::AsciiStrToLower(node.Scalar());
  if (v == "true") return true;
  if (v == "false") return false;
  return KeyError(key, absl::StrCat("expected true or false, got '", node.Scalar(), "'"));
}

// Every entry of map `node`, in order, with string keys; an error names
// `path` when it is not a map.
absl::StatusOr<std::vector<std::pair<std::string, YAML::Node>>> MapEntries(const YAML::Node& node,
                                                                           absl::string_view path) {
  std::vector<std::pair<std::string, YAML::Node>> out;
  if (node.IsNull()) return out;
  if (!node.IsMap()) return KeyError(path, "expected a mapping");
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) return KeyError(path, "a key is not a string");
    out.emplace_back(kv.first.Scalar(), kv.second);
  }
  return out;
}

std::string Resolve(absl::string_view base_dir, const std::string& file) {
  if (file.empty() || file.front() == '/' || base_dir.empty()) return file;
  return absl::StrCat(base_dir, "/", file);
}

// exporter-toolkit keys this server does not implement: an error, never
// silently ignored (they are security settings).
constexpr absl::string_view kUnsupportedTlsKeys[] = {"cert",
                                                     "key",
                                                     "cipher_suites",
                                                     "curve_preferences",
                                                     "client_allowed_sans",
                                                     "prefer_server_cipher_suites"};

Status ParseTls(const YAML::Node& node, absl::string_view base_dir, WebConfig::Tls* tls) {
  constexpr absl::string_view kPath = "tls_server_config";
  auto entries = MapEntries(node, kPath);
  if (!entries.ok()) return entries.status();
  for (const auto& [key, value] : *entries) {
    const std::string path = Join(kPath, key);
    std::string* field = nullptr;
    if (key == "cert_file") field = &tls->cert_file;
    if (key == "key_file") field = &tls->key_file;
    if (key == "client_ca_file") field = &tls->client_ca_file;
    if (key == "client_auth_type") field = &tls->client_auth_type;
    if (key == "min_version") field = &tls->min_version;
    if (key == "max_version") field = &tls->max_version;
    if (field == nullptr) {
      for (absl::string_view k : kUnsupportedTlsKeys) {
        if (key == k) return KeyError(path, "not supported by fabricscope");
      }
      return KeyError(path, "unknown key");
    }
    auto v = ScalarValue(value, path);
    if (!v.ok()) return v.status();
    *field = *std::move(v);
  }
  if (tls->client_auth_type.empty()) tls->client_auth_type = "NoClientCert";
  if (tls->cert_file.empty()) return KeyError("tls_server_config.cert_file", "missing");
  if (tls->key_file.empty()) return KeyError("tls_server_config.key_file", "missing");
  const std::string& type = tls->client_auth_type;
  if (type == "RequestClientCert" || type == "RequireAnyClientCert") {
    return KeyError("tls_server_config.client_auth_type",
                    absl::StrCat(type,
                                 " (a certificate accepted unverified) is not supported; use "
                                 "VerifyClientCertIfGiven or RequireAndVerifyClientCert"));
  }
  if (type != "NoClientCert" && type != "VerifyClientCertIfGiven" &&
      type != "RequireAndVerifyClientCert") {
    return KeyError("tls_server_config.client_auth_type",
                    absl::StrCat("'", type,
                                 "': expected NoClientCert, VerifyClientCertIfGiven or "
                                 "RequireAndVerifyClientCert"));
  }
  if (type == "NoClientCert" && !tls->client_ca_file.empty()) {
    return KeyError("tls_server_config.client_ca_file",
                    "set, but client_auth_type is NoClientCert");
  }
  if (type != "NoClientCert" && tls->client_ca_file.empty()) {
    return KeyError("tls_server_config.client_ca_file",
                    absl::StrCat("missing (needed by ", type, ")"));
  }
  for (const auto& [key, v] :
       {std::pair<const char*, const std::string*>{"min_version", &tls->min_version},
        {"max_version", &tls->max_version}}) {
    if (!v->empty() && *v != "TLS10" && *v != "TLS11" && *v != "TLS12" && *v != "TLS13") {
      return KeyError(Join(kPath, key),
                      absl::StrCat("'", *v, "': expected TLS10, TLS11, TLS12 or TLS13"));
    }
  }
  tls->cert_file = Resolve(base_dir, tls->cert_file);
  tls->key_file = Resolve(base_dir, tls->key_file);
  tls->client_ca_file = Resolve(base_dir, tls->client_ca_file);
  return absl::OkStatus();
}

// Response headers the file may set (exporter-toolkit's list): the others
// belong to the server (Content-Type, Content-Length, WWW-Authenticate, ...).
constexpr absl::string_view kAllowedHeaders[] = {"Strict-Transport-Security",
                                                 "X-Content-Type-Options", "X-Frame-Options",
                                                 "X-XSS-Protection", "Content-Security-Policy"};

Status ParseHttp(const YAML::Node& node, WebConfig* config) {
  constexpr absl::string_view kPath = "http_server_config";
  auto entries = MapEntries(node, kPath);
  if (!entries.ok()) return entries.status();
  for (const auto& [key, value] : *entries) {
    const std::string path = Join(kPath, key);
    if (key == "http2") {  // HTTP/1.1 only: accepted, has no effect
      if (auto b = BoolValue(value, path); !b.ok()) return b.status();
      continue;
    }
    if (key != "headers") return KeyError(path, "unknown key");
    auto headers = MapEntries(value, path);
    if (!headers.ok()) return headers.status();
    for (const auto& [name, v] : *headers) {
      const std::string hpath = Join(path, name);
      bool allowed = false;
      for (absl::string_view h : kAllowedHeaders) allowed |= absl::EqualsIgnoreCase(name, h);
      if (!allowed) {
        return KeyError(hpath, absl::StrCat("header not allowed (allowed: ",
                                            absl::StrJoin(kAllowedHeaders, ", "), ")"));
      }
      auto s = ScalarValue(v, hpath);
      if (!s.ok()) return s.status();
      for (const char c : *s) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          return KeyError(hpath, "control character in the value");
        }
      }
      config->headers.emplace_back(name, *std::move(s));
    }
  }
  return absl::OkStatus();
}

bool IsBcryptHash(absl::string_view h) {
  // $2a$/$2b$/$2y$, two cost digits, '$', 53 characters of bcrypt's base64.
  if (h.size() != 60 || h[0] != '$' || h[1] != '2' || h[3] != '$' || h[6] != '$') return false;
  if (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') return false;
  if (!absl::ascii_isdigit(h[4]) || !absl::ascii_isdigit(h[5])) return false;
  for (char c : h.substr(7)) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '/') return false;
  }
  return true;
}

Status ParseUsers(const YAML::Node& node, WebConfig* config) {
  constexpr absl::string_view kPath = "basic_auth_users";
  auto entries = MapEntries(node, kPath);
  if (!entries.ok()) return entries.status();
  for (const auto& [user, value] : *entries) {
    const std::string path = Join(kPath, user);
    if (user.empty() || absl::StrContains(user, ':')) {
      return KeyError(path, "a user name must be non-empty and without ':'");
    }
    auto hash = ScalarValue(value, path);
    if (!hash.ok()) return hash.status();
    if (!IsBcryptHash(*hash)) {
      return KeyError(path, "expected a bcrypt hash ($2y$..., 60 characters; htpasswd -nBC 10)");
    }
    config->users.emplace_back(user, *std::move(hash));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '", path, "'"));
  std::string out(kMaxWebConfigBytes + 1, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  if (out.size() > kMaxWebConfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", path, "' is larger than ", kMaxWebConfigBytes, " bytes"));
  }
  return out;
}

}  // namespace

absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view yaml, absl::string_view base_dir) {
  if (yaml.size() > kMaxWebConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat("larger than ", kMaxWebConfigBytes, " bytes"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
  WebConfig config;
  try {
    auto entries = MapEntries(root, "(top level)");
    if (!entries.ok()) return entries.status();
    for (const auto& [key, value] : *entries) {
      Status s;
      if (key == "tls_server_config") {
        config.has_tls = true;
        s = ParseTls(value, base_dir, &config.tls);
      } else if (key == "http_server_config") {
        s = ParseHttp(value, &config);
      } else if (key == "basic_auth_users") {
        s = ParseUsers(value, &config);
      } else {
        s = KeyError(key,
                     "unknown key (expected tls_server_config, http_server_config or "
                     "basic_auth_users)");
      }
      if (!s.ok()) return s;
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
  return config;
}

absl::StatusOr<WebConfig> LoadWebConfig(const std::string& path) {
  auto text = ReadFile(path, "web.config.file");
  if (!text.ok()) return text.status();
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  auto config = ParseWebConfig(*text, dir);
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("web.config.file ", path, ": ", config.status().message()));
  }
  return config;
}

absl::StatusOr<TlsOptions> LoadTlsOptions(const WebConfig& config) {
  TlsOptions tls;
  auto cert = ReadFile(config.tls.cert_file, "tls_server_config.cert_file");
  if (!cert.ok()) return cert.status();
  auto key = ReadFile(config.tls.key_file, "tls_server_config.key_file");
  if (!key.ok()) return key.status();
  tls.cert_pem = *std::move(cert);
  tls.key_pem = *std::move(key);
  if (!config.tls.client_ca_file.empty()) {
    auto ca = ReadFile(config.tls.client_ca_file, "tls_server_config.client_ca_file");
    if (!ca.ok()) return ca.status();
    tls.client_ca_pem = *std::move(ca);
  }
  const std::string& type = config.tls.client_auth_type;
  tls.client_auth = type == "RequireAndVerifyClientCert" ? TlsOptions::ClientAuth::kRequireAndVerify
                    : type == "VerifyClientCertIfGiven"  ? TlsOptions::ClientAuth::kVerifyIfGiven
                                                         : TlsOptions::ClientAuth::kNone;
  tls.min_version = config.tls.min_version;
  tls.max_version = config.tls.max_version;
  return tls;
}

bool BcryptMatches(absl::string_view password, const std::string& hash) {
  if (password.find('\0') != absl::string_view::npos) return false;
  auto data = std::make_unique<crypt_data>();
  const std::string phrase(password);
  const char* out = crypt_rn(phrase.c_str(), hash.c_str(), data.get(), sizeof(crypt_data));
  if (out == nullptr || out[0] == '*') return false;
  const std::string result(out);
  if (result.size() != hash.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < hash.size(); ++i) diff |= static_cast<unsigned char>(result[i] ^ hash[i]);
  return diff == 0;
}

BasicAuthenticator::BasicAuthenticator(std::vector<std::pair<std::string, std::string>> users)
    : users_(std::move(users)) {
  // For unknown users: a well-formed hash that matches no password, at the
  // cost of the first user's (so the time taken does not tell them apart).
  const std::string cost = users_.empty() ? "10" : users_.front().second.substr(4, 2);
  dummy_hash_ = absl::StrCat("$2y$", cost, "$", std::string(53, 'A'));
}

bool BasicAuthenticator::Check(const std::string& user, const std::string& password) const {
  const std::string* hash = &dummy_hash_;
  for (const auto& [u, h] : users_) {
    if (u == user) hash = &h;
  }
  std::string key;
  {
    const std::string material = absl::StrCat(user.size(), ":", user, password, "\n", *hash);
    unsigned char digest[32];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA256, material.data(), material.size(), digest) == 0) {
      key.assign(reinterpret_cast<const char*>(digest), sizeof(digest));
    }
  }
  if (!key.empty()) {
    std::lock_guard lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return true;
    }
  }
  const bool ok = BcryptMatches(password, *hash) && hash != &dummy_hash_;
  if (ok && !key.empty()) {
    std::lock_guard lock(mu_);
    if (!cache_.contains(key)) {
      lru_.push_front(key);
      cache_.emplace(key, lru_.begin());
      if (lru_.size() > kCacheEntries) {
        cache_.erase(lru_.back());
        lru_.pop_back();
      }
    }
  }
  return ok;
}

}  // namespace fabricscope
