#include "collectors/ib_pma.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectors/ib_mad.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

// A counter's place in the attribute data (bit offset, width), as the
// kernel's sysfs.c declares it.
struct Field {
  const char* name;
  uint16_t bit_offset;
  uint8_t width;
};

constexpr Field kPortCounters[] = {
    {"symbol_error", 32, 16},
    {"link_error_recovery", 48, 8},
    {"link_downed", 56, 8},
    {"port_rcv_errors", 64, 16},
    {"port_rcv_remote_physical_errors", 80, 16},
    {"port_rcv_switch_relay_errors", 96, 16},
    {"port_xmit_discards", 112, 16},
    {"port_xmit_constraint_errors", 128, 8},
    {"port_rcv_constraint_errors", 136, 8},
    {"local_link_integrity_errors", 152, 4},
    {"excessive_buffer_overrun_errors", 156, 4},
    {"VL15_dropped", 176, 16},
    {"port_xmit_data", 192, 32},
    {"port_rcv_data", 224, 32},
    {"port_xmit_packets", 256, 32},
    {"port_rcv_packets", 288, 32},
    {"port_xmit_wait", 320, 32},
};

constexpr Field kPortCountersExtended[] = {
    {"port_xmit_data", 64, 64},          {"port_rcv_data", 128, 64},
    {"port_xmit_packets", 192, 64},      {"port_rcv_packets", 256, 64},
    {"unicast_xmit_packets", 320, 64},   {"unicast_rcv_packets", 384, 64},
    {"multicast_xmit_packets", 448, 64}, {"multicast_rcv_packets", 512, 64},
};

absl::Span<const Field> FieldsOf(uint16_t attribute_id) {
  if (attribute_id == kPmaAttrPortCounters) return kPortCounters;
  if (attribute_id == kPmaAttrPortCountersExtended) return kPortCountersExtended;
  return {};
}

std::string AttributeName(uint16_t attribute_id) {
  if (attribute_id == kPmaAttrPortCounters) return "PortCounters";
  if (attribute_id == kPmaAttrPortCountersExtended) return "PortCountersExtended";
  return absl::StrFormat("attribute 0x%04x", attribute_id);
}

// Big-endian bit field: `width` bits starting `bit_offset` bits into `data`
// (bit 0 the most significant of byte 0); bytes past the end read as 0.
uint64_t BitField(absl::Span<const uint8_t> data, size_t bit_offset, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    const size_t bit = bit_offset + i;
    const size_t byte = bit / 8;
    const uint8_t b = byte < data.size() ? data[byte] : 0;
    v = (v << 1) | ((b >> (7 - bit % 8)) & 1);
  }
  return v;
}

}  // namespace

std::vector<uint8_t> BuildPmaGet(uint16_t attribute_id, uint8_t port_select,
                                 uint64_t transaction_id) {
  std::vector<uint8_t> mad =
      BuildMadGet(kMgmtClassPerfMgt, kPerfMgtClassVersion, attribute_id, 0, transaction_id);
  mad[kPmaDataOffset + 1] = port_select;
  return mad;
}

std::vector<PmaCounter> DecodePmaCounters(uint16_t attribute_id, absl::Span<const uint8_t> data) {
  std::vector<PmaCounter> out;
  for (const Field& f : FieldsOf(attribute_id)) {
    out.push_back({f.name, BitField(data, f.bit_offset, f.width)});
  }
  return out;
}

std::vector<std::string> PmaCounterNames(uint16_t attribute_id) {
  std::vector<std::string> out;
  for (const Field& f : FieldsOf(attribute_id)) out.emplace_back(f.name);
  return out;
}

absl::StatusOr<std::vector<PmaCounter>> ParsePmaGetResp(absl::Span<const uint8_t> mad,
                                                        uint16_t attribute_id,
                                                        uint64_t transaction_id) {
  if (mad.size() < kMadSize) {
    return UnparsableError(
        absl::StrCat("PerfMgt MAD of ", mad.size(), " bytes (a MAD is ", kMadSize, ")"));
  }
  if (mad[0] != kMadBaseVersion || mad[1] != kMgmtClassPerfMgt) {
    return UnparsableError(absl::StrFormat(
        "MAD of base version %d, management class 0x%02x (expected 1, 0x04 PerfMgt)", mad[0],
        mad[1]));
  }
  if (mad[3] != kMadMethodGetResp) {
    return UnparsableError(
        absl::StrFormat("PerfMgt method 0x%02x (expected 0x81, GetResp)", mad[3]));
  }
  const uint64_t tid = LoadMadField(&mad[8], 8);
  if (!SameMadTransaction(tid, transaction_id)) {
    return UnparsableError(absl::StrFormat("PerfMgt MAD of transaction 0x%016x (expected 0x%08x)",
                                           tid, static_cast<uint32_t>(transaction_id)));
  }
  const auto attr = static_cast<uint16_t>(LoadMadField(&mad[16], 2));
  if (attr != attribute_id) {
    return UnparsableError(absl::StrCat("GetResp(", AttributeName(attr), ") (expected ",
                                        AttributeName(attribute_id), ")"));
  }
  // The 15 status bits mean what they mean for an SMP (bit 15 is the
  // directed-route D bit there, class-specific here, and not an error).
  const auto status = static_cast<uint16_t>(LoadMadField(&mad[4], 2) & 0x7fff);
  if (absl::Status s = MadStatusError(status, attribute_id); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("PerfMgt GetResp(", AttributeName(attribute_id),
                                               "): MAD status ", DescribeMadStatus(status)));
  }
  return DecodePmaCounters(attribute_id, mad.subspan(kPmaDataOffset, kPmaDataSize));
}

}  // namespace fabricscope
