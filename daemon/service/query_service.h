// QueryService: the gRPC adapter of fabricscope.v1.Query
// (proto/fabricscope/v1/query.proto) over the query engine
// (daemon/query/query_engine.h), which selects, bounds and validates. The
// adapter only translates: requests to plain queries and answers to messages
// (daemon/service/query_proto.h), statuses with ToGrpcStatus
// (daemon/service/grpc_status.h), and streams Record's chunks.
//
// Thread-safety: gRPC calls the methods concurrently; the engine is
// thread-safe. The engine is borrowed and must outlive the service.
#pragma once

#include <functional>
#include <utility>

#include "daemon/query/query_engine.h"
#include "daemon/recording/recording_header.h"
#include "fabricscope/v1/query.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fabricscope {

class QueryService final : public v1::Query::Service {
 public:
  // Fills what a recording's header says beyond the engine's window, ports
  // and topology: the daemon's version, options and learned stall bounds.
  using HeaderFiller = std::function<void(RecordingHeader*)>;

  explicit QueryService(const QueryEngine* engine, HeaderFiller fill_header = nullptr)
      : engine_(engine), fill_header_(std::move(fill_header)) {}

  grpc::Status Correlate(grpc::ServerContext* context, const v1::CorrelateRequest* request,
                         v1::CorrelateResponse* response) override;
  grpc::Status Series(grpc::ServerContext* context, const v1::SeriesRequest* request,
                      v1::SeriesResponse* response) override;
  grpc::Status Events(grpc::ServerContext* context, const v1::EventsRequest* request,
                      v1::EventsResponse* response) override;
  grpc::Status Ports(grpc::ServerContext* context, const v1::PortsRequest* request,
                     v1::PortsResponse* response) override;
  // Streams a first chunk with the recording's header line, one chunk per
  // series with samples in the range, then the spans as recording lines
  // (with the daemon's stall judgement) in chunks of
  // QueryEngine::kRecordSpanBatch. CANCELLED when the call is cancelled
  // ("cancelled") or the client stops reading ("client gone").
  grpc::Status Record(grpc::ServerContext* context, const v1::RecordRequest* request,
                      grpc::ServerWriter<v1::RecordChunk>* writer) override;

 private:
  const QueryEngine* const engine_;
  const HeaderFiller fill_header_;
};

}  // namespace fabricscope
