// PerfMgt GMPs (collectors/ib_pma.h) against an independent reading of the
// layout: every field of a request and of a reply is read (or written) a
// second time with libibmad's field table (mad_get_field / mad_set_field of
// the IB_PC_* and IB_PC_EXT_* fields, which start at the PMA data,
// IB_PC_DATA_OFFS bytes into the MAD).
#include "collectors/ib_pma.h"

#include <infiniband/mad.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "collectors/ib_mad.h"
#include "core/errors.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace ib_pma_test {
namespace {

std::map<std::string, uint64_t> ByName(const std::vector<PmaCounter>& counters) {
  std::map<std::string, uint64_t> out;
  for (const PmaCounter& c : counters) out[c.name] = c.value;
  return out;
}

TEST(IbPmaTest, GetRequestLayout) {
  std::vector<uint8_t> mad = BuildPmaGet(kPmaAttrPortCountersExtended, 3, 0x1122334455667788);
  ASSERT_EQ(mad.size(), static_cast<size_t>(IB_MAD_SIZE));
  EXPECT_EQ(mad_get_field(mad.data(), 0, IB_MAD_BASEVER_F), 1u);
  EXPECT_EQ(mad_get_field(mad.data(), 0, IB_MAD_MGMTCLASS_F),
            static_cast<uint32_t>(IB_PERFORMANCE_CLASS));
  EXPECT_EQ(mad_get_field(mad.data(), 0, IB_MAD_CLASSVER_F), 1u);
  EXPECT_EQ(mad_get_field(mad.data(), 0, IB_MAD_METHOD_F),
            static_cast<uint32_t>(IB_MAD_METHOD_GET));
  EXPECT_EQ(mad_get_field64(mad.data(), 0, IB_MAD_TRID_F), 0x1122334455667788u);
  EXPECT_EQ(mad_get_field(mad.data(), 0, IB_MAD_ATTRID_F),
            static_cast<uint32_t>(IB_GSI_PORT_COUNTERS_EXT));
  EXPECT_EQ(mad_get_field(mad.data() + IB_PC_DATA_OFFS, 0, IB_PC_EXT_PORT_SELECT_F), 3u);
  EXPECT_EQ(mad_get_field(mad.data() + IB_PC_DATA_OFFS, 0, IB_PC_PORT_SELECT_F), 3u);
  EXPECT_EQ(kPmaDataOffset, static_cast<size_t>(IB_PC_DATA_OFFS));
  EXPECT_EQ(kPmaAttrPortCounters, IB_GSI_PORT_COUNTERS);
}

// Each field set through libibmad to a distinct value that fills its width
// reads back under its sysfs name.
TEST(IbPmaTest, PortCountersFieldsMatchLibibmad) {
  struct Case {
    const char* name;
    MAD_FIELDS field;
    uint32_t value;
  };
  const Case cases[] = {
      {"symbol_error", IB_PC_ERR_SYM_F, 0xfffe},
      {"link_error_recovery", IB_PC_LINK_RECOVERS_F, 0xfd},
      {"link_downed", IB_PC_LINK_DOWNED_F, 0xfc},
      {"port_rcv_errors", IB_PC_ERR_RCV_F, 0xfffb},
      {"port_rcv_remote_physical_errors", IB_PC_ERR_PHYSRCV_F, 0xfffa},
      {"port_rcv_switch_relay_errors", IB_PC_ERR_SWITCH_REL_F, 0xfff9},
      {"port_xmit_discards", IB_PC_XMT_DISCARDS_F, 0xfff8},
      {"port_xmit_constraint_errors", IB_PC_ERR_XMTCONSTR_F, 0xf7},
      {"port_rcv_constraint_errors", IB_PC_ERR_RCVCONSTR_F, 0xf6},
      {"local_link_integrity_errors", IB_PC_ERR_LOCALINTEG_F, 0xe},
      {"excessive_buffer_overrun_errors", IB_PC_ERR_EXCESS_OVR_F, 0xd},
      {"VL15_dropped", IB_PC_VL15_DROPPED_F, 0xfff5},
      {"port_xmit_data", IB_PC_XMT_BYTES_F, 0xfffffff4},
      {"port_rcv_data", IB_PC_RCV_BYTES_F, 0xfffffff3},
      {"port_xmit_packets", IB_PC_XMT_PKTS_F, 0xfffffff2},
      {"port_rcv_packets", IB_PC_RCV_PKTS_F, 0xfffffff1},
      {"port_xmit_wait", IB_PC_XMT_WAIT_F, 0xfffffff0},
  };
  std::vector<uint8_t> data(kPmaDataSize, 0);
  for (const Case& c : cases) mad_set_field(data.data(), 0, c.field, c.value);
  const auto got = ByName(DecodePmaCounters(kPmaAttrPortCounters, data));
  ASSERT_EQ(got.size(), std::size(cases));
  for (const Case& c : cases) EXPECT_EQ(got.at(c.name), c.value) << c.name;
}

TEST(IbPmaTest, PortCountersExtendedFieldsMatchLibibmad) {
  struct Case {
    const char* name;
    MAD_FIELDS field;
    uint64_t value;
  };
  const Case cases[] = {
      {"port_xmit_data", IB_PC_EXT_XMT_BYTES_F, 0xfffffffffffffff1},
      {"port_rcv_data", IB_PC_EXT_RCV_BYTES_F, 0xfffffffffffffff2},
      {"port_xmit_packets", IB_PC_EXT_XMT_PKTS_F, 0xfffffffffffffff3},
      {"port_rcv_packets", IB_PC_EXT_RCV_PKTS_F, 0xfffffffffffffff4},
      {"unicast_xmit_packets", IB_PC_EXT_XMT_UPKTS_F, 0xfffffffffffffff5},
      {"unicast_rcv_packets", IB_PC_EXT_RCV_UPKTS_F, 0xfffffffffffffff6},
      {"multicast_xmit_packets", IB_PC_EXT_XMT_MPKTS_F, 0xfffffffffffffff7},
      {"multicast_rcv_packets", IB_PC_EXT_RCV_MPKTS_F, 0xfffffffffffffff8},
  };
  std::vector<uint8_t> data(kPmaDataSize, 0);
  for (const Case& c : cases) mad_set_field64(data.data(), 0, c.field, c.value);
  const auto got = ByName(DecodePmaCounters(kPmaAttrPortCountersExtended, data));
  ASSERT_EQ(got.size(), std::size(cases));
  for (const Case& c : cases) EXPECT_EQ(got.at(c.name), c.value) << c.name;
  EXPECT_EQ(PmaCounterNames(kPmaAttrPortCountersExtended).size(), std::size(cases));
}

TEST(IbPmaTest, RepliesAreCheckedBeforeTheyAreRead) {
  const uint64_t tid = 0xabcdef0012345678;
  std::vector<uint8_t> reply = BuildPmaGet(kPmaAttrPortCounters, 1, tid);
  reply[3] = 0x81;
  mad_set_field(reply.data() + kPmaDataOffset, 0, IB_PC_ERR_SYM_F, 42);
  auto ok = ParsePmaGetResp(reply, kPmaAttrPortCounters, tid);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ByName(*ok).at("symbol_error"), 42u);
  // The kernel rewrites the high 32 bits of the transaction id.
  EXPECT_TRUE(ParsePmaGetResp(reply, kPmaAttrPortCounters, tid ^ 0xffff000000000000).ok());

  EXPECT_TRUE(IsUnparsable(
      ParsePmaGetResp(absl::MakeSpan(reply).first(100), kPmaAttrPortCounters, tid).status()));
  EXPECT_TRUE(IsUnparsable(ParsePmaGetResp(reply, kPmaAttrPortCountersExtended, tid).status()));
  EXPECT_TRUE(IsUnparsable(ParsePmaGetResp(reply, kPmaAttrPortCounters, tid + 1).status()));
  std::vector<uint8_t> request = BuildPmaGet(kPmaAttrPortCounters, 1, tid);
  EXPECT_TRUE(IsUnparsable(ParsePmaGetResp(request, kPmaAttrPortCounters, tid).status()));
  std::vector<uint8_t> smp = reply;
  smp[1] = 0x81;
  EXPECT_TRUE(IsUnparsable(ParsePmaGetResp(smp, kPmaAttrPortCounters, tid).status()));
  // MAD status: unsupported attribute -> Unimplemented, busy -> Unavailable.
  std::vector<uint8_t> unsupported = reply;
  unsupported[5] = 0x0c;
  absl::Status s = ParsePmaGetResp(unsupported, kPmaAttrPortCounters, tid).status();
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_NE(s.message().find("PerfMgt GetResp(PortCounters): MAD status 0x000c"), std::string::npos)
      << s;
  std::vector<uint8_t> busy = reply;
  busy[5] = 0x01;
  EXPECT_TRUE(absl::IsUnavailable(ParsePmaGetResp(busy, kPmaAttrPortCounters, tid).status()));
}

}  // namespace
}  // namespace ib_pma_test
}  // namespace fabricscope
