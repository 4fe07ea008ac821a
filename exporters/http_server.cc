#include "exporters/http_server.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace fabricscope {

const std::string& HttpRequest::Header(const std::string& lower_name) const {
  static const std::string* const kEmpty = new std::string();
  auto it = headers.find(lower_name);
  return it == headers.end() ? *kEmpty : it->second;
}

struct HttpServer::Impl {
  HttpHandler handler;
  HttpServerOptions options;
  std::shared_ptr<const int> listen_fd;  // closed when the last server goes
  bool ipv6 = false;
  bool tls = false;
  TlsOptions tls_options;
  std::string priorities;  // kept: libmicrohttpd keeps the option pointers
  MHD_Daemon* daemon = nullptr;

  // The request deadline. libmicrohttpd's own timeout closes only silent
  // connections, so a thread of ours watches when each connection's pending
  // request is due and shuts its socket down (shutdown(2), never close: the
  // library owns the descriptor and closes it once it sees the end). A
  // connection is registered when the library starts it and removed in its
  // close notification; the socket's inode is compared before the shutdown,
  // so a descriptor number that was closed and reused in between is left
  // alone.
  struct Pending {
    int fd = -1;
    ino_t inode = 0;
    std::chrono::steady_clock::time_point due;  // max(): no request pending
  };
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;                                        // guarded by mu
  absl::flat_hash_map<const MHD_Connection*, Pending> pending;  // guarded by mu
  std::thread deadline_thread;

  void Arm(const MHD_Connection* conn) {
    std::lock_guard lock(mu);
    auto it = pending.find(conn);
    if (it != pending.end()) {
      it->second.due =
          std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(options.request_deadline);
    }
  }
  void Disarm(const MHD_Connection* conn) {
    std::lock_guard lock(mu);
    auto it = pending.find(conn);
    if (it != pending.end()) it->second.due = std::chrono::steady_clock::time_point::max();
  }
  void WatchDeadlines();
};

void HttpServer::Impl::WatchDeadlines() {
  using Clock = std::chrono::steady_clock;
  // A quarter of the deadline, at most 250 ms: a late request is closed
  // within 1.25 deadlines.
  const auto period = std::min<Clock::duration>(
      std::chrono::milliseconds(250), absl::ToChronoNanoseconds(options.request_deadline / 4));
  std::unique_lock lock(mu);
  while (!stopping) {
    wake.wait_for(lock, period);
    const Clock::time_point now = Clock::now();
    for (auto& [conn, p] : pending) {
      if (p.due > now) continue;
      p.due = Clock::time_point::max();  // once
      struct stat st {};
      if (fstat(p.fd, &st) != 0 || st.st_ino != p.inode) continue;
      // Counted first: the peer sees the end as soon as the socket is shut.
      if (options.on_request_deadline) options.on_request_deadline();
      shutdown(p.fd, SHUT_RDWR);
    }
  }
}

namespace {

// The GnuTLS priority string for exporter-toolkit min/max version names.
absl::StatusOr<std::string> Priorities(const std::string& min_version,
                                       const std::string& max_version) {
  static constexpr const char* kNames[] = {"TLS10", "TLS11", "TLS12", "TLS13"};
  static constexpr const char* kGnutls[] = {"+VERS-TLS1.0", "+VERS-TLS1.1", "+VERS-TLS1.2",
                                            "+VERS-TLS1.3"};
  auto index = [](const std::string& v, int dflt) -> int {
    if (v.empty()) return dflt;
    for (int i = 0; i < 4; ++i) {
      if (v == kNames[i]) return i;
    }
    return -1;
  };
  const int lo = index(min_version, 2);
  const int hi = index(max_version, 3);
  if (lo < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_version '", min_version, "': expected TLS10, TLS11, TLS12 or TLS13"));
  }
  if (hi < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_version '", max_version, "': expected TLS10, TLS11, TLS12 or TLS13"));
  }
  if (lo > hi) return absl::InvalidArgumentError("min_version is above max_version");
  std::string out = "NORMAL:-VERS-ALL";
  for (int i = hi; i >= lo; --i) absl::StrAppend(&out, ":", kGnutls[i]);
  return out;
}

std::string SockaddrString(const sockaddr* sa) {
  if (sa == nullptr) return "";
  char host[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return absl::StrCat(host, ":", ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    return absl::StrCat("[", host, "]:", ntohs(in->sin6_port));
  }
  return "";
}

MHD_Result CollectHeader(void* cls, MHD_ValueKind /*kind*/, const char* key, const char* value) {
  auto* headers = static_cast<absl::flat_hash_map<std::string, std::string>*>(cls);
  if (key == nullptr) return MHD_YES;
  std::string name = absl::AsciiStrToLower(key);
  auto [it, inserted] = headers->try_emplace(std::move(name), value == nullptr ? "" : value);
  if (!inserted) absl::StrAppend(&it->second, ", ", value == nullptr ? "" : value);
  return MHD_YES;
}

// True when the TLS peer presented a certificate that the trust list (the
// client CA) verifies.
bool PeerVerified(void* tls_session) {
  if (tls_session == nullptr) return false;
  auto session = static_cast<gnutls_session_t>(tls_session);
  unsigned int n = 0;
  if (gnutls_certificate_get_peers(session, &n) == nullptr || n == 0) return false;
  unsigned int status = 0;
  return gnutls_certificate_verify_peers2(session, &status) == GNUTLS_E_SUCCESS && status == 0;
}

// Connection start: with client authentication, the TLS session is told to
// request (or demand) a certificate and to verify a given one against the
// trust list during the handshake (libmicrohttpd itself only requests it and
// leaves the verification to the application).
void OnConnection(void* cls, MHD_Connection* conn, void** /*socket_context*/,
                  MHD_ConnectionNotificationCode toe) {
  auto* impl = static_cast<HttpServer::Impl*>(cls);
  if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    std::lock_guard lock(impl->mu);
    impl->pending.erase(conn);
    return;
  }
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const MHD_ConnectionInfo* fd_info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct stat st {};
    if (fd_info != nullptr && fstat(fd_info->connect_fd, &st) == 0) {
      std::lock_guard lock(impl->mu);
      impl->pending[conn] = {fd_info->connect_fd, st.st_ino,
                             std::chrono::steady_clock::now() +
                                 absl::ToChronoNanoseconds(impl->options.request_deadline)};
    }
  }
  const TlsOptions::ClientAuth mode = impl->tls_options.client_auth;
  if (toe != MHD_CONNECTION_NOTIFY_STARTED || !impl->tls || mode == TlsOptions::ClientAuth::kNone) {
    return;
  }
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  gnutls_certificate_server_set_request(session, mode == TlsOptions::ClientAuth::kRequireAndVerify
                                                     ? GNUTLS_CERT_REQUIRE
                                                     : GNUTLS_CERT_REQUEST);
  gnutls_session_set_verify_cert(session, nullptr, 0);
}

void FreeString(void* cls) { delete static_cast<std::string*>(cls); }

// A request was answered (or abandoned): the next one on this connection is
// due within the deadline from now.
void OnCompleted(void* cls, MHD_Connection* conn, void** /*con_cls*/,
                 MHD_RequestTerminationCode /*toe*/) {
  static_cast<HttpServer::Impl*>(cls)->Arm(conn);
}

// One marker per request (libmicrohttpd calls the handler first with no
// body, then for each body chunk, then once more).
int g_request_marker;

MHD_Result Handle(void* cls, MHD_Connection* conn, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                  void** con_cls) {
  auto* impl = static_cast<HttpServer::Impl*>(cls);
  if (*con_cls == nullptr) {
    *con_cls = &g_request_marker;
    return MHD_YES;
  }
  if (*upload_data_size != 0) {  // a body: read and dropped
    *upload_data_size = 0;
    return MHD_YES;
  }
  // The whole request is here: no deadline while it is answered (the idle
  // timeout covers a client that does not read the answer).
  impl->Disarm(conn);
  HttpRequest req;
  req.method = method == nullptr ? "" : method;
  req.path = url == nullptr ? "" : url;
  MHD_get_connection_values(conn, MHD_HEADER_KIND, CollectHeader, &req.headers);
  const MHD_ConnectionInfo* addr =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (addr != nullptr) req.peer = SockaddrString(addr->client_addr);
  if (impl->tls) {
    req.tls = true;
    const MHD_ConnectionInfo* s = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    req.client_cert_verified = s != nullptr && PeerVerified(s->tls_session);
    // The handshake already enforces it; a session that got through anyway
    // is closed without an answer.
    const TlsOptions::ClientAuth mode = impl->tls_options.client_auth;
    if (mode == TlsOptions::ClientAuth::kRequireAndVerify && !req.client_cert_verified) {
      return MHD_NO;
    }
    if (mode == TlsOptions::ClientAuth::kVerifyIfGiven && !req.client_cert_verified &&
        s != nullptr && s->tls_session != nullptr) {
      unsigned int n = 0;
      if (gnutls_certificate_get_peers(static_cast<gnutls_session_t>(s->tls_session), &n) !=
              nullptr &&
          n > 0) {
        return MHD_NO;
      }
    }
  }
  HttpResponse resp;
  try {
    resp = impl->handler(req);
  } catch (const std::exception& e) {
    resp = HttpResponse();
    resp.status = 500;
    resp.body = absl::StrCat("internal error: ", e.what(), "\n");
  }
  auto* body = new std::string(std::move(resp.body));
  MHD_Response* r = MHD_create_response_from_buffer_with_free_callback_cls(
      body->size(), body->data(), FreeString, body);
  if (r == nullptr) {
    delete body;
    return MHD_NO;
  }
  if (!resp.content_type.empty()) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp.content_type.c_str());
  }
  for (const auto& [name, value] : resp.headers) {
    MHD_add_response_header(r, name.c_str(), value.c_str());
  }
  const MHD_Result ret = MHD_queue_response(conn, static_cast<unsigned>(resp.status), r);
  MHD_destroy_response(r);
  return ret;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              HttpHandler handler,
                                                              const TlsOptions* tls,
                                                              HttpServerOptions options) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", listen, "': expected HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int gai = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (gai != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", listen, "': ", gai_strerror(gai)));
  }
  const int family = res->ai_family;
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  auto listen_fd = std::shared_ptr<const int>(new int(fd), [](const int* p) {
    close(*p);
    delete p;
  });
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int bound = bind(fd, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (bound != 0 || ::listen(fd, 128) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, ": ", std::strerror(errno)));
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  int real_port = 0;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    real_port = local.ss_family == AF_INET6
                    ? ntohs(reinterpret_cast<const sockaddr_in6*>(&local)->sin6_port)
                    : ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
  }
  return StartOn(std::move(listen_fd), family == AF_INET6,
                 absl::StrCat(listen.substr(0, colon), ":", real_port), real_port,
                 std::move(handler), tls, std::move(options));
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Successor(const TlsOptions* tls) const {
  return StartOn(impl_->listen_fd, impl_->ipv6, address_, port_, impl_->handler, tls,
                 impl_->options);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::StartOn(
    std::shared_ptr<const int> listen_fd, bool ipv6, std::string address, int port,
    HttpHandler handler, const TlsOptions* tls, HttpServerOptions options) {
  if (options.max_connections < 1 || options.max_connections_per_address < 1 ||
      options.idle_timeout_seconds < 1 || options.request_deadline < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError("HTTP server limits must be positive");
  }
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>();
  Impl* impl = s->impl_.get();
  impl->handler = std::move(handler);
  impl->options = std::move(options);
  impl->listen_fd = std::move(listen_fd);
  impl->ipv6 = ipv6;
  // ITC: needed to quiesce (stop accepting, keep the socket) a pooled daemon.
  unsigned int flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
  if (ipv6) flags |= MHD_USE_IPv6;
  std::vector<MHD_OptionItem> mhd_options = {
      {MHD_OPTION_LISTEN_SOCKET, *impl->listen_fd, nullptr},
      {MHD_OPTION_THREAD_POOL_SIZE, kThreads, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, impl->options.max_connections, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, impl->options.max_connections_per_address, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, impl->options.idle_timeout_seconds, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(kMaxConnectionMemory), nullptr},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&OnConnection), impl},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&OnCompleted), impl},
  };
  if (tls != nullptr) {
    if (tls->cert_pem.empty() || tls->key_pem.empty()) {
      return absl::InvalidArgumentError("TLS needs a certificate and a key");
    }
    if (tls->client_auth != TlsOptions::ClientAuth::kNone && tls->client_ca_pem.empty()) {
      return absl::InvalidArgumentError("client certificate verification needs a client CA");
    }
    auto prio = Priorities(tls->min_version, tls->max_version);
    if (!prio.ok()) return prio.status();
    impl->tls = true;
    impl->tls_options = *tls;
    impl->priorities = *std::move(prio);
    flags |= MHD_USE_TLS;
    mhd_options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, impl->tls_options.cert_pem.data()});
    mhd_options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, impl->tls_options.key_pem.data()});
    mhd_options.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, impl->priorities.data()});
    if (!impl->tls_options.client_ca_pem.empty()) {
      mhd_options.push_back(
          {MHD_OPTION_HTTPS_MEM_TRUST, 0, impl->tls_options.client_ca_pem.data()});
    }
  }
  mhd_options.push_back({MHD_OPTION_END, 0, nullptr});
  impl->daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &Handle, impl, MHD_OPTION_ARRAY,
                                  mhd_options.data(), MHD_OPTION_END);
  if (impl->daemon == nullptr) {
    return absl::UnavailableError(
        tls != nullptr ? "cannot start the HTTPS server (a certificate, key or CA that GnuTLS "
                         "refused, or they do not match)"
                       : "cannot start the HTTP server");
  }
  impl->deadline_thread = std::thread([impl] { impl->WatchDeadlines(); });
  s->address_ = std::move(address);
  s->port_ = port;
  return s;
}

HttpServer::~HttpServer() {
  if (impl_ == nullptr || impl_->daemon == nullptr) return;
  // Quiesced first: stopping then leaves the listening socket (shared with a
  // successor) open; the last owner of listen_fd closes it.
  MHD_quiesce_daemon(impl_->daemon);
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->deadline_thread.joinable()) impl_->deadline_thread.join();
  MHD_stop_daemon(impl_->daemon);
}

}  // namespace fabricscope
