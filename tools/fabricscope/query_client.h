// Shared plumbing of the query subcommands (correlate, series, ports, top,
// events, record): the channel and Query stub (with --tls-*), and small
// formatting helpers (hex ids, JSON strings, rates, durations). Their flag
// parser and preamble are in tools/fabricscope/cli.h.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/json.h"
#include "fabricscope/v1/query.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

std::unique_ptr<v1::Query::Stub> MakeQueryStub(const std::string& server);
// The channel every subcommand uses: TLS when UseTls was called, else plain.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& server);
// Reads the PEM files of --tls-ca/--tls-cert/--tls-key (main.cc, once);
// the error names the flag.
absl::Status UseTls(const CliContext& ctx);

// Lower-case hex of bytes; "" for empty.
std::string Hex(absl::string_view bytes);
// Parses hex into exactly `size` bytes.
absl::StatusOr<std::string> ParseHexId(absl::string_view hex, size_t size, absl::string_view flag);
// JSON string literals: JsonString (core/json.h).
// A JSON number (finite; non-finite becomes 0).
std::string JsonNumber(double v);
// "2026-11-30T19:20:01.123456Z".
std::string FormatUnixNano(int64_t ns);
// "212.0ms", "1.50s".
std::string FormatDurationShort(int64_t ns);
// "41.2k", "1.10M", "3.00".
std::string FormatRate(double per_second);
// A human duration like 5m or 30s (--since); must be positive.
absl::StatusOr<absl::Duration> ParseSince(absl::string_view text);
// Unix nanoseconds now.
int64_t NowUnixNano();

// Link partners (query.proto LinkPartner) as every subcommand prints them.
// "leaf07 Ethernet1/12": the system name (the chassis id when the name is
// empty) and the port id.
std::string PartnerName(const v1::LinkPartner& partner);
// {"system_name", "port_id", "chassis_id", "port_description", "source"}.
std::string PartnerJson(const v1::LinkPartner& partner);
// For a message with an optional `partner` (Port, Event, SignalCorrelation):
// " -> leaf07 Ethernet1/12" / ",\"partner\":{...}" when it has one, else "".
template <typename Message>
std::string PartnerArrow(const Message& m) {
  return m.has_partner() ? " -> " + PartnerName(m.partner()) : std::string();
}
template <typename Message>
std::string PartnerJsonMember(const Message& m) {
  return m.has_partner() ? ",\"partner\":" + PartnerJson(m.partner()) : std::string();
}

}  // namespace fabricscope::cli
