#include "exporters/web_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

using ::testing::HasSubstr;

// bcrypt hashes of "s3cret-pass" ($2b$, cost 4) and of "other" ($2y$, cost
// 4), made with libcrypt (crypt(3)) for these tests.
constexpr char kHashSecret[] = "$2b$04$unitTestSaltUnitTestSODIVnUFTSBCvJqRnRv8ZwYC8UIO7KOsG";
constexpr char kHashOther[] = "$2y$04$unitTestSaltUnitTestSOnEIPDnS/4T.0.1HRH.ZQ6Mv1qhB93Ii";

std::string Error(absl::string_view yaml) {
  auto c = ParseWebConfig(yaml, "/etc/fs");
  EXPECT_FALSE(c.ok()) << yaml;
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(WebConfigTest, ParsesTheExporterToolkitFormat) {
  auto c = ParseWebConfig(absl::StrCat(R"(tls_server_config:
  cert_file: server.pem
  key_file: /keys/server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.pem
  min_version: TLS13
http_server_config:
  http2: true
  headers:
    X-Frame-Options: deny
basic_auth_users:
  prometheus: )",
                                       kHashSecret, "\n  grafana: ", kHashOther, "\n"),
                          "/etc/fs");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->has_tls);
  EXPECT_EQ(c->tls.cert_file, "/etc/fs/server.pem");  // relative: to the file's directory
  EXPECT_EQ(c->tls.key_file, "/keys/server.key");
  EXPECT_EQ(c->tls.client_ca_file, "/etc/fs/ca.pem");
  EXPECT_EQ(c->tls.client_auth_type, "RequireAndVerifyClientCert");
  EXPECT_EQ(c->tls.min_version, "TLS13");
  ASSERT_EQ(c->headers.size(), 1u);
  EXPECT_EQ(c->headers[0].first, "X-Frame-Options");
  EXPECT_EQ(c->headers[0].second, "deny");
  ASSERT_EQ(c->users.size(), 2u);
  EXPECT_EQ(c->users[0].first, "prometheus");
  EXPECT_EQ(c->users[1].second, kHashOther);
}

TEST(WebConfigTest, EmptyFileMeansPlainHttpWithoutAuth) {
  auto c = ParseWebConfig("", "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->has_tls);
  EXPECT_TRUE(c->users.empty());
}

TEST(WebConfigTest, ErrorsNameTheKey) {
  EXPECT_THAT(Error("basic_auth_user:\n  a: b\n"), HasSubstr("basic_auth_user: unknown key"));
  EXPECT_THAT(Error("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_typo: x\n"),
              HasSubstr("tls_server_config.client_auth_typo: unknown key"));
  EXPECT_THAT(Error("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [x]\n"),
              HasSubstr("tls_server_config.cipher_suites: not supported"));
  EXPECT_THAT(Error("http_server_config:\n  header: {}\n"),
              HasSubstr("http_server_config.header: unknown key"));
  EXPECT_THAT(Error("tls_server_config:\n  cert_file: a\n"),
              HasSubstr("tls_server_config.key_file: missing"));
  EXPECT_THAT(Error("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n"),
              HasSubstr("client_ca_file: set, but client_auth_type is NoClientCert"));
  EXPECT_THAT(Error("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: "
                    "RequireAndVerifyClientCert\n"),
              HasSubstr("tls_server_config.client_ca_file: missing"));
  EXPECT_THAT(Error("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: "
                    "RequestClientCert\n  client_ca_file: c\n"),
              HasSubstr("RequestClientCert (a certificate accepted unverified) is not supported"));
  EXPECT_THAT(Error("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS9\n"),
              HasSubstr("tls_server_config.min_version: 'TLS9'"));
  EXPECT_THAT(Error("basic_auth_users:\n  alice: plaintext\n"),
              HasSubstr("basic_auth_users.alice: expected a bcrypt hash"));
  EXPECT_THAT(Error("http_server_config:\n  headers:\n    Content-Type: text/html\n"),
              HasSubstr("http_server_config.headers.Content-Type: header not allowed"));
  EXPECT_THAT(Error("tls_server_config: [a, b]\n"),
              HasSubstr("tls_server_config: expected a mapping"));
  EXPECT_THAT(Error("basic_auth_users:\n  alice: [x\n"), HasSubstr("line "));
}

TEST(WebConfigTest, LoadReportsTheFile) {
  auto c = LoadWebConfig("/nonexistent/web.yml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/web.yml"));
}

TEST(WebConfigTest, BcryptVerifiesWithLibcrypt) {
  EXPECT_TRUE(BcryptMatches("s3cret-pass", kHashSecret));
  EXPECT_FALSE(BcryptMatches("s3cret-pas", kHashSecret));
  EXPECT_FALSE(BcryptMatches("", kHashSecret));
  EXPECT_TRUE(BcryptMatches("other", kHashOther));  // $2y$
  EXPECT_FALSE(BcryptMatches("s3cret-pass", kHashOther));
  EXPECT_FALSE(BcryptMatches("s3cret-pass", "not a hash"));
}

TEST(WebConfigTest, AuthenticatorCachesOnlySuccesses) {
  BasicAuthenticator auth({{"prometheus", kHashSecret}, {"grafana", kHashOther}});
  EXPECT_FALSE(auth.empty());
  for (int i = 0; i < 3; ++i) {  // the second and third answer from the cache
    EXPECT_TRUE(auth.Check("prometheus", "s3cret-pass"));
    EXPECT_FALSE(auth.Check("prometheus", "wrong"));
    EXPECT_FALSE(auth.Check("grafana", "s3cret-pass"));  // another user's password
    EXPECT_FALSE(auth.Check("nobody", "s3cret-pass"));
  }
  EXPECT_TRUE(auth.Check("grafana", "other"));
  EXPECT_TRUE(BasicAuthenticator({}).empty());
}

}  // namespace
}  // namespace fabricscope
