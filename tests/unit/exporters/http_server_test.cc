#include "exporters/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace http_server_test {
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

// A connected socket from `source` (a loopback address: 127.0.0.2 is a
// second client) to 127.0.0.1:`port`, or -1.
int Connect(int port, const char* source = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// True when the server has closed `fd` (EOF or reset), waiting at most
// `wait_ms` for it.
bool ClosedByServer(int fd, int wait_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

// A whole GET from `source`, answered or not ("" when closed unanswered).
std::string Get(int port, const char* source) {
  const int fd = Connect(port, source);
  if (fd < 0) return "";
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::string out;
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, n);
  }
  close(fd);
  return out;
}

HttpResponse Ok(const HttpRequest&) {
  HttpResponse r;
  r.body = "ok";
  return r;
}

// A client that sends a header byte every 200 ms is never idle (the idle
// timeout is 5 s) but its request is late: closed at the 1 s deadline.
TEST(HttpServerTest, ATricklingRequestIsClosedAtItsDeadline) {
  std::atomic<int> closed{0};
  HttpServerOptions options;
  options.request_deadline = absl::Seconds(1);
  options.on_request_deadline = [&] { ++closed; };
  auto server = HttpServer::Start("127.0.0.1:0", Ok, nullptr, options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = Connect((*server)->port());
  ASSERT_GE(fd, 0);
  const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: ";
  ASSERT_EQ(send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  bool was_closed = false;
  for (int i = 0; i < 50 && !was_closed; ++i) {  // at most 10 s
    if (send(fd, "a", 1, MSG_NOSIGNAL) != 1) {
      was_closed = true;
      break;
    }
    was_closed = ClosedByServer(fd, 200);
  }
  close(fd);
  EXPECT_TRUE(was_closed) << "a request trickled for 10 s was never closed";
  EXPECT_EQ(closed.load(), 1);
  // A prompt request on a kept-alive connection is not touched.
  EXPECT_THAT(Get((*server)->port(), "127.0.0.1"), StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(closed.load(), 1);
}

// One address holding its whole share of slots cannot lock out another
// address; its own connections beyond the share are closed at once.
TEST(HttpServerTest, OneAddressCannotTakeEverySlot) {
  HttpServerOptions options;
  options.max_connections = 16;
  options.max_connections_per_address = 4;
  auto server = HttpServer::Start("127.0.0.1:0", Ok, nullptr, options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::vector<int> held;
  for (int i = 0; i < 12; ++i) {  // 4 held, 8 closed by the server
    const int fd = Connect(port);
    ASSERT_GE(fd, 0);
    send(fd, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL);
    held.push_back(fd);
  }
  int refused = 0;
  for (int fd : held) refused += ClosedByServer(fd, 500) ? 1 : 0;
  EXPECT_EQ(refused, 8);
  EXPECT_THAT(Get(port, "127.0.0.2"), StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(Get(port, "127.0.0.1"), "");  // the held address is at its limit
  for (int fd : held) close(fd);
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
}  // namespace http_server_test
}  // namespace fabricscope
