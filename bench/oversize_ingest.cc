// Sends one ingest request of a given size to a running daemon's native Push
// method and prints how the call ended: the measurement of an oversized
// message (bench/README.md, "oversized ingest messages"; run by
// bench/oversize_ingest.sh, which reads the daemon's peak RSS around it).
//
//   oversize_ingest HOST:PORT MIB
//
// The request is a valid PushRequest: one span whose one attribute value
// makes it MIB MiB.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include "fabricscope/v1/ingest.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: oversize_ingest HOST:PORT MIB\n");
    return 2;
  }
  const size_t bytes = std::strtoull(argv[2], nullptr, 10) << 20;
  fabricscope::v1::PushRequest req;
  auto* span = req.add_spans();
  span->set_trace_id(std::string(16, '\x01'));
  span->set_span_id(std::string(8, '\x02'));
  span->set_name("oversize");
  auto* attr = span->add_attributes();
  attr->set_key("blob");
  attr->set_value(std::string(bytes, 'x'));
  std::string wire = req.SerializeAsString();
  req.Clear();
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(argv[1], grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Slice slice(wire);
  wire = std::string();
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  const auto start = std::chrono::steady_clock::now();
  stub.UnaryCall(&ctx, "/fabricscope.v1.Ingest/Push", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status s = done.get_future().get();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("sent %zu MiB: %s (%d) %s in %.2f s\n", bytes >> 20, s.ok() ? "OK" : "refused",
              static_cast<int>(s.error_code()), s.error_message().c_str(), secs);
  return 0;
}
