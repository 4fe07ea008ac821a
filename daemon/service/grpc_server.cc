#include "daemon/service/grpc_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"

namespace fabricscope {

GrpcServer::GrpcServer(std::string listen_address) : listen_address_(std::move(listen_address)) {}

GrpcServer::~GrpcServer() { Shutdown(absl::Milliseconds(100)); }

void GrpcServer::AddService(grpc::Service* service) { services_.push_back(service); }

absl::Status GrpcServer::Start() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen_address_, grpc::InsecureServerCredentials(), &port_);
  for (grpc::Service* s : services_) builder.RegisterService(s);
  grpc::ResourceQuota quota("fabricscope-grpc");
  quota.SetMaxThreads(kMaxThreads);
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // gRPC enables SO_REUSEPORT by default: a second daemon on the same port
  // would silently share it. Fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
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
