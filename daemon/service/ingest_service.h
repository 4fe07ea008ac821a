// IngestService: the gRPC adapter of fabricscope.v1.Ingest over SpanIngester
// (daemon/ingest/span_ingester.h). It only translates messages and statuses;
// limits, validation and counting live in the ingester.
//
// Idle streams: a PushStream that sends nothing for `stream_idle_timeout` is
// cancelled by a watchdog thread (counted in
// fabricscope_ingest_streams_idle_cancelled_total), so a client that opens
// streams and stalls cannot keep the ingest slots (IngestLimits::
// max_concurrent_requests) for longer than that.
//
// Thread-safety: gRPC calls its methods concurrently; the ingester is
// thread-safe. The ingester is borrowed and must outlive the service.
#pragma once

#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/ingest/span_ingester.h"
#include "fabricscope/v1/ingest.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace fabricscope {

// Fills a PushResponse from an ingest result.
void FillPushResponse(const IngestResult& result, v1::PushResponse* response);

// Push is a raw callback method (it decodes its request itself: raw_codec.h,
// strings that are not UTF-8 repaired, bytes that are no PushRequest refused
// with INVALID_ARGUMENT and counted); PushStream is a synchronous method,
// whose messages gRPC parses strictly.
class IngestService final : public v1::Ingest::WithRawCallbackMethod_Push<v1::Ingest::Service> {
 public:
  // `metrics` may be null (tests).
  explicit IngestService(SpanIngester* ingester,
                         absl::Duration stream_idle_timeout = absl::Seconds(10),
                         MetricsRegistry* metrics = nullptr);
  ~IngestService() override;

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::Status PushStream(grpc::ServerContext* context, grpc::ServerReader<v1::PushRequest>* reader,
                          v1::PushResponse* response) override;

 private:
  void Watch();
  void Touch(grpc::ServerContext* context);

  SpanIngester* const ingester_;
  const int64_t idle_ns_;
  prometheus::Counter* idle_cancelled_ = nullptr;
  std::mutex mu_;
  // Open streams and the steady time (ns) of their last message.
  absl::flat_hash_map<grpc::ServerContext*, int64_t> streams_;  // guarded by mu_
  StopSignal stop_;
  std::thread watchdog_;
};

}  // namespace fabricscope
