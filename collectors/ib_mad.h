// Directed-route subnet management packets (SMPs): building the SubnGet()
// requests the InfiniBand link-partner source sends (collectors/ib_mad_source.h)
// and parsing the SubnGetResp() replies, as the InfiniBand Architecture
// Specification, vol. 1 lays them out (13.4.3 "MAD common header", 14.2.1.2
// "directed route SMP format", 14.2.5.2 NodeDescription, 14.2.5.3 NodeInfo).
// No I/O here: the bytes go through an SmpTransport.
//
// A directed-route SMP is one 256-byte MAD, every field big-endian:
//
//   offset  size  field
//        0     1  BaseVersion (1)
//        1     1  MgmtClass (0x81, SUBN_DIRECTED_ROUTE)
//        2     1  ClassVersion (1)
//        3     1  R (bit 7: response) | Method (Get 0x01; GetResp 0x81 with R)
//        4     2  D (bit 15: direction, 1 = returning) | Status (bits 0-14)
//        6     1  HopPointer
//        7     1  HopCount
//        8     8  TransactionID
//       16     2  AttributeID
//       18     2  reserved
//       20     4  AttributeModifier
//       24     8  M_Key
//       32     2  DrSLID
//       34     2  DrDLID
//       36    28  reserved
//       64    64  SMP data (the attribute)
//      128    64  InitialPath (entry i: the port out of which hop i leaves)
//      192    64  ReturnPath
//
// NodeInfo (attribute 0x0011, 40 bytes of the SMP data): BaseVersion (0),
// ClassVersion (1), NodeType (2), NumPorts (3), SystemImageGUID (4..11),
// NodeGUID (12..19), PortGUID (20..27), PartitionCap (28..29), DeviceID
// (30..31), Revision (32..35), LocalPortNum (36), VendorID (37..39, 24 bits).
// NodeDescription (attribute 0x0010): 64 bytes of UTF-8, NUL padded.
//
// The offsets are checked in tests/unit/collectors/ib_mad_test.cc against the
// kernel's struct ib_user_mad (rdma/ib_user_mad.h) and against libibmad's
// field table (mad_get_field on the same bytes).
//
// Transaction ids: the kernel's umad layer replaces the high 32 bits of the
// TransactionID of every request it sends with the agent's own id (as
// libibmad knows, which compares the low 32 bits only); a reply matches a
// request when the low 32 bits agree (SameMadTransaction).
//
// Errors of the parsers: a buffer that is not a directed-route SubnGetResp()
// for the expected transaction and attribute (too short, another class,
// method or attribute, another transaction) is UnparsableError (DataLoss,
// core/errors.h). A well-formed reply whose MAD status is not 0 is
// MadStatusError: Unavailable (busy, redirect), Unimplemented (the peer's SMA
// does not support the method or attribute), Internal (bad version, invalid
// field value); the message names the status bits.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fabricscope {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kSmpDataOffset = 64;
inline constexpr size_t kSmpDataSize = 64;
inline constexpr size_t kDrSmpInitialPathOffset = 128;
inline constexpr size_t kDrSmpReturnPathOffset = 192;
// The paths hold 64 entries; entry 0 is unused, so at most 63 hops.
inline constexpr size_t kDrSmpMaxHops = 63;

inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kMgmtClassSubnDirectedRoute = 0x81;
inline constexpr uint8_t kSmpClassVersion = 1;
inline constexpr uint8_t kMadMethodGet = 0x01;
inline constexpr uint8_t kMadMethodGetResp = 0x81;
inline constexpr uint16_t kSmpAttrNodeDescription = 0x0010;
inline constexpr uint16_t kSmpAttrNodeInfo = 0x0011;
// DrSLID/DrDLID of a request whose directed part covers the whole path.
inline constexpr uint16_t kPermissiveLid = 0xffff;

// NodeInfo.NodeType values.
inline constexpr uint8_t kIbNodeTypeCa = 1;
inline constexpr uint8_t kIbNodeTypeSwitch = 2;
inline constexpr uint8_t kIbNodeTypeRouter = 3;

// "ca", "switch", "router"; "node type N" for any other value.
std::string IbNodeTypeName(uint8_t node_type);

// "0x" and 16 lower-case hex digits, as ibnetdiscover prints GUIDs.
std::string FormatIbGuid(uint64_t guid);

struct IbNodeInfo {
  uint8_t base_version = 0;
  uint8_t class_version = 0;
  uint8_t node_type = 0;
  uint8_t num_ports = 0;
  uint64_t system_image_guid = 0;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  uint16_t partition_cap = 0;
  uint16_t device_id = 0;
  uint32_t revision = 0;
  // The number of the node's port the SMP arrived on: for the peer one hop
  // away, the far end of the link.
  uint8_t local_port_num = 0;
  uint32_t vendor_id = 0;  // 24 bits

  friend bool operator==(const IbNodeInfo&, const IbNodeInfo&) = default;
};

// The header fields of a directed-route SMP.
struct DrSmpHeader {
  uint8_t base_version = 0;
  uint8_t mgmt_class = 0;
  uint8_t class_version = 0;
  uint8_t method = 0;      // with the R bit (0x80)
  bool direction = false;  // the D bit: true on the way back
  uint16_t status = 0;     // 15 bits
  uint8_t hop_pointer = 0;
  uint8_t hop_count = 0;
  uint64_t transaction_id = 0;
  uint16_t attribute_id = 0;
  uint32_t attribute_modifier = 0;
  uint64_t m_key = 0;
  uint16_t dr_slid = 0;
  uint16_t dr_dlid = 0;
};

// A big-endian field of `bytes` (1 to 8) bytes at `p`, as every MAD field is.
uint64_t LoadMadField(const uint8_t* p, int bytes);

// A Get() of `mgmt_class` / `class_version`: kMadSize bytes with the common
// MAD header (offsets 0..23 above: base version 1, method Get, status 0, the
// transaction, attribute and modifier) set and every other byte 0. The SMP
// and the PerfMgt builders (collectors/ib_pma.h) start from it.
std::vector<uint8_t> BuildMadGet(uint8_t mgmt_class, uint8_t class_version, uint16_t attribute_id,
                                 uint32_t attribute_modifier, uint64_t transaction_id);

// A SubnGet(attribute_id) along the directed route `path`: path[i] is the
// port out of which hop i + 1 leaves (InitialPath[i + 1]); HopCount is
// path.size(), HopPointer 0, DrSLID and DrDLID the permissive LID. An empty
// path addresses the local node. kMadSize bytes; InvalidArgument when the
// path is longer than kDrSmpMaxHops.
absl::StatusOr<std::vector<uint8_t>> BuildDrSmpGet(uint16_t attribute_id,
                                                   uint32_t attribute_modifier,
                                                   absl::Span<const uint8_t> path,
                                                   uint64_t transaction_id, uint64_t m_key = 0);

// The SubnGet(attribute_id) for the node one hop away through `local_port`:
// HopCount 1, InitialPath[1] = local_port (libibmad's route "0,<port>").
std::vector<uint8_t> BuildNeighborSmpGet(uint16_t attribute_id, uint8_t local_port,
                                         uint64_t transaction_id);

// Whether two transaction ids name the same transaction (low 32 bits, see
// above).
bool SameMadTransaction(uint64_t a, uint64_t b);

// The header of a directed-route SMP; UnparsableError when `mad` is shorter
// than kMadSize or is not of MgmtClass 0x81 / BaseVersion 1.
absl::StatusOr<DrSmpHeader> DecodeDrSmpHeader(absl::Span<const uint8_t> mad);

// "busy", "redirect required", "method not supported", ... for a non-zero
// MAD status (the 15 status bits of a directed-route SMP), e.g.
// "0x000c (method/attribute combination not supported)".
std::string DescribeMadStatus(uint16_t status);
// The Status for a non-zero MAD status (see the top of this file); OK for 0.
absl::Status MadStatusError(uint16_t status, uint16_t attribute_id);

// Checks that `mad` is the SubnGetResp(attribute_id) of `transaction_id`
// with status 0 and returns its SMP data (kSmpDataSize bytes, a view into
// `mad`).
absl::StatusOr<absl::Span<const uint8_t>> CheckDrSmpGetResp(absl::Span<const uint8_t> mad,
                                                            uint64_t transaction_id,
                                                            uint16_t attribute_id);

// The attribute in the SMP data (kSmpDataSize bytes; a shorter view reads as
// if padded with zeros).
IbNodeInfo DecodeNodeInfo(absl::Span<const uint8_t> smp_data);
// The text up to the first NUL (all 64 bytes without one). Bytes that are not
// valid UTF-8, and control characters, become '?', so the result is valid
// UTF-8 of at most 64 bytes, fit for a label value.
std::string DecodeNodeDescription(absl::Span<const uint8_t> smp_data);

// CheckDrSmpGetResp + Decode*.
absl::StatusOr<IbNodeInfo> ParseNodeInfoResp(absl::Span<const uint8_t> mad,
                                             uint64_t transaction_id);
absl::StatusOr<std::string> ParseNodeDescriptionResp(absl::Span<const uint8_t> mad,
                                                     uint64_t transaction_id);

}  // namespace fabricscope
