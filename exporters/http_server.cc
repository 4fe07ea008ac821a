#include "exporters/http_server.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

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
  bool tls = false;
  bool require_client_cert = false;
  // Kept for the daemon's lifetime: libmicrohttpd keeps the pointers.
  std::string cert_pem, key_pem, client_ca_pem, priorities;
  MHD_Daemon* daemon = nullptr;
};

namespace {

// The GnuTLS priority string for an exporter-toolkit min_version.
absl::StatusOr<std::string> Priorities(const std::string& min_version) {
  const std::string v = min_version.empty() ? "TLS12" : min_version;
  std::string versions;
  if (v == "TLS13") {
    versions = "+VERS-TLS1.3";
  } else if (v == "TLS12") {
    versions = "+VERS-TLS1.3:+VERS-TLS1.2";
  } else if (v == "TLS11") {
    versions = "+VERS-TLS1.3:+VERS-TLS1.2:+VERS-TLS1.1";
  } else if (v == "TLS10") {
    versions = "+VERS-TLS1.3:+VERS-TLS1.2:+VERS-TLS1.1:+VERS-TLS1.0";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("min_version '", v, "': expected TLS10, TLS11, TLS12 or TLS13"));
  }
  return absl::StrCat("NORMAL:-VERS-ALL:", versions);
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

// Connection start: with a required client certificate, the TLS session is
// told to demand one and to verify it against the trust list during the
// handshake (libmicrohttpd itself only requests it).
void OnConnection(void* cls, MHD_Connection* conn, void** /*socket_context*/,
                  MHD_ConnectionNotificationCode toe) {
  const auto* impl = static_cast<const HttpServer::Impl*>(cls);
  if (toe != MHD_CONNECTION_NOTIFY_STARTED || !impl->require_client_cert) return;
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
  gnutls_session_set_verify_cert(session, nullptr, 0);
}

void FreeString(void* cls) { delete static_cast<std::string*>(cls); }

// One marker per request (libmicrohttpd calls the handler first with no
// body, then for each body chunk, then once more).
int g_request_marker;

MHD_Result Handle(void* cls, MHD_Connection* conn, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                  void** con_cls) {
  const auto* impl = static_cast<const HttpServer::Impl*>(cls);
  if (*con_cls == nullptr) {
    *con_cls = &g_request_marker;
    return MHD_YES;
  }
  if (*upload_data_size != 0) {  // a body: read and dropped
    *upload_data_size = 0;
    return MHD_YES;
  }
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
    // The handshake already demands it; a session that got through without
    // one (a library that ignored the request) is closed without an answer.
    if (impl->require_client_cert && !req.client_cert_verified) return MHD_NO;
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
                                                              bool reuse_port) {
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
  sockaddr_storage addr{};
  std::memcpy(&addr, res->ai_addr, std::min<size_t>(res->ai_addrlen, sizeof(addr)));
  freeaddrinfo(res);

  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>();
  Impl* impl = s->impl_.get();
  impl->handler = std::move(handler);
  unsigned int flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD;
  if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  std::vector<MHD_OptionItem> options = {
      {MHD_OPTION_SOCK_ADDR, 0, &addr},
      {MHD_OPTION_THREAD_POOL_SIZE, kThreads, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutSeconds, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(kMaxConnectionMemory), nullptr},
      {MHD_OPTION_LISTENING_ADDRESS_REUSE, reuse_port ? 1 : 0, nullptr},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&OnConnection), impl},
  };
  if (tls != nullptr) {
    if (tls->cert_pem.empty() || tls->key_pem.empty()) {
      return absl::InvalidArgumentError("TLS needs a certificate and a key");
    }
    if (tls->require_client_cert && tls->client_ca_pem.empty()) {
      return absl::InvalidArgumentError("a required client certificate needs a client CA");
    }
    auto prio = Priorities(tls->min_version);
    if (!prio.ok()) return prio.status();
    impl->tls = true;
    impl->require_client_cert = tls->require_client_cert;
    impl->cert_pem = tls->cert_pem;
    impl->key_pem = tls->key_pem;
    impl->client_ca_pem = tls->client_ca_pem;
    impl->priorities = *std::move(prio);
    flags |= MHD_USE_TLS;
    options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, impl->cert_pem.data()});
    options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, impl->key_pem.data()});
    options.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, impl->priorities.data()});
    if (!impl->client_ca_pem.empty()) {
      options.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, impl->client_ca_pem.data()});
    }
  }
  options.push_back({MHD_OPTION_END, 0, nullptr});
  impl->daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &Handle, impl, MHD_OPTION_ARRAY,
                                  options.data(), MHD_OPTION_END);
  if (impl->daemon == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve on ", listen,
        tls != nullptr ? " (address in use, or a certificate/key/CA the TLS library refused)"
                       : " (address in use or not local)"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(impl->daemon, MHD_DAEMON_INFO_BIND_PORT);
  s->port_ = info != nullptr ? info->port : 0;
  s->address_ = absl::StrCat(listen.substr(0, colon), ":", s->port_);
  return s;
}

HttpServer::~HttpServer() {
  if (impl_ != nullptr && impl_->daemon != nullptr) MHD_stop_daemon(impl_->daemon);
}

}  // namespace fabricscope
