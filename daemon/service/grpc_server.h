// GrpcServer: the daemon's one gRPC server on --grpc-listen, hosting the span
// ingest services (fabricscope.v1.Ingest, OTLP TraceService) and the query
// service. Services are plain grpc::Service adapters added before Start().
//
// Bounds: at most kMaxThreads gRPC worker threads (grpc::ResourceQuota),
// messages up to kMaxMessageBytes (larger ones are refused by gRPC with
// RESOURCE_EXHAUSTED before any parsing of ours), and at most
// kMaxTransportMemoryBytes of transport buffers for all connections together
// (the quota's memory): gRPC 1.51 compares a message with the size limit
// only once it has buffered all of it, so the quota is what stops a 512 MiB
// message (refused with RESOURCE_EXHAUSTED after ~32 MiB: bench/README.md,
// "oversized ingest messages"). Under that pressure a legitimate large
// message can be refused too (4 concurrent 15 MiB pushes: one refused); OTLP
// exporters batch far below it.
//
// Lifecycle: construct, AddService()..., Start() (binds; a bind failure is a
// startup error), Shutdown() (waits at most `grace` for calls in flight, then
// cancels them; returns when the server is stopped). The destructor shuts down
// with a short grace if Shutdown was not called.
//
// Thread-safety: AddService/Start/Shutdown from one thread (the daemon's
// main thread); address()/port() are safe after Start().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace fabricscope {

// Transport security of the server (all PEM file paths; empty cert: plain
// text). With client_ca set, clients must present a certificate signed by it
// (mutual TLS).
struct GrpcTlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

class GrpcServer {
 public:
  static constexpr int kMaxThreads = 32;
  static constexpr int kMaxMessageBytes = 16 << 20;
  static constexpr size_t kMaxTransportMemoryBytes = 2 * size_t{kMaxMessageBytes};
  static constexpr int kMaxConnectionAgeMs = 5 * 60 * 1000;
  static constexpr int kMaxConnectionAgeGraceMs = 30 * 1000;

  // `listen_address`: HOST:PORT or [V6]:PORT; port 0 picks a free port.
  explicit GrpcServer(std::string listen_address, GrpcTlsOptions tls = {});
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Registers a service; must be called before Start(). The service is
  // borrowed and must outlive the server.
  void AddService(grpc::Service* service);

  // Binds and starts serving. Fails (UNAVAILABLE) when the address cannot be
  // bound (gRPC's SO_REUSEPORT is disabled, so a port in use is an error) or
  // when no service was added; InvalidArgument when a TLS file cannot be read.
  absl::Status Start();

  // The bound address with the real port (after Start), e.g. 127.0.0.1:40123.
  const std::string& address() const { return address_; }
  int port() const { return port_; }

  // Stops accepting calls, waits at most `grace` for calls in flight, cancels
  // the rest and joins the server's threads. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  const std::string listen_address_;
  const GrpcTlsOptions tls_;
  std::vector<grpc::Service*> services_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
};

}  // namespace fabricscope
