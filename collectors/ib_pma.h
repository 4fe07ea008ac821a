// Performance-management GMPs (InfiniBand Architecture Specification vol. 1,
// 16.1 "Performance management"): the PortCounters and PortCountersExtended
// Get() that read all the PMA counters of a port in two MADs, and their
// GetResp() parsed into the counters as the kernel's sysfs `counters/` files
// name them. No I/O here: the bytes go through a MAD transport
// (collectors/ib_mad_source.h, MakeUmadPmaTransport).
//
// Why: every read of a `ports/N/counters/<name>` file is one PerfMgt MAD the
// kernel sends to the device (drivers/infiniband/core/sysfs.c,
// show_pma_counter -> get_perf_mad, uncached): 21 files are 21 MADs. The same
// values come in one PortCountersExtended (the 64-bit data and packet
// counters) plus one PortCounters (the error counters and xmit_wait).
//
// A PerfMgt MAD is 256 bytes, big-endian: the 24-byte common MAD header
// (ib_mad.h), 40 reserved bytes, then 192 bytes of attribute data at offset
// 64. In both attributes data byte 1 is PortSelect and bytes 2..3
// CounterSelect. The counters, at bit offsets into the data and widths as
// the kernel's sysfs.c declares them (PORT_PMA_ATTR / PORT_PMA_ATTR_EXT):
//
//   PortCounters (0x0012)                  PortCountersExtended (0x001D)
//   symbol_error               32  16      port_xmit_data          64  64
//   link_error_recovery        48   8      port_rcv_data          128  64
//   link_downed                56   8      port_xmit_packets      192  64
//   port_rcv_errors            64  16      port_rcv_packets       256  64
//   port_rcv_remote_physical_errors 80 16  unicast_xmit_packets   320  64
//   port_rcv_switch_relay_errors    96 16  unicast_rcv_packets    384  64
//   port_xmit_discards        112  16      multicast_xmit_packets 448  64
//   port_xmit_constraint_errors 128 8      multicast_rcv_packets  512  64
//   port_rcv_constraint_errors  136 8
//   local_link_integrity_errors 152 4
//   excessive_buffer_overrun_errors 156 4
//   VL15_dropped              176  16
//   port_xmit_data            192  32
//   port_rcv_data             224  32
//   port_xmit_packets         256  32
//   port_rcv_packets          288  32
//   port_xmit_wait            320  32
//
// The offsets are checked in tests/unit/collectors/ib_pma_test.cc against
// libibmad's field table (mad_get_field of IB_PC_* / IB_PC_EXT_* on the same
// bytes).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fabricscope {

inline constexpr uint8_t kMgmtClassPerfMgt = 0x04;
inline constexpr uint8_t kPerfMgtClassVersion = 1;
inline constexpr uint16_t kPmaAttrPortCounters = 0x0012;
inline constexpr uint16_t kPmaAttrPortCountersExtended = 0x001D;
inline constexpr size_t kPmaDataOffset = 64;
inline constexpr size_t kPmaDataSize = 192;
// The well-known Q_Key of QP1 (GSI), which PerfMgt GMPs are sent to.
inline constexpr uint32_t kGsiQkey = 0x80010000;

// One counter of a reply, named as its sysfs `counters/` file.
struct PmaCounter {
  const char* name;
  uint64_t value;
};

// Get(attribute_id) for local port `port_select`: kMadSize bytes.
std::vector<uint8_t> BuildPmaGet(uint16_t attribute_id, uint8_t port_select,
                                 uint64_t transaction_id);

// Checks that `mad` is the GetResp(attribute_id) of `transaction_id` with
// MAD status 0 (else UnparsableError, or MadStatusError's status) and
// returns its counters, in the table's order.
absl::StatusOr<std::vector<PmaCounter>> ParsePmaGetResp(absl::Span<const uint8_t> mad,
                                                        uint16_t attribute_id,
                                                        uint64_t transaction_id);

// The counters of an attribute's data (kPmaDataSize bytes; shorter reads as
// zero-padded).
std::vector<PmaCounter> DecodePmaCounters(uint16_t attribute_id, absl::Span<const uint8_t> data);

// The `counters/` file names each attribute covers.
std::vector<std::string> PmaCounterNames(uint16_t attribute_id);

}  // namespace fabricscope
