#include "collectors/ib_mad.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

// Header offsets (see the table in the header).
constexpr size_t kOffBaseVersion = 0;
constexpr size_t kOffMgmtClass = 1;
constexpr size_t kOffClassVersion = 2;
constexpr size_t kOffMethod = 3;
constexpr size_t kOffStatus = 4;
constexpr size_t kOffHopPointer = 6;
constexpr size_t kOffHopCount = 7;
constexpr size_t kOffTransactionId = 8;
constexpr size_t kOffAttributeId = 16;
constexpr size_t kOffAttributeModifier = 20;
constexpr size_t kOffMKey = 24;
constexpr size_t kOffDrSlid = 32;
constexpr size_t kOffDrDlid = 34;

constexpr uint16_t kDirectionBit = 0x8000;
constexpr uint16_t kStatusMask = 0x7fff;

// NodeInfo offsets within the SMP data.
constexpr size_t kNiBaseVersion = 0;
constexpr size_t kNiClassVersion = 1;
constexpr size_t kNiNodeType = 2;
constexpr size_t kNiNumPorts = 3;
constexpr size_t kNiSystemImageGuid = 4;
constexpr size_t kNiNodeGuid = 12;
constexpr size_t kNiPortGuid = 20;
constexpr size_t kNiPartitionCap = 28;
constexpr size_t kNiDeviceId = 30;
constexpr size_t kNiRevision = 32;
constexpr size_t kNiLocalPortNum = 36;
constexpr size_t kNiVendorId = 37;

void StoreBe(uint8_t* p, int bytes, uint64_t v) {
  for (int i = bytes - 1; i >= 0; --i) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

// The length of the valid UTF-8 sequence at s[0..n), 0 if none (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(const uint8_t* s, size_t n) {
  const uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xbf;  // bounds of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i) {
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  }
  return len;
}

const char* InvalidFieldName(int code) {
  switch (code) {
    case 1:
      return "bad version";
    case 2:
      return "method not supported";
    case 3:
      return "method/attribute combination not supported";
    case 7:
      return "invalid attribute or modifier value";
    default:
      return "reserved invalid-field code";
  }
}

std::string AttributeName(uint16_t attribute_id) {
  switch (attribute_id) {
    case kSmpAttrNodeInfo:
      return "NodeInfo";
    case kSmpAttrNodeDescription:
      return "NodeDescription";
    default:
      return absl::StrFormat("attribute 0x%04x", attribute_id);
  }
}

}  // namespace

std::string IbNodeTypeName(uint8_t node_type) {
  switch (node_type) {
    case kIbNodeTypeCa:
      return "ca";
    case kIbNodeTypeSwitch:
      return "switch";
    case kIbNodeTypeRouter:
      return "router";
    default:
      return absl::StrCat("node type ", node_type);
  }
}

std::string FormatIbGuid(uint64_t guid) { return absl::StrFormat("0x%016x", guid); }

uint64_t LoadMadField(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

std::vector<uint8_t> BuildMadGet(uint8_t mgmt_class, uint8_t class_version, uint16_t attribute_id,
                                 uint32_t attribute_modifier, uint64_t transaction_id) {
  std::vector<uint8_t> mad(kMadSize, 0);
  mad[kOffBaseVersion] = kMadBaseVersion;
  mad[kOffMgmtClass] = mgmt_class;
  mad[kOffClassVersion] = class_version;
  mad[kOffMethod] = kMadMethodGet;
  StoreBe(&mad[kOffTransactionId], 8, transaction_id);
  StoreBe(&mad[kOffAttributeId], 2, attribute_id);
  StoreBe(&mad[kOffAttributeModifier], 4, attribute_modifier);
  return mad;
}

absl::StatusOr<std::vector<uint8_t>> BuildDrSmpGet(uint16_t attribute_id,
                                                   uint32_t attribute_modifier,
                                                   absl::Span<const uint8_t> path,
                                                   uint64_t transaction_id, uint64_t m_key) {
  if (path.size() > kDrSmpMaxHops) {
    return absl::InvalidArgumentError(
        absl::StrCat("directed route of ", path.size(), " hops (at most ", kDrSmpMaxHops, ")"));
  }
  std::vector<uint8_t> mad = BuildMadGet(kMgmtClassSubnDirectedRoute, kSmpClassVersion,
                                         attribute_id, attribute_modifier, transaction_id);
  // Status 0, D 0 (outgoing), HopPointer 0.
  mad[kOffHopCount] = static_cast<uint8_t>(path.size());
  StoreBe(&mad[kOffMKey], 8, m_key);
  StoreBe(&mad[kOffDrSlid], 2, kPermissiveLid);
  StoreBe(&mad[kOffDrDlid], 2, kPermissiveLid);
  for (size_t i = 0; i < path.size(); ++i) mad[kDrSmpInitialPathOffset + 1 + i] = path[i];
  return mad;
}

std::vector<uint8_t> BuildNeighborSmpGet(uint16_t attribute_id, uint8_t local_port,
                                         uint64_t transaction_id) {
  const uint8_t path[1] = {local_port};
  return *BuildDrSmpGet(attribute_id, 0, path, transaction_id);
}

bool SameMadTransaction(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>(a) == static_cast<uint32_t>(b);
}

absl::StatusOr<DrSmpHeader> DecodeDrSmpHeader(absl::Span<const uint8_t> mad) {
  if (mad.size() < kMadSize) {
    return UnparsableError(absl::StrCat("SMP of ", mad.size(), " bytes (a MAD is ", kMadSize, ")"));
  }
  DrSmpHeader h;
  h.base_version = mad[kOffBaseVersion];
  h.mgmt_class = mad[kOffMgmtClass];
  if (h.base_version != kMadBaseVersion) {
    return UnparsableError(absl::StrCat("MAD base version ", h.base_version, " (expected 1)"));
  }
  if (h.mgmt_class != kMgmtClassSubnDirectedRoute) {
    return UnparsableError(absl::StrFormat(
        "MAD of management class 0x%02x (expected 0x81, directed-route SMP)", h.mgmt_class));
  }
  h.class_version = mad[kOffClassVersion];
  h.method = mad[kOffMethod];
  const uint16_t status_word = static_cast<uint16_t>(LoadMadField(&mad[kOffStatus], 2));
  h.direction = (status_word & kDirectionBit) != 0;
  h.status = status_word & kStatusMask;
  h.hop_pointer = mad[kOffHopPointer];
  h.hop_count = mad[kOffHopCount];
  h.transaction_id = LoadMadField(&mad[kOffTransactionId], 8);
  h.attribute_id = static_cast<uint16_t>(LoadMadField(&mad[kOffAttributeId], 2));
  h.attribute_modifier = static_cast<uint32_t>(LoadMadField(&mad[kOffAttributeModifier], 4));
  h.m_key = LoadMadField(&mad[kOffMKey], 8);
  h.dr_slid = static_cast<uint16_t>(LoadMadField(&mad[kOffDrSlid], 2));
  h.dr_dlid = static_cast<uint16_t>(LoadMadField(&mad[kOffDrDlid], 2));
  return h;
}

std::string DescribeMadStatus(uint16_t status) {
  std::vector<std::string> parts;
  if (status & 0x0001) parts.push_back("busy");
  if (status & 0x0002) parts.push_back("redirect required");
  const int invalid_field = (status >> 2) & 0x7;
  if (invalid_field != 0) parts.push_back(InvalidFieldName(invalid_field));
  if (status & 0x00e0) parts.push_back("reserved bits");
  if (status & 0x7f00) {
    parts.push_back(absl::StrFormat("class-specific 0x%02x", (status >> 8) & 0x7f));
  }
  std::string out = absl::StrFormat("0x%04x", status);
  if (!parts.empty()) absl::StrAppend(&out, " (", absl::StrJoin(parts, ", "), ")");
  return out;
}

absl::Status MadStatusError(uint16_t status, uint16_t attribute_id) {
  if (status == 0) return absl::OkStatus();
  const std::string message = absl::StrCat("SubnGetResp(", AttributeName(attribute_id),
                                           "): MAD status ", DescribeMadStatus(status));
  if (status & 0x0003) return absl::UnavailableError(message);
  const int invalid_field = (status >> 2) & 0x7;
  if (invalid_field == 2 || invalid_field == 3) return absl::UnimplementedError(message);
  return absl::InternalError(message);
}

absl::StatusOr<absl::Span<const uint8_t>> CheckDrSmpGetResp(absl::Span<const uint8_t> mad,
                                                            uint64_t transaction_id,
                                                            uint16_t attribute_id) {
  absl::StatusOr<DrSmpHeader> h = DecodeDrSmpHeader(mad);
  if (!h.ok()) return h.status();
  if (h->method != kMadMethodGetResp) {
    return UnparsableError(
        absl::StrFormat("SMP method 0x%02x (expected 0x81, SubnGetResp)", h->method));
  }
  if (!SameMadTransaction(h->transaction_id, transaction_id)) {
    return UnparsableError(absl::StrFormat("SMP of transaction 0x%016x (expected 0x%08x)",
                                           h->transaction_id,
                                           static_cast<uint32_t>(transaction_id)));
  }
  if (h->attribute_id != attribute_id) {
    return UnparsableError(absl::StrCat("SubnGetResp(", AttributeName(h->attribute_id),
                                        ") (expected ", AttributeName(attribute_id), ")"));
  }
  if (absl::Status s = MadStatusError(h->status, attribute_id); !s.ok()) return s;
  return mad.subspan(kSmpDataOffset, kSmpDataSize);
}

IbNodeInfo DecodeNodeInfo(absl::Span<const uint8_t> smp_data) {
  uint8_t d[kSmpDataSize] = {};  // a short view reads as zero-padded
  memcpy(d, smp_data.data(), std::min(smp_data.size(), kSmpDataSize));
  IbNodeInfo n;
  n.base_version = d[kNiBaseVersion];
  n.class_version = d[kNiClassVersion];
  n.node_type = d[kNiNodeType];
  n.num_ports = d[kNiNumPorts];
  n.system_image_guid = LoadMadField(&d[kNiSystemImageGuid], 8);
  n.node_guid = LoadMadField(&d[kNiNodeGuid], 8);
  n.port_guid = LoadMadField(&d[kNiPortGuid], 8);
  n.partition_cap = static_cast<uint16_t>(LoadMadField(&d[kNiPartitionCap], 2));
  n.device_id = static_cast<uint16_t>(LoadMadField(&d[kNiDeviceId], 2));
  n.revision = static_cast<uint32_t>(LoadMadField(&d[kNiRevision], 4));
  n.local_port_num = d[kNiLocalPortNum];
  n.vendor_id = static_cast<uint32_t>(LoadMadField(&d[kNiVendorId], 3));
  return n;
}

std::string DecodeNodeDescription(absl::Span<const uint8_t> d) {
  const size_t n = std::min(d.size(), kSmpDataSize);
  size_t end = 0;
  while (end < n && d[end] != 0) ++end;
  std::string out;
  out.reserve(end);
  for (size_t i = 0; i < end;) {
    const size_t len = Utf8SequenceLength(&d[i], end - i);
    if (len == 0 || (len == 1 && (d[i] < 0x20 || d[i] == 0x7f))) {
      out.push_back('?');
      ++i;
      continue;
    }
    out.append(reinterpret_cast<const char*>(&d[i]), len);
    i += len;
  }
  return out;
}

absl::StatusOr<IbNodeInfo> ParseNodeInfoResp(absl::Span<const uint8_t> mad,
                                             uint64_t transaction_id) {
  absl::StatusOr<absl::Span<const uint8_t>> data =
      CheckDrSmpGetResp(mad, transaction_id, kSmpAttrNodeInfo);
  if (!data.ok()) return data.status();
  return DecodeNodeInfo(*data);
}

absl::StatusOr<std::string> ParseNodeDescriptionResp(absl::Span<const uint8_t> mad,
                                                     uint64_t transaction_id) {
  absl::StatusOr<absl::Span<const uint8_t>> data =
      CheckDrSmpGetResp(mad, transaction_id, kSmpAttrNodeDescription);
  if (!data.ok()) return data.status();
  return DecodeNodeDescription(*data);
}

}  // namespace fabricscope
