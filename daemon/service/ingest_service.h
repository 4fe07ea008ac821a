// IngestService: the gRPC adapter of fabricscope.v1.Ingest over SpanIngester
// (daemon/ingest/span_ingester.h). It only translates messages and statuses;
// limits, validation and counting live in the ingester.
//
// Thread-safety: gRPC calls its methods concurrently; the ingester is
// thread-safe. The ingester is borrowed and must outlive the service.
#pragma once

#include "daemon/ingest/span_ingester.h"
#include "fabricscope/v1/ingest.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fabricscope {

// absl::Status -> grpc::Status (the codes are the same numbers).
grpc::Status ToGrpcStatus(const absl::Status& status);

// Fills a PushResponse from an ingest result.
void FillPushResponse(const IngestResult& result, v1::PushResponse* response);

class IngestService final : public v1::Ingest::Service {
 public:
  explicit IngestService(SpanIngester* ingester) : ingester_(ingester) {}

  grpc::Status Push(grpc::ServerContext* context, const v1::PushRequest* request,
                    v1::PushResponse* response) override;
  grpc::Status PushStream(grpc::ServerContext* context, grpc::ServerReader<v1::PushRequest>* reader,
                          v1::PushResponse* response) override;

 private:
  SpanIngester* const ingester_;
};

}  // namespace fabricscope
