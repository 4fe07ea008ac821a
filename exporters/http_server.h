// A small HTTP/HTTPS server for /metrics and the probes, over libmicrohttpd
// (Debian's libmicrohttpd12, TLS through GnuTLS).
//
// Every request is answered by one HttpHandler: it receives the method, the
// path (without the query string), the request headers with lower-cased
// names and the peer address, and returns the whole response. Request bodies
// are read and discarded (the endpoints are GET only).
//
// Bounds (HttpServerOptions): a fixed pool of kThreads worker threads
// multiplexes the connections (non-blocking sockets: a peer that never reads
// its answer or never sends a request holds a connection slot, not a thread);
// at most max_connections connections, of which at most
// max_connections_per_address from one client address (one more is accepted
// and closed at once), so that one client cannot take every slot;
// kMaxConnectionMemory bytes of request buffer each (a longer request line or
// header block is refused by the library); a connection idle for
// idle_timeout_seconds is closed; and a request (TLS handshake, headers and
// body) must arrive whole within request_deadline of the connection's start
// or of the previous answer, else the connection is closed -- a client that
// trickles a header byte every few seconds is never idle, but it is late.
//
// TLS (TlsOptions): certificate and key in PEM; with a client CA, clients are
// asked for a certificate, and one that the CA does not verify (or none, when
// required) fails the TLS handshake.
//
// Thread-safety: the handler runs on the worker threads, concurrently; it
// must be thread-safe, and so must on_request_deadline (the deadline thread).
// Start/destruction are not concurrent with anything.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fabricscope {

struct HttpRequest {
  std::string method;  // "GET", "HEAD", ...
  std::string path;    // "/metrics": the URL path without the query string
  // Header name (lower case) -> value; a repeated header keeps the values
  // joined with ", " (RFC 9110 list semantics).
  absl::flat_hash_map<std::string, std::string> headers;
  std::string peer;  // "127.0.0.1:53412"
  bool tls = false;  // served over TLS
  // Over TLS: the client presented a certificate that the client CA verified.
  bool client_cert_verified = false;

  // The header's value, "" when absent. `lower_name` is lower case.
  const std::string& Header(const std::string& lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
  std::string body;  // not sent for HEAD (Content-Length still is)
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct TlsOptions {
  std::string cert_pem;       // certificate (chain), PEM
  std::string key_pem;        // its private key, PEM (unencrypted)
  std::string client_ca_pem;  // empty: no client certificates are requested
  enum class ClientAuth {
    kNone,              // no certificate requested
    kVerifyIfGiven,     // requested; one that is given must verify
    kRequireAndVerify,  // required, and must verify
  };
  // kVerifyIfGiven and kRequireAndVerify need client_ca_pem; a certificate
  // that does not verify, or a missing required one, fails the handshake.
  ClientAuth client_auth = ClientAuth::kNone;
  // "TLS10".."TLS13" (exporter-toolkit's names); empty: TLS12 and TLS13.
  std::string min_version, max_version;

  bool operator==(const TlsOptions&) const = default;
};

// Connection limits and deadlines (the defaults are the daemon's).
struct HttpServerOptions {
  int max_connections = 512;
  // A Prometheus server scrapes from one address with one connection per
  // target; 32 leave room for probes and curl while 16 clients at the limit
  // still leave the rest of the slots free.
  int max_connections_per_address = 32;
  int idle_timeout_seconds = 5;
  absl::Duration request_deadline = absl::Seconds(10);
  // Called each time a connection is closed for its request deadline.
  std::function<void()> on_request_deadline;
};

class HttpServer {
 public:
  static constexpr int kThreads = 8;
  static constexpr size_t kMaxConnectionMemory = 64 * 1024;

  // Binds `listen` (HOST:PORT, [V6HOST]:PORT; port 0 picks a free port) and
  // serves `handler` on it, over TLS when `tls` is set.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           HttpHandler handler,
                                                           const TlsOptions* tls = nullptr,
                                                           HttpServerOptions options = {});
  // A new server on this one's listening socket, with the same handler,
  // options and `tls` (null: plain HTTP) -- how TLS settings change at run time. Both
  // accept until this one is destroyed, so no connection is refused in
  // between; an error leaves this one as it was.
  absl::StatusOr<std::unique_ptr<HttpServer>> Successor(const TlsOptions* tls) const;
  // Stops accepting, closes every connection it holds and joins the workers
  // (the listening socket stays open while a successor uses it).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound address with the real port, e.g. "127.0.0.1:40123".
  const std::string& address() const { return address_; }
  int port() const { return port_; }

  // Internal (the libmicrohttpd state; http_server.cc).
  struct Impl;

 private:
  HttpServer() = default;
  // Starts the libmicrohttpd daemon on `listen_fd`.
  static absl::StatusOr<std::unique_ptr<HttpServer>> StartOn(std::shared_ptr<const int> listen_fd,
                                                             bool ipv6, std::string address,
                                                             int port, HttpHandler handler,
                                                             const TlsOptions* tls,
                                                             HttpServerOptions options);
  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_ = 0;
};

}  // namespace fabricscope
