// Fuzz target: a directed-route SMP as umad_recv hands it out (one MAD, any
// length), for the parsers of collectors/ib_mad.h: DecodeDrSmpHeader, then
// ParseNodeInfoResp and ParseNodeDescriptionResp as IbMadSource runs them on
// a reply. The transaction id expected is the buffer's own (bytes 8..15), so
// mutations reach past the TID check; every other byte is the fuzzer's.
// Properties: an accepted reply is a 256-byte-or-longer GetResp of class 0x81
// with status 0 and the attribute asked for; the NodeInfo fields are the
// bytes at the spec's offsets; a NodeDescription is valid UTF-8 without
// control characters, at most 64 bytes; the request builder round-trips
// through the header decoder. The same bytes go through the PerfMgt parser
// (collectors/ib_pma.h) for both attributes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectors/ib_mad.h"
#include "collectors/ib_pma.h"
#include "fuzz/fuzz_check.h"

namespace {

uint64_t Be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

// Whether `s` is UTF-8 (decoding each code point; no overlong forms, no
// surrogates, nothing above U+10FFFF) without C0 controls or DEL.
bool CleanUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int extra;
    uint32_t cp;
    uint32_t min;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

void CheckAcceptedReply(const uint8_t* data, size_t size, uint16_t attribute) {
  FUZZ_CHECK(size >= fabricscope::kMadSize);
  FUZZ_CHECK(data[0] == 1 && data[1] == 0x81 && data[3] == 0x81);
  FUZZ_CHECK((Be(data + 4, 2) & 0x7fff) == 0);
  FUZZ_CHECK(Be(data + 16, 2) == attribute);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const absl::Span<const uint8_t> mad(data, size);
  const uint64_t tid = size >= 16 ? Be(data + 8, 8) : 0;

  absl::StatusOr<fabricscope::DrSmpHeader> header = fabricscope::DecodeDrSmpHeader(mad);
  if (header.ok()) {
    FUZZ_CHECK(size >= fabricscope::kMadSize);
    FUZZ_CHECK(header->status <= 0x7fff);
    FUZZ_CHECK(header->transaction_id == tid);
  }

  absl::StatusOr<fabricscope::IbNodeInfo> info = fabricscope::ParseNodeInfoResp(mad, tid);
  if (info.ok()) {
    CheckAcceptedReply(data, size, fabricscope::kSmpAttrNodeInfo);
    const uint8_t* d = data + 64;
    FUZZ_CHECK(info->node_type == d[2] && info->num_ports == d[3]);
    FUZZ_CHECK(info->node_guid == Be(d + 12, 8));
    FUZZ_CHECK(info->local_port_num == d[36]);
    FUZZ_CHECK(info->vendor_id == Be(d + 37, 3) && info->vendor_id <= 0xffffff);
    FUZZ_CHECK(fabricscope::FormatIbGuid(info->node_guid).size() == 18);
    FUZZ_CHECK(!fabricscope::IbNodeTypeName(info->node_type).empty());
  } else {
    FUZZ_CHECK(!info.status().message().empty());
  }

  absl::StatusOr<std::string> desc = fabricscope::ParseNodeDescriptionResp(mad, tid);
  if (desc.ok()) {
    CheckAcceptedReply(data, size, fabricscope::kSmpAttrNodeDescription);
    FUZZ_CHECK(desc->size() <= 64);
    FUZZ_CHECK(CleanUtf8(*desc));
  }

  // Any 64 bytes as a description: same guarantees.
  if (size >= 64) {
    const std::string any = fabricscope::DecodeNodeDescription(mad.subspan(size - 64));
    FUZZ_CHECK(any.size() <= 64);
    FUZZ_CHECK(CleanUtf8(any));
  }

  // Status codes: OK only for status 0.
  if (size >= 2) {
    const uint16_t status = static_cast<uint16_t>(Be(data, 2) & 0x7fff);
    FUZZ_CHECK(fabricscope::MadStatusError(status, 0x11).ok() == (status == 0));
  }

  // The same bytes as a PerfMgt GetResp (collectors/ib_pma.h): accepted only
  // as a class 0x04 GetResp of the attribute with status 0, every counter
  // within its field's width.
  for (uint16_t attr :
       {fabricscope::kPmaAttrPortCounters, fabricscope::kPmaAttrPortCountersExtended}) {
    absl::StatusOr<std::vector<fabricscope::PmaCounter>> pma =
        fabricscope::ParsePmaGetResp(mad, attr, tid);
    if (!pma.ok()) continue;
    FUZZ_CHECK(size >= fabricscope::kMadSize);
    FUZZ_CHECK(data[0] == 1 && data[1] == 0x04 && data[3] == 0x81);
    FUZZ_CHECK((Be(data + 4, 2) & 0x7fff) == 0 && Be(data + 16, 2) == attr);
    FUZZ_CHECK(pma->size() == fabricscope::PmaCounterNames(attr).size());
    for (const fabricscope::PmaCounter& c : *pma) {
      if (attr == fabricscope::kPmaAttrPortCounters && std::string(c.name) != "port_xmit_data" &&
          std::string(c.name) != "port_rcv_data" && std::string(c.name) != "port_xmit_packets" &&
          std::string(c.name) != "port_rcv_packets" && std::string(c.name) != "port_xmit_wait") {
        FUZZ_CHECK(c.value <= 0xffff);  // the error counters are 4 to 16 bits
      }
    }
  }

  // Builder -> header decoder round trip with the input's values.
  if (size >= 16) {
    const uint16_t attribute = static_cast<uint16_t>(Be(data, 2));
    const uint8_t port = data[2];
    std::vector<uint8_t> request = fabricscope::BuildNeighborSmpGet(attribute, port, tid);
    absl::StatusOr<fabricscope::DrSmpHeader> h = fabricscope::DecodeDrSmpHeader(request);
    FUZZ_CHECK(h.ok());
    FUZZ_CHECK(h->attribute_id == attribute && h->transaction_id == tid);
    FUZZ_CHECK(h->method == fabricscope::kMadMethodGet && !h->direction && h->status == 0);
    FUZZ_CHECK(h->hop_count == 1 && h->hop_pointer == 0 && request[129] == port);
    // A request is not a reply.
    FUZZ_CHECK(!fabricscope::ParseNodeInfoResp(request, tid).ok());
  }
  return 0;
}
