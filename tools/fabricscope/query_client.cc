#include "tools/fabricscope/query_client.h"

#include <fstream>
#include <sstream>

#include <cmath>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"

namespace fabricscope::cli {

namespace {
std::shared_ptr<grpc::ChannelCredentials>& Credentials() {
  static auto* creds =
      new std::shared_ptr<grpc::ChannelCredentials>(grpc::InsecureChannelCredentials());
  return *creds;
}

absl::StatusOr<std::string> ReadFileText(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in || ss.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", path, "'"));
  }
  return ss.str();
}
}  // namespace

absl::Status UseTls(const CliContext& ctx) {
  if (ctx.tls_ca.empty() && ctx.tls_cert.empty() && ctx.tls_key.empty()) return absl::OkStatus();
  if (ctx.tls_cert.empty() != ctx.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions opts;
  if (!ctx.tls_ca.empty()) {
    auto ca = ReadFileText(ctx.tls_ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    opts.pem_root_certs = *ca;
  }
  if (!ctx.tls_cert.empty()) {
    auto cert = ReadFileText(ctx.tls_cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    auto key = ReadFileText(ctx.tls_key, "--tls-key");
    if (!key.ok()) return key.status();
    opts.pem_cert_chain = *cert;
    opts.pem_private_key = *key;
  }
  Credentials() = grpc::SslCredentials(opts);
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& server) {
  return grpc::CreateChannel(server, Credentials());
}

std::unique_ptr<v1::Query::Stub> MakeQueryStub(const std::string& server) {
  return v1::Query::NewStub(MakeChannel(server));
}

std::string Hex(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

absl::StatusOr<std::string> ParseHexId(absl::string_view hex, size_t size, absl::string_view flag) {
  if (hex.size() != size * 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be ", size * 2, " hex digits, got \"", hex, "\""));
  }
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    int v = 0;
    for (int j = 0; j < 2; ++j) {
      const char c = absl::ascii_tolower(hex[2 * i + j]);
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " must be hex digits, got \"", hex, "\""));
      }
      v = v * 16 + d;
    }
    out[i] = static_cast<char>(v);
  }
  return out;
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "0";
  return absl::StrFormat("%.9g", v);
}

std::string FormatUnixNano(int64_t ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixNanos(ns), absl::UTCTimeZone());
}

std::string FormatDurationShort(int64_t ns) {
  const double ms = static_cast<double>(ns) / 1e6;
  if (ms < 1) return absl::StrFormat("%.0fus", ms * 1000);
  if (ms < 1000) return absl::StrFormat("%.1fms", ms);
  return absl::StrFormat("%.2fs", ms / 1000);
}

std::string FormatRate(double v) {
  const double a = std::fabs(v);
  if (a >= 1e9) return absl::StrFormat("%.2fG", v / 1e9);
  if (a >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (a >= 1e3) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrFormat("%.2f", v);
}

absl::StatusOr<absl::Duration> ParseSince(absl::string_view text) {
  absl::Duration d;
  if (!absl::ParseDuration(absl::StripAsciiWhitespace(text), &d) || d <= absl::ZeroDuration() ||
      d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--since must be a positive duration such as 30s, 5m or 1h, got \"", text, "\""));
  }
  return d;
}

int64_t NowUnixNano() { return absl::ToUnixNanos(absl::Now()); }

std::string PartnerName(const v1::LinkPartner& partner) {
  const std::string& system =
      partner.system_name().empty() ? partner.chassis_id() : partner.system_name();
  if (system.empty()) return partner.port_id();
  if (partner.port_id().empty()) return system;
  return absl::StrCat(system, " ", partner.port_id());
}

std::string PartnerJson(const v1::LinkPartner& partner) {
  return absl::StrCat("{\"system_name\":", JsonString(partner.system_name()),
                      ",\"port_id\":", JsonString(partner.port_id()),
                      ",\"chassis_id\":", JsonString(partner.chassis_id()),
                      ",\"port_description\":", JsonString(partner.port_description()),
                      ",\"source\":", JsonString(partner.source()), "}");
}

}  // namespace fabricscope::cli
