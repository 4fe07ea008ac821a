// A small HTTP/HTTPS server for /metrics and the probes, over libmicrohttpd
// (Debian's libmicrohttpd12, TLS through GnuTLS).
//
// Every request is answered by one HttpHandler: it receives the method, the
// path (without the query string), the request headers with lower-cased
// names and the peer address, and returns the whole response. Request bodies
// are read and discarded (the endpoints are GET only).
//
// Bounds: a fixed pool of kThreads worker threads multiplexes the connections
// (non-blocking sockets: a peer that never reads its answer or never sends a
// request holds a connection slot, not a thread), at most kMaxConnections
// connections, kMaxConnectionMemory bytes of request buffer each (longer
// headers are answered 431 by the library), and a connection idle for
// kIdleTimeoutSeconds is closed.
//
// TLS (TlsOptions): certificate and key in PEM; with a client CA, clients are
// asked for a certificate, and with `require_client_cert` a connection whose
// client presents no certificate signed by that CA fails in the TLS handshake.
//
// Thread-safety: the handler runs on the worker threads, concurrently; it
// must be thread-safe. Start/destruction are not concurrent with anything.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

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
  // Fail the handshake of a client without a certificate that client_ca_pem
  // verifies (needs client_ca_pem).
  bool require_client_cert = false;
  // "TLS10".."TLS13" (exporter-toolkit's min_version names); empty: TLS 1.2.
  std::string min_version;
};

class HttpServer {
 public:
  static constexpr int kThreads = 8;
  static constexpr int kMaxConnections = 256;
  static constexpr int kIdleTimeoutSeconds = 5;
  static constexpr size_t kMaxConnectionMemory = 64 * 1024;

  // Binds `listen` (HOST:PORT, [V6HOST]:PORT; port 0 picks a free port) and
  // serves `handler` on it, over TLS when `tls` is set. With `reuse_port` the
  // socket is bound with SO_REUSEPORT, so that a second server can bind the
  // same port while this one still runs (a TLS reload swaps servers so).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           HttpHandler handler,
                                                           const TlsOptions* tls = nullptr,
                                                           bool reuse_port = false);
  // Stops accepting, closes every connection and joins the workers.
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
  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_ = 0;
};

}  // namespace fabricscope
