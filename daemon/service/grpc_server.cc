#include "daemon/service/grpc_server.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"

namespace fabricscope {

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || ss.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '", path, "'"));
  }
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const GrpcTlsOptions& tls) {
  if (tls.cert_file.empty() && tls.key_file.empty() && tls.client_ca_file.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "grpc-tls-cert and grpc-tls-key must be given together (and grpc-tls-client-ca needs "
        "both)");
  }
  auto cert = ReadPem(tls.cert_file, "grpc-tls-cert");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(tls.key_file, "grpc-tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions opts(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  opts.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca_file.empty()) {
    auto ca = ReadPem(tls.client_ca_file, "grpc-tls-client-ca");
    if (!ca.ok()) return ca.status();
    opts.pem_root_certs = *ca;
    opts.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(opts);
}

// protobuf writes its own complaints to stderr: one line per string field
// that is not UTF-8, in every bad request the ingest methods decode (and then
// repair, counted). They go to the daemon's log at debug level instead,
// rate-limited.
void ProtobufLog(google::protobuf::LogLevel /*level*/, const char* filename, int line,
                 const std::string& message) {
  static LogRateLimiter* const limiter = new LogRateLimiter(absl::Minutes(1));
  uint64_t suppressed = 0;
  if (!limiter->Allow("protobuf", &suppressed)) return;
  Log(LogLevel::kDebug, "grpc", "protobuf",
      {{"message", message},
       {"at", absl::StrCat(filename, ":", line)},
       {"suppressed", absl::StrCat(suppressed)}});
}

}  // namespace

GrpcServer::GrpcServer(std::string listen_address, GrpcTlsOptions tls)
    : listen_address_(std::move(listen_address)), tls_(std::move(tls)) {}

GrpcServer::~GrpcServer() { Shutdown(absl::Milliseconds(100)); }

void GrpcServer::AddService(grpc::Service* service) { services_.push_back(service); }

absl::Status GrpcServer::Start() {
  google::protobuf::SetLogHandler(&ProtobufLog);
  auto creds = Credentials(tls_);
  if (!creds.ok()) return creds.status();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen_address_, *creds, &port_);
  for (grpc::Service* s : services_) builder.RegisterService(s);
  grpc::ResourceQuota quota("fabricscope-grpc");
  quota.SetMaxThreads(kMaxThreads);
  // gRPC checks the message size limit only once a message is whole
  // (grpc/grpc#43012): without a memory quota a client could make it buffer
  // any size. Past the quota the transport refuses the stream
  // (RST_STREAM ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED for the client).
  quota.Resize(kMaxTransportMemoryBytes);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // gRPC enables SO_REUSEPORT by default: a second daemon on the same port
  // would silently share it. Fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A client that opens a stream and never sends holds a server thread: every
  // connection is closed after kMaxConnectionAge (+ grace for calls in flight),
  // so stalled streams are reaped; well-behaved clients reconnect.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, kMaxConnectionAgeMs);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, kMaxConnectionAgeGraceMs);
  // Sync-server pollers wake at least this often; Shutdown() waits for them,
  // so the default (1 s) would eat half of the daemon's 2 s SIGTERM bound.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 100);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("grpc-listen: cannot listen on ", listen_address_,
                                               " (address in use or not local?)"));
  }
  size_t colon = listen_address_.rfind(':');
  address_ = absl::StrCat(listen_address_.substr(0, colon), ":", port_);
  return absl::OkStatus();
}

void GrpcServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  server_->Wait();
  server_.reset();
}

}  // namespace fabricscope
