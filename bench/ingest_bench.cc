// Span ingest throughput: the real GrpcServer + IngestService/OtlpTraceService
// + SpanIngester + SpanStore in-process on 127.0.0.1:0, with a client in the
// same process. Batches of 512 spans shaped like decode steps (6 attributes).
//
// Reported counters:
//   spans_per_s          wall-clock spans/s (items_per_second, real time)
//   spans_per_cpu_s      spans per CPU-second of the WHOLE process (client
//                        serialisation + server), i.e. spans/s per core; the
//                        server alone costs less.
// Direct* benchmarks skip gRPC: conversion + validation + store only.
//
//   ./ingest_bench --benchmark_min_time=2
#include <sys/resource.h>

#include <memory>

#include "benchmark/benchmark.h"
#include "daemon/ingest/span_ingester.h"
#include "daemon/service/grpc_server.h"
#include "daemon/service/ingest_service.h"
#include "daemon/service/otlp_trace_service.h"

namespace fabricscope {
namespace {

namespace otlp_collector = opentelemetry::proto::collector::trace::v1;
constexpr int kBatch = 512;

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Server {
  Server() {
    store = std::make_unique<SpanStore>(SpanStoreOptions{}, RealClock::Get(), &metrics);
    ingester = std::make_unique<SpanIngester>(IngestLimits{}, *SpanKindClassifier::Create({}),
                                              store.get(), RealClock::Get(), &metrics);
    ingest = std::make_unique<IngestService>(ingester.get());
    otlp = std::make_unique<OtlpTraceService>(ingester.get());
    server = std::make_unique<GrpcServer>("127.0.0.1:0");
    server->AddService(ingest.get());
    server->AddService(otlp.get());
    if (!server->Start().ok()) std::abort();
    channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  }
  MetricsRegistry metrics;
  std::unique_ptr<SpanStore> store;
  std::unique_ptr<SpanIngester> ingester;
  std::unique_ptr<IngestService> ingest;
  std::unique_ptr<OtlpTraceService> otlp;
  std::unique_ptr<GrpcServer> server;
  std::shared_ptr<grpc::Channel> channel;
};

std::string Id(uint64_t hi, uint64_t lo, size_t bytes) {
  std::string s(bytes, '\0');
  for (size_t i = 0; i < 8 && i < bytes; ++i) s[bytes - 1 - i] = static_cast<char>(lo >> (8 * i));
  if (bytes == 16) {
    for (size_t i = 0; i < 8; ++i) s[7 - i] = static_cast<char>(hi >> (8 * i));
  }
  return s;
}

v1::PushRequest NativeBatch(uint64_t* counter) {
  v1::PushRequest req;
  const int64_t now = RealClock::Get()->RealtimeNs();
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t n = ++*counter;
    v1::Span* s = req.add_spans();
    s->set_trace_id(Id(n / 64 + 1, 7, 16));
    s->set_span_id(Id(0, n, 8));
    s->set_parent_span_id(Id(0, n / 64 + 1, 8));
    s->set_name("decode");
    s->set_start_unix_nano(now - 20'000'000 + i * 1000);
    s->set_end_unix_nano(now - 1'000'000 + i * 1000);
    for (auto [k, v] : {std::pair{"rdma.device", "mlx5_0"},
                        {"rdma.port", "1"},
                        {"network.interface.name", "eth2"},
                        {"gen_ai.request.model", "llama-70b"},
                        {"decode.step", "17"},
                        {"service.name", "vllm"}}) {
      auto* a = s->add_attributes();
      a->set_key(k);
      a->set_value(v);
    }
  }
  return req;
}

otlp_collector::ExportTraceServiceRequest OtlpBatch(uint64_t* counter) {
  otlp_collector::ExportTraceServiceRequest req;
  auto* rs = req.add_resource_spans();
  for (auto [k, v] : {std::pair{"service.name", "vllm"}, {"host.name", "gpu-node-7"}}) {
    auto* a = rs->mutable_resource()->add_attributes();
    a->set_key(k);
    a->mutable_value()->set_string_value(v);
  }
  auto* ss = rs->add_scope_spans();
  ss->mutable_scope()->set_name("vllm.tracing");
  const int64_t now = RealClock::Get()->RealtimeNs();
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t n = ++*counter;
    auto* s = ss->add_spans();
    s->set_trace_id(Id(n / 64 + 1, 9, 16));
    s->set_span_id(Id(0, n, 8));
    s->set_parent_span_id(Id(0, n / 64 + 1, 8));
    s->set_name("decode");
    s->set_kind(opentelemetry::proto::trace::v1::Span::SPAN_KIND_INTERNAL);
    s->set_start_time_unix_nano(now - 20'000'000 + i * 1000);
    s->set_end_time_unix_nano(now - 1'000'000 + i * 1000);
    auto add = [&](const char* k) {
      auto* a = s->add_attributes();
      a->set_key(k);
      return a->mutable_value();
    };
    add("rdma.device")->set_string_value("mlx5_0");
    add("rdma.port")->set_int_value(1);
    add("network.interface.name")->set_string_value("eth2");
    add("gen_ai.request.model")->set_string_value("llama-70b");
    add("decode.step")->set_int_value(17);
    add("fabricscope.stall")->set_bool_value(false);
  }
  return req;
}

void Report(benchmark::State& state, double cpu0, uint64_t spans) {
  const double cpu = ProcessCpuSeconds() - cpu0;
  state.SetItemsProcessed(static_cast<int64_t>(spans));
  state.counters["spans_per_cpu_s"] = cpu > 0 ? spans / cpu : 0;
}

void BM_NativeStreamIngest(benchmark::State& state) {
  Server server;
  auto stub = v1::Ingest::NewStub(server.channel);
  uint64_t counter = 0;
  // Prebuild a few batches (client-side construction is not what we measure;
  // timestamps stay well within --max-span-age).
  std::vector<v1::PushRequest> batches;
  for (int i = 0; i < 16; ++i) batches.push_back(NativeBatch(&counter));
  grpc::ClientContext ctx;
  v1::PushResponse resp;
  auto writer = stub->PushStream(&ctx, &resp);
  uint64_t spans = 0;
  const double cpu0 = ProcessCpuSeconds();
  size_t i = 0;
  for (auto _ : state) {
    if (!writer->Write(batches[i++ % batches.size()])) state.SkipWithError("stream broke");
    spans += kBatch;
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();  // includes draining the server
  if (!s.ok() || resp.accepted_spans() != spans) state.SkipWithError("not all spans accepted");
  Report(state, cpu0, spans);
}
BENCHMARK(BM_NativeStreamIngest)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_OtlpExportIngest(benchmark::State& state) {
  Server server;
  auto stub = otlp_collector::TraceService::NewStub(server.channel);
  uint64_t counter = 0;
  std::vector<otlp_collector::ExportTraceServiceRequest> batches;
  for (int i = 0; i < 16; ++i) batches.push_back(OtlpBatch(&counter));
  uint64_t spans = 0;
  const double cpu0 = ProcessCpuSeconds();
  size_t i = 0;
  for (auto _ : state) {
    grpc::ClientContext ctx;
    otlp_collector::ExportTraceServiceResponse resp;
    grpc::Status s = stub->Export(&ctx, batches[i++ % batches.size()], &resp);
    if (!s.ok() || resp.has_partial_success()) state.SkipWithError("export failed");
    spans += kBatch;
  }
  Report(state, cpu0, spans);
}
BENCHMARK(BM_OtlpExportIngest)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_DirectNative(benchmark::State& state) {
  MetricsRegistry metrics;
  SpanStore store({}, RealClock::Get(), &metrics);
  SpanIngester ingester({}, *SpanKindClassifier::Create({}), &store, RealClock::Get(), &metrics);
  uint64_t counter = 0;
  v1::PushRequest batch = NativeBatch(&counter);
  uint64_t spans = 0;
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    auto r = ingester.PushNative(batch);
    if (!r.ok() || r->accepted != kBatch) state.SkipWithError("rejected");
    spans += kBatch;
  }
  Report(state, cpu0, spans);
}
BENCHMARK(BM_DirectNative)->Unit(benchmark::kMicrosecond);

void BM_DirectOtlp(benchmark::State& state) {
  MetricsRegistry metrics;
  SpanStore store({}, RealClock::Get(), &metrics);
  SpanIngester ingester({}, *SpanKindClassifier::Create({}), &store, RealClock::Get(), &metrics);
  uint64_t counter = 0;
  auto batch = OtlpBatch(&counter);
  uint64_t spans = 0;
  const double cpu0 = ProcessCpuSeconds();
  for (auto _ : state) {
    auto r = ingester.ExportOtlp(batch);
    if (!r.ok() || r->accepted != kBatch) state.SkipWithError("rejected");
    spans += kBatch;
  }
  Report(state, cpu0, spans);
}
BENCHMARK(BM_DirectOtlp)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fabricscope

BENCHMARK_MAIN();
