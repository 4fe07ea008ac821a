#include "tools/fabricscope/push.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/recording/recording.h"
#include "fabricscope/v1/ingest.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {

int Usage() {
  std::fputs(
      "usage: fabricscope [--server=HOST:PORT] [--output=human|json] push [--batch=N] "
      "< spans.jsonl\n",
      stderr);
  return 2;
}

}  // namespace

int RunPush(const CliContext& ctx, const std::vector<std::string>& args) {
  size_t batch = 512;
  for (const std::string& a : args) {
    absl::string_view v = a;
    if (absl::ConsumePrefix(&v, "--batch=")) {
      if (!absl::SimpleAtoi(v, &batch) || batch == 0 || batch > 100000) {
        std::fputs("fabricscope push: --batch must be from 1 to 100000\n", stderr);
        return 2;
      }
    } else {
      return Usage();
    }
  }
  // Read and parse all input first; a bad line is reported (each one, up to
  // kMaxReported) and not sent, the good ones are.
  constexpr size_t kMaxReported = 100;
  std::vector<v1::Span> spans;
  std::vector<size_t> lines;  // the stdin line of each span in `spans`
  std::string line;
  size_t line_no = 0, bad = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    auto span = ParseSpanJson(line);
    if (!span.ok()) {
      if (++bad <= kMaxReported) {
        std::fprintf(stderr, "fabricscope push: stdin line %zu: %s (not sent)\n", line_no,
                     std::string(span.status().message()).c_str());
      }
      continue;
    }
    spans.push_back(*std::move(span));
    lines.push_back(line_no);
  }
  if (bad > kMaxReported) {
    std::fprintf(stderr, "fabricscope push: %zu more bad lines not shown\n", bad - kMaxReported);
  }
  if (spans.empty() && bad > 0) {
    std::fprintf(stderr, "fabricscope push: no valid span to send (%zu bad lines)\n", bad);
    return 2;  // bad input, nothing sent
  }

  auto channel = MakeChannel(ctx.server);
  auto stub = v1::Ingest::NewStub(channel);
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::PushResponse response;
  auto writer = stub->PushStream(&call, &response);
  for (size_t i = 0; i < spans.size(); i += batch) {
    v1::PushRequest req;
    for (size_t j = i; j < std::min(spans.size(), i + batch); ++j) *req.add_spans() = spans[j];
    if (!writer->Write(req)) break;  // the server ended the call; Finish() says why
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) {
    std::string hint = CallHint(status.error_code(), ctx.server);
    if (hint.empty()) {
      hint = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED
                 ? "daemon overloaded; retry later"
                 : "request rejected";
    }
    std::fprintf(stderr, "fabricscope push: %s: %s\n  %s\n", ctx.server.c_str(),
                 status.error_message().c_str(), hint.c_str());
    return 1;
  }
  if (ctx.output == "json") {
    std::string json;
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    opts.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(response, &json, opts);
    std::printf("%s\n", json.c_str());
  } else {
    std::printf("accepted %llu, rejected %llu of %zu spans sent",
                static_cast<unsigned long long>(response.accepted_spans()),
                static_cast<unsigned long long>(response.rejected_spans()), spans.size());
    if (bad > 0) std::printf("; %zu bad lines not sent", bad);
    std::printf("\n");
    for (const v1::SpanRejection& r : response.rejections()) {
      const std::string& full = v1::RejectionReason_Name(r.reason());
      absl::string_view reason = full;
      absl::ConsumePrefix(&reason, "REJECTION_REASON_");
      if (r.index() < lines.size()) {
        std::printf("  stdin line %zu: %s: %s\n", lines[r.index()],
                    absl::AsciiStrToLower(reason).c_str(), r.message().c_str());
      } else {
        std::printf("  span %llu: %s: %s\n", static_cast<unsigned long long>(r.index()),
                    absl::AsciiStrToLower(reason).c_str(), r.message().c_str());
      }
    }
  }
  return response.rejected_spans() == 0 && bad == 0 ? 0 : 1;
}

}  // namespace fabricscope::cli
