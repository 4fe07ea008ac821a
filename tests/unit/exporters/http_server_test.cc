#include "exporters/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sends `request` to 127.0.0.1:`port` and returns everything the server
// answers until it closes the connection.
std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

TEST(HttpServerTest, PassesTheRequestAndSendsTheResponse) {
  std::atomic<int> calls{0};
  auto server = HttpServer::Start("127.0.0.1:0", [&](const HttpRequest& req) {
    ++calls;
    HttpResponse r;
    r.status = req.path == "/metrics" ? 200 : 404;
    r.content_type = "text/plain; version=0.0.4";
    r.headers.emplace_back("X-Seen", req.Header("x-custom"));
    r.body = req.method + " " + req.path + " " + (req.tls ? "tls" : "plain") + " " +
             (req.peer.rfind("127.0.0.1:", 0) == 0 ? "local" : req.peer);
    return r;
  });
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->address(), "127.0.0.1:" + std::to_string((*server)->port()));

  const std::string a = Exchange((*server)->port(),
                                 "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nX-CUSTOM: a\r\n"
                                 "x-custom: b\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(a, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(a, HasSubstr("Content-Type: text/plain; version=0.0.4\r\n"));
  EXPECT_THAT(a, HasSubstr("X-Seen: a, b\r\n"));  // lower-cased names, repeated values joined
  EXPECT_THAT(a, HasSubstr("\r\n\r\nGET /metrics plain local"));

  const std::string b =
      Exchange((*server)->port(), "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(b, StartsWith("HTTP/1.1 404"));
  EXPECT_EQ(calls.load(), 2);

  // A header block beyond the per-connection buffer never reaches the handler.
  const std::string c = Exchange(
      (*server)->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " +
                             std::string(2 * HttpServer::kMaxConnectionMemory, 'a') + "\r\n\r\n");
  EXPECT_THAT(c, StartsWith("HTTP/1.1 431"));
  EXPECT_EQ(calls.load(), 2);
}

TEST(HttpServerTest, SuccessorServesOnTheSameSocket) {
  auto make = [](std::string tag) {
    return [tag](const HttpRequest&) {
      HttpResponse r;
      r.body = tag;
      return r;
    };
  };
  auto first = HttpServer::Start("127.0.0.1:0", make("first"));
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = (*first)->Successor(nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->port(), port);
  first->reset();  // the successor keeps the listening socket
  const std::string a = Exchange(port, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(a, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(a, HasSubstr("\r\n\r\nfirst"));  // the successor keeps the handler
}

TEST(HttpServerTest, RefusesBadTlsAndAddresses) {
  auto noop = [](const HttpRequest&) { return HttpResponse(); };
  TlsOptions tls;
  tls.cert_pem = "not a certificate";
  tls.key_pem = "not a key";
  EXPECT_FALSE(HttpServer::Start("127.0.0.1:0", noop, &tls).ok());
  tls.client_auth = TlsOptions::ClientAuth::kRequireAndVerify;
  EXPECT_FALSE(HttpServer::Start("127.0.0.1:0", noop, &tls).ok());  // no client CA
  EXPECT_FALSE(HttpServer::Start("no-port", noop).ok());
  auto taken = HttpServer::Start("127.0.0.1:0", noop);
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(HttpServer::Start((*taken)->address(), noop).ok());  // in use
}

}  // namespace
}  // namespace fabricscope
