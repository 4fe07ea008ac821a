#include "tools/fabricscope/ports.h"

#include <iostream>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {
constexpr uint32_t kPortsDefaultLimit = 100;
}  // namespace

std::string PortsJson(const v1::PortsResponse& response) {
  std::string out = "[";
  for (int i = 0; i < response.ports_size(); ++i) {
    const v1::Port& p = response.ports(i);
    absl::StrAppend(&out, i ? ",\n " : "\n ", "{\"device\":", JsonString(p.device()),
                    ",\"port\":", p.port(), ",\"netdev\":", JsonString(p.netdev()),
                    ",\"link_layer\":", JsonString(p.link_layer()),
                    ",\"state\":", JsonString(p.state()), ",\"rate\":", JsonString(p.rate()),
                    ",\"present\":", p.present() ? "true" : "false", PartnerJsonMember(p), "}");
  }
  absl::StrAppend(&out, response.ports_size() ? "\n]\n" : "]\n");
  return out;
}

std::string PortsHuman(const v1::PortsResponse& response) {
  if (response.ports_size() == 0) return "no RDMA ports\n";
  std::string out = absl::StrFormat("%-12s %-5s %-12s %-11s %-8s %s\n", "DEVICE", "PORT", "NETDEV",
                                    "LINK", "STATE", "RATE");
  for (const v1::Port& p : response.ports()) {
    absl::StrAppend(
        &out, absl::StrFormat("%-12s %-5d %-12s %-11s %-8s %s%s%s\n", p.device(), p.port(),
                              p.netdev().empty() ? "-" : p.netdev(), p.link_layer(), p.state(),
                              p.rate(), p.present() ? "" : "  (gone)", PartnerArrow(p)));
  }
  return out;
}

int RunPorts(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  const auto run = Invocation::Start(
      ctx, "ports", args,
      {.values = {"limit"},
       .usage = "usage: fabricscope ports [--limit N] [--server HOST:PORT] [--output human|json]\n"
                "  --limit N: at most N ports (default 100; json: no limit; 0: all)\n"});
  if (!run) return kExitUsage;
  auto limit = run->Limit(kPortsDefaultLimit);
  if (!limit.ok()) return run->Usage(limit.status().message());
  auto stub = MakeQueryStub(run->server());
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::PortsResponse resp;
  grpc::Status s = stub->Ports(&call, v1::PortsRequest(), &resp);
  if (!s.ok()) return run->CallFailed(s.error_code(), s.error_message());
  // The inventory is small and not filtered by the daemon: bounded here.
  const uint64_t left_out =
      *limit != 0 && resp.ports_size() > static_cast<int>(*limit) ? resp.ports_size() - *limit : 0;
  if (left_out > 0)
    resp.mutable_ports()->DeleteSubrange(static_cast<int>(*limit), static_cast<int>(left_out));
  out << (run->json() ? PortsJson(resp) : PortsHuman(resp));
  run->LeftOut(out, LeftOutLine(left_out, "ports"));
  return kExitOk;
}

}  // namespace fabricscope::cli
