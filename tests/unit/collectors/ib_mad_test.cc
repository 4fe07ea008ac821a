// Directed-route SMPs (collectors/ib_mad.h) against the layout of the
// InfiniBand Architecture Specification vol. 1 (13.4.3 MAD common header,
// 14.2.1.2 directed-route SMP, 14.2.5.2 NodeDescription, 14.2.5.3 NodeInfo):
// the replies below are written byte by byte at the spec's offsets (not with
// the code under test), and every field is read a second time with libibmad's
// field table (mad_get_field), an independent implementation of the layout.
#include "collectors/ib_mad.h"

#include <infiniband/mad.h>
#include <rdma/ib_user_mad.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace {

// The MAD follows the kernel's 64-byte struct ib_user_mad_hdr in a umad
// buffer (what umad_get_mad points at with the current ABI).
static_assert(sizeof(struct ib_user_mad_hdr) == 64);
static_assert(offsetof(struct ib_user_mad, data) == 64);
static_assert(kMadSize == IB_MAD_SIZE);
static_assert(kSmpDataOffset == IB_SMP_DATA_OFFS);
static_assert(kSmpDataSize == IB_SMP_DATA_SIZE);
static_assert(kMgmtClassSubnDirectedRoute == IB_SMI_DIRECT_CLASS);
static_assert(kMadMethodGet == IB_MAD_METHOD_GET);
static_assert(kMadMethodGetResp == (IB_MAD_METHOD_GET | IB_MAD_RESPONSE));
static_assert(kSmpAttrNodeInfo == IB_ATTR_NODE_INFO);
static_assert(kSmpAttrNodeDescription == IB_ATTR_NODE_DESC);
static_assert(kIbNodeTypeCa == IB_NODE_CA && kIbNodeTypeSwitch == IB_NODE_SWITCH &&
              kIbNodeTypeRouter == IB_NODE_ROUTER);

void Put(std::vector<uint8_t>& b, size_t off, int bytes, uint64_t v) {
  for (int i = bytes - 1; i >= 0; --i) {
    b[off + i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

// A SubnGetResp as the peer's SMA returns it: D bit set, HopPointer = HopCount
// = 1, the attribute at byte 64.
std::vector<uint8_t> SpecReply(uint16_t attr, uint64_t tid, uint16_t status,
                               const std::vector<uint8_t>& data, uint8_t local_port = 1) {
  std::vector<uint8_t> m(256, 0);
  m[0] = 1;                       // BaseVersion
  m[1] = 0x81;                    // MgmtClass SUBN_DIRECTED_ROUTE
  m[2] = 1;                       // ClassVersion
  m[3] = 0x81;                    // R | GetResp
  Put(m, 4, 2, 0x8000 | status);  // D | Status
  m[6] = 1;                       // HopPointer
  m[7] = 1;                       // HopCount
  Put(m, 8, 8, tid);
  Put(m, 16, 2, attr);
  Put(m, 20, 4, 0);       // AttributeModifier
  Put(m, 24, 8, 0);       // M_Key
  Put(m, 32, 2, 0xffff);  // DrSLID
  Put(m, 34, 2, 0xffff);  // DrDLID
  for (size_t i = 0; i < data.size() && i < 64; ++i) m[64 + i] = data[i];
  m[128 + 1] = local_port;  // InitialPath[1]
  m[192 + 1] = 17;          // ReturnPath[1]: the port it came in on at the peer
  return m;
}

struct NodeInfoFields {
  uint8_t node_type;
  uint8_t num_ports;
  uint64_t system_image_guid;
  uint64_t node_guid;
  uint64_t port_guid;
  uint16_t partition_cap;
  uint16_t device_id;
  uint32_t revision;
  uint8_t local_port;
  uint32_t vendor_id;
};

std::vector<uint8_t> SpecNodeInfo(const NodeInfoFields& f) {
  std::vector<uint8_t> d(64, 0);
  d[0] = 1;  // BaseVersion
  d[1] = 1;  // ClassVersion
  d[2] = f.node_type;
  d[3] = f.num_ports;
  Put(d, 4, 8, f.system_image_guid);
  Put(d, 12, 8, f.node_guid);
  Put(d, 20, 8, f.port_guid);
  Put(d, 28, 2, f.partition_cap);
  Put(d, 30, 2, f.device_id);
  Put(d, 32, 4, f.revision);
  d[36] = f.local_port;
  Put(d, 37, 3, f.vendor_id);
  return d;
}

// An NVIDIA Quantum (QM8700) switch seen from port 17, and a ConnectX-6 HCA.
const NodeInfoFields kSwitch = {2,
                                41,
                                0x0c42a1030079b4c0,
                                0x0c42a1030079b4c0,
                                0x0c42a1030079b4c0,
                                0x0008,
                                0xd2f0,
                                0x000000a0,
                                17,
                                0x0002c9};
const NodeInfoFields kCa = {1,
                            1,
                            0xb8cef60300a1b2c2,
                            0xb8cef60300a1b2c2,
                            0xb8cef60300a1b2c3,
                            0x0080,
                            0x101b,
                            0x00000000,
                            1,
                            0x0002c9};

std::vector<uint8_t> DescData(const std::string& text) {
  std::vector<uint8_t> d(64, 0);
  memcpy(d.data(), text.data(), std::min<size_t>(text.size(), 64));
  return d;
}

uint32_t Field(std::vector<uint8_t>& buf, int base, MAD_FIELDS f) {
  return mad_get_field(buf.data(), base, f);
}
uint64_t Field64(std::vector<uint8_t>& buf, int base, MAD_FIELDS f) {
  return mad_get_field64(buf.data(), base, f);
}

TEST(IbMadTest, NeighborRequestLaidOutPerSpec) {
  std::vector<uint8_t> m = BuildNeighborSmpGet(kSmpAttrNodeInfo, 3, 0x1122334455667788);
  ASSERT_EQ(m.size(), 256u);
  // Literal offsets.
  EXPECT_EQ(m[0], 1);
  EXPECT_EQ(m[1], 0x81);
  EXPECT_EQ(m[2], 1);
  EXPECT_EQ(m[3], 0x01);
  EXPECT_EQ(m[4], 0);
  EXPECT_EQ(m[5], 0);
  EXPECT_EQ(m[6], 0);  // HopPointer
  EXPECT_EQ(m[7], 1);  // HopCount
  EXPECT_EQ(m[8], 0x11);
  EXPECT_EQ(m[15], 0x88);
  EXPECT_EQ(m[16], 0x00);
  EXPECT_EQ(m[17], 0x11);
  EXPECT_EQ(m[32], 0xff);
  EXPECT_EQ(m[35], 0xff);
  EXPECT_EQ(m[128], 0);
  EXPECT_EQ(m[129], 3);  // InitialPath[1]: out of local port 3
  for (size_t i = 130; i < 256; ++i) EXPECT_EQ(m[i], 0) << i;
  for (size_t i = 36; i < 128; ++i) EXPECT_EQ(m[i], 0) << i;
  // libibmad's reading of the same bytes.
  EXPECT_EQ(Field(m, 0, IB_MAD_BASEVER_F), 1u);
  EXPECT_EQ(Field(m, 0, IB_MAD_MGMTCLASS_F), 0x81u);
  EXPECT_EQ(Field(m, 0, IB_MAD_CLASSVER_F), 1u);
  EXPECT_EQ(Field(m, 0, IB_MAD_METHOD_F), 1u);
  EXPECT_EQ(Field(m, 0, IB_MAD_RESPONSE_F), 0u);
  EXPECT_EQ(Field(m, 0, IB_DRSMP_DIRECTION_F), 0u);
  EXPECT_EQ(Field(m, 0, IB_DRSMP_STATUS_F), 0u);
  EXPECT_EQ(Field(m, 0, IB_DRSMP_HOPPTR_F), 0u);
  EXPECT_EQ(Field(m, 0, IB_DRSMP_HOPCNT_F), 1u);
  EXPECT_EQ(Field64(m, 0, IB_MAD_TRID_F), 0x1122334455667788u);
  EXPECT_EQ(Field(m, 0, IB_MAD_ATTRID_F), 0x11u);
  EXPECT_EQ(Field(m, 0, IB_MAD_ATTRMOD_F), 0u);
  EXPECT_EQ(Field64(m, 0, IB_MAD_MKEY_F), 0u);
  EXPECT_EQ(Field(m, 0, IB_DRSMP_DRSLID_F), 0xffffu);
  EXPECT_EQ(Field(m, 0, IB_DRSMP_DRDLID_F), 0xffffu);
  uint8_t path[64];
  mad_get_array(m.data(), 0, IB_DRSMP_PATH_F, path);
  EXPECT_EQ(path[0], 0);
  EXPECT_EQ(path[1], 3);
}

TEST(IbMadTest, LongerRoutesAndTheirLimit) {
  std::vector<uint8_t> path(63);
  for (size_t i = 0; i < path.size(); ++i) path[i] = static_cast<uint8_t>(i + 1);
  absl::StatusOr<std::vector<uint8_t>> m =
      BuildDrSmpGet(kSmpAttrNodeDescription, 0x12345678, path, 7, 0xabcdef0123456789);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Field(*m, 0, IB_DRSMP_HOPCNT_F), 63u);
  EXPECT_EQ(Field(*m, 0, IB_MAD_ATTRMOD_F), 0x12345678u);
  EXPECT_EQ(Field64(*m, 0, IB_MAD_MKEY_F), 0xabcdef0123456789u);
  EXPECT_EQ((*m)[128 + 63], 63);
  EXPECT_EQ((*m)[192], 0);  // the return path is the responder's to fill

  absl::StatusOr<std::vector<uint8_t>> local = BuildDrSmpGet(kSmpAttrNodeInfo, 0, {}, 7);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ((*local)[7], 0);

  path.push_back(64);
  EXPECT_TRUE(absl::IsInvalidArgument(BuildDrSmpGet(kSmpAttrNodeInfo, 0, path, 7).status()));
}

void ExpectNodeInfo(const IbNodeInfo& n, const NodeInfoFields& f) {
  EXPECT_EQ(n.base_version, 1);
  EXPECT_EQ(n.class_version, 1);
  EXPECT_EQ(n.node_type, f.node_type);
  EXPECT_EQ(n.num_ports, f.num_ports);
  EXPECT_EQ(n.system_image_guid, f.system_image_guid);
  EXPECT_EQ(n.node_guid, f.node_guid);
  EXPECT_EQ(n.port_guid, f.port_guid);
  EXPECT_EQ(n.partition_cap, f.partition_cap);
  EXPECT_EQ(n.device_id, f.device_id);
  EXPECT_EQ(n.revision, f.revision);
  EXPECT_EQ(n.local_port_num, f.local_port);
  EXPECT_EQ(n.vendor_id, f.vendor_id);
}

// Our reading against libibmad's of the same SMP data.
void ExpectSameAsLibibmad(const IbNodeInfo& n, std::vector<uint8_t>& mad) {
  const int base = IB_SMP_DATA_OFFS;
  EXPECT_EQ(n.base_version, Field(mad, base, IB_NODE_BASE_VERS_F));
  EXPECT_EQ(n.class_version, Field(mad, base, IB_NODE_CLASS_VERS_F));
  EXPECT_EQ(n.node_type, Field(mad, base, IB_NODE_TYPE_F));
  EXPECT_EQ(n.num_ports, Field(mad, base, IB_NODE_NPORTS_F));
  EXPECT_EQ(n.system_image_guid, Field64(mad, base, IB_NODE_SYSTEM_GUID_F));
  EXPECT_EQ(n.node_guid, Field64(mad, base, IB_NODE_GUID_F));
  EXPECT_EQ(n.port_guid, Field64(mad, base, IB_NODE_PORT_GUID_F));
  EXPECT_EQ(n.partition_cap, Field(mad, base, IB_NODE_PARTITION_CAP_F));
  EXPECT_EQ(n.device_id, Field(mad, base, IB_NODE_DEVID_F));
  EXPECT_EQ(n.revision, Field(mad, base, IB_NODE_REVISION_F));
  EXPECT_EQ(n.local_port_num, Field(mad, base, IB_NODE_LOCAL_PORT_F));
  EXPECT_EQ(n.vendor_id, Field(mad, base, IB_NODE_VENDORID_F));
}

TEST(IbMadTest, NodeInfoOfASwitch) {
  std::vector<uint8_t> mad = SpecReply(0x0011, 0x42, 0, SpecNodeInfo(kSwitch));
  absl::StatusOr<IbNodeInfo> n = ParseNodeInfoResp(mad, 0x42);
  ASSERT_TRUE(n.ok()) << n.status();
  ExpectNodeInfo(*n, kSwitch);
  ExpectSameAsLibibmad(*n, mad);
  EXPECT_EQ(IbNodeTypeName(n->node_type), "switch");
  EXPECT_EQ(FormatIbGuid(n->node_guid), "0x0c42a1030079b4c0");
}

TEST(IbMadTest, NodeInfoOfACa) {
  std::vector<uint8_t> mad = SpecReply(0x0011, 0x43, 0, SpecNodeInfo(kCa));
  absl::StatusOr<IbNodeInfo> n = ParseNodeInfoResp(mad, 0x43);
  ASSERT_TRUE(n.ok()) << n.status();
  ExpectNodeInfo(*n, kCa);
  ExpectSameAsLibibmad(*n, mad);
  EXPECT_EQ(IbNodeTypeName(n->node_type), "ca");
  EXPECT_NE(n->port_guid, n->node_guid);
}

TEST(IbMadTest, HeaderOfAReplyAgreesWithLibibmad) {
  std::vector<uint8_t> mad = SpecReply(0x0011, 0xfeedface00000042, 0x001c, SpecNodeInfo(kCa));
  absl::StatusOr<DrSmpHeader> h = DecodeDrSmpHeader(mad);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->base_version, Field(mad, 0, IB_MAD_BASEVER_F));
  EXPECT_EQ(h->mgmt_class, Field(mad, 0, IB_MAD_MGMTCLASS_F));
  EXPECT_EQ(h->class_version, Field(mad, 0, IB_MAD_CLASSVER_F));
  EXPECT_EQ(h->method, Field(mad, 0, IB_MAD_METHOD_F) | (Field(mad, 0, IB_MAD_RESPONSE_F) << 7));
  EXPECT_EQ(h->method, 0x81);
  EXPECT_TRUE(h->direction);
  EXPECT_EQ(Field(mad, 0, IB_DRSMP_DIRECTION_F), 1u);
  EXPECT_EQ(h->status, 0x001c);
  EXPECT_EQ(h->status, Field(mad, 0, IB_DRSMP_STATUS_F));
  EXPECT_EQ(h->hop_pointer, Field(mad, 0, IB_DRSMP_HOPPTR_F));
  EXPECT_EQ(h->hop_count, Field(mad, 0, IB_DRSMP_HOPCNT_F));
  EXPECT_EQ(h->transaction_id, Field64(mad, 0, IB_MAD_TRID_F));
  EXPECT_EQ(h->attribute_id, Field(mad, 0, IB_MAD_ATTRID_F));
  EXPECT_EQ(h->attribute_modifier, Field(mad, 0, IB_MAD_ATTRMOD_F));
  EXPECT_EQ(h->m_key, Field64(mad, 0, IB_MAD_MKEY_F));
  EXPECT_EQ(h->dr_slid, Field(mad, 0, IB_DRSMP_DRSLID_F));
  EXPECT_EQ(h->dr_dlid, Field(mad, 0, IB_DRSMP_DRDLID_F));
}

TEST(IbMadTest, NodeDescriptionNulPadded) {
  std::vector<uint8_t> mad = SpecReply(0x0010, 9, 0, DescData("MF0;leaf07:MQM8700/U1"));
  absl::StatusOr<std::string> d = ParseNodeDescriptionResp(mad, 9);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, "MF0;leaf07:MQM8700/U1");
  char oracle[65] = {};
  mad_decode_field(mad.data() + IB_SMP_DATA_OFFS, IB_NODE_DESC_F, oracle);
  EXPECT_EQ(*d, std::string(oracle));
}

TEST(IbMadTest, NodeDescriptionFillingAll64BytesHasNoNul) {
  const std::string text = "node12 HCA-1 " + std::string(51, 'x');
  ASSERT_EQ(text.size(), 64u);
  std::vector<uint8_t> mad = SpecReply(0x0010, 9, 0, DescData(text));
  absl::StatusOr<std::string> d = ParseNodeDescriptionResp(mad, 9);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, text);
}

TEST(IbMadTest, NodeDescriptionKeepsUtf8AndReplacesTheRest) {
  // "Zürich sw1" (ü: C3 BC), a tab, a lone continuation byte, a truncated
  // 3-byte sequence, an overlong '/' (C0 AF), then NUL and garbage after it.
  std::vector<uint8_t> d = DescData("");
  const uint8_t bytes[] = {'Z', 0xc3, 0xbc, 'r',  'i',  'c',  'h', '\t', 's', 'w',
                           '1', 0x80, 0xe2, 0x82, 0xc0, 0xaf, 0,   'x',  'y'};
  memcpy(d.data(), bytes, sizeof bytes);
  EXPECT_EQ(DecodeNodeDescription(d), "Z\xc3\xbcrich?sw1?????");
}

TEST(IbMadTest, BadStatusNamesTheBits) {
  std::vector<uint8_t> unsupported = SpecReply(0x0011, 5, 0x000c, SpecNodeInfo(kSwitch));
  absl::Status s = ParseNodeInfoResp(unsupported, 5).status();
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_NE(s.message().find("0x000c"), std::string::npos) << s;
  EXPECT_NE(s.message().find("method/attribute combination not supported"), std::string::npos) << s;
  EXPECT_NE(s.message().find("NodeInfo"), std::string::npos) << s;

  s = ParseNodeInfoResp(SpecReply(0x0011, 5, 0x0001, SpecNodeInfo(kSwitch)), 5).status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("busy"), std::string::npos) << s;

  s = ParseNodeDescriptionResp(SpecReply(0x0010, 5, 0x011c, DescData("x")), 5).status();
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_NE(s.message().find("0x011c"), std::string::npos) << s;
  EXPECT_NE(s.message().find("invalid attribute or modifier value"), std::string::npos) << s;
  EXPECT_NE(s.message().find("class-specific 0x01"), std::string::npos) << s;

  EXPECT_EQ(DescribeMadStatus(0x0004), "0x0004 (bad version)");
  EXPECT_EQ(DescribeMadStatus(0x0008), "0x0008 (method not supported)");
  EXPECT_EQ(DescribeMadStatus(0x0002), "0x0002 (redirect required)");
}

TEST(IbMadTest, TransactionMatchesOnTheLow32Bits) {
  std::vector<uint8_t> mad = SpecReply(0x0011, 0x0000000700000042, 0, SpecNodeInfo(kCa));
  // The kernel rewrote the high half (its agent id): still ours.
  EXPECT_TRUE(ParseNodeInfoResp(mad, 0x0000000000000042).ok());
  absl::Status s = ParseNodeInfoResp(mad, 0x0000000700000043).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("transaction"), std::string::npos) << s;
}

TEST(IbMadTest, NotAGetRespOfTheRightAttribute) {
  std::vector<uint8_t> mad = SpecReply(0x0011, 1, 0, SpecNodeInfo(kCa));
  // The attribute asked for is NodeDescription.
  EXPECT_EQ(ParseNodeDescriptionResp(mad, 1).status().code(), absl::StatusCode::kDataLoss);
  // Our own request echoed back (method Get).
  std::vector<uint8_t> get = mad;
  get[3] = 0x01;
  EXPECT_EQ(ParseNodeInfoResp(get, 1).status().code(), absl::StatusCode::kDataLoss);
  // A LID-routed SMP (class 0x01).
  std::vector<uint8_t> lid_routed = mad;
  lid_routed[1] = 0x01;
  EXPECT_EQ(ParseNodeInfoResp(lid_routed, 1).status().code(), absl::StatusCode::kDataLoss);
  // Another base version.
  std::vector<uint8_t> v2 = mad;
  v2[0] = 2;
  EXPECT_EQ(ParseNodeInfoResp(v2, 1).status().code(), absl::StatusCode::kDataLoss);
}

TEST(IbMadTest, ShortBuffers) {
  std::vector<uint8_t> mad = SpecReply(0x0011, 1, 0, SpecNodeInfo(kCa));
  mad.resize(255);
  absl::Status s = ParseNodeInfoResp(mad, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("255 bytes"), std::string::npos) << s;
  EXPECT_EQ(ParseNodeInfoResp({}, 1).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeDrSmpHeader(absl::Span<const uint8_t>(mad.data(), 64)).status().code(),
            absl::StatusCode::kDataLoss);
  // A longer buffer (a receive buffer with room to spare) is fine.
  mad.resize(300, 0xee);
  mad[255] = 0;
  EXPECT_TRUE(ParseNodeInfoResp(mad, 1).ok());
}

TEST(IbMadTest, Names) {
  EXPECT_EQ(IbNodeTypeName(3), "router");
  EXPECT_EQ(IbNodeTypeName(9), "node type 9");
  EXPECT_EQ(FormatIbGuid(0x2c90300a1b2c3), "0x0002c90300a1b2c3");
}

}  // namespace
}  // namespace fabricscope
