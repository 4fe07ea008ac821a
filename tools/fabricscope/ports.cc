#include "tools/fabricscope/ports.h"

#include <iostream>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {

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
      {.usage = "usage: fabricscope ports [--server HOST:PORT] [--output human|json]\n"});
  if (!run) return kExitUsage;
  auto stub = MakeQueryStub(run->server());
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::PortsResponse resp;
  grpc::Status s = stub->Ports(&call, v1::PortsRequest(), &resp);
  if (!s.ok()) return run->CallFailed(s.error_message());
  out << (run->json() ? PortsJson(resp) : PortsHuman(resp));
  return kExitOk;
}

}  // namespace fabricscope::cli
