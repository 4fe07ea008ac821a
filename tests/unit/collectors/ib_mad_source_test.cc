// The InfiniBand link-partner source (collectors/ib_mad_source.h) over a fake
// SmpTransport that answers like the peer's SMA: replies laid out at the IB
// spec's offsets (vol. 1, 14.2.1.2 / 14.2.5), written here byte by byte.
// And the real libibumad transport on this host, which has no umad device.
#include "collectors/ib_mad_source.h"

#include <glob.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace ib_mad_source_test {
namespace {

void Put(std::vector<uint8_t>& b, size_t off, int bytes, uint64_t v) {
  for (int i = bytes - 1; i >= 0; --i) {
    b[off + i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}
uint64_t Get(absl::Span<const uint8_t> b, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | b[off + i];
  return v;
}

// The node at the far end of one local port.
struct Peer {
  uint8_t node_type = 2;
  uint64_t node_guid = 0;
  uint8_t local_port = 0;
  std::string description;
};

struct SentQuery {
  std::string device;
  uint32_t port;
  uint16_t attribute;
  uint8_t hop_count;
  uint8_t initial_path_1;
  absl::Duration timeout;
};

class FakeSmpTransport : public SmpTransport {
 public:
  explicit FakeSmpTransport(FakeClock* clock) : clock_(clock) {}

  absl::StatusOr<std::vector<uint8_t>> Query(const std::string& device, uint32_t port,
                                             absl::Span<const uint8_t> request,
                                             absl::Duration timeout) override {
    EXPECT_EQ(request.size(), 256u);
    const uint16_t attribute = static_cast<uint16_t>(Get(request, 16, 2));
    sent_.push_back({device, port, attribute, request[7], request[129], timeout});
    if (!host_status_.ok()) return host_status_;
    const std::string key = absl::StrCat(device, "/", port);
    if (auto e = errors_.find(key); e != errors_.end()) {
      if (absl::IsDeadlineExceeded(e->second)) clock_->Advance(absl::ToChronoNanoseconds(timeout));
      return e->second;
    }
    auto p = peers_.find(key);
    if (p == peers_.end()) {
      clock_->Advance(absl::ToChronoNanoseconds(timeout));
      return absl::DeadlineExceededError("no reply");
    }
    if (attribute == 0x0011 && p->second.mad_status != 0) {
      return Reply(request, p->second.mad_status, std::vector<uint8_t>(64, 0));
    }
    const Peer& peer = p->second.peer;
    std::vector<uint8_t> data(64, 0);
    if (attribute == 0x0011) {
      data[0] = 1;
      data[1] = 1;
      data[2] = peer.node_type;
      data[3] = 41;
      Put(data, 4, 8, peer.node_guid);
      Put(data, 12, 8, peer.node_guid);
      Put(data, 20, 8, peer.node_guid);
      Put(data, 28, 2, 8);
      Put(data, 30, 2, 0xd2f0);
      Put(data, 32, 4, 0xa0);
      data[36] = peer.local_port;
      Put(data, 37, 3, 0x0002c9);
    } else if (attribute == 0x0010) {
      memcpy(data.data(), peer.description.data(), std::min<size_t>(64, peer.description.size()));
    } else {
      ADD_FAILURE() << "attribute " << attribute;
    }
    return Reply(request, 0, data);
  }

  void SetPeer(const std::string& key, Peer peer, uint16_t mad_status = 0) {
    peers_[key] = {std::move(peer), mad_status};
    errors_.erase(key);
  }
  void SetError(const std::string& key, absl::Status s) { errors_[key] = std::move(s); }
  void ClearError(const std::string& key) { errors_.erase(key); }
  void SetHostStatus(absl::Status s) { host_status_ = std::move(s); }

  std::vector<SentQuery>& sent() { return sent_; }
  int Count(uint16_t attribute) const {
    int n = 0;
    for (const SentQuery& q : sent_) n += q.attribute == attribute;
    return n;
  }

 private:
  struct Entry {
    Peer peer;
    uint16_t mad_status = 0;
  };

  // The SubnGetResp for `request`, as the peer's SMA writes it; the high half
  // of the transaction id rewritten as the kernel does.
  static std::vector<uint8_t> Reply(absl::Span<const uint8_t> request, uint16_t status,
                                    const std::vector<uint8_t>& data) {
    std::vector<uint8_t> m(request.begin(), request.end());
    m[3] = 0x81;
    Put(m, 4, 2, 0x8000 | status);
    m[6] = m[7];  // HopPointer
    Put(m, 8, 4, 0xa5a5a5a5);
    memcpy(&m[64], data.data(), 64);
    m[192 + 1] = 9;
    return m;
  }

  FakeClock* clock_;
  std::map<std::string, Entry> peers_;
  std::map<std::string, absl::Status> errors_;
  absl::Status host_status_;
  std::vector<SentQuery> sent_;
};

PortInfo IbPort(const std::string& device, uint32_t port, const std::string& netdev = "") {
  return PortInfo{.device = device,
                  .port = port,
                  .netdev = netdev,
                  .link_layer = "InfiniBand",
                  .state = "ACTIVE",
                  .rate = "200 Gb/sec (4X HDR)"};
}

const Peer kLeaf07{2, 0x0c42a1030079b4c0, 17, "MF0;leaf07:MQM8700/U1   "};
const Peer kLeaf08{2, 0x0c42a1030079b500, 5, "MF0;leaf08:MQM8700/U1"};

struct PortErrorRecord {
  absl::Status status;
  std::string key;
};

class IbMadSourceTest : public ::testing::Test {
 protected:
  std::unique_ptr<LinkPartnerSource> Make(IbMadSourceOptions options = {}) {
    options.port_error = [this](const absl::Status& s, absl::string_view key) {
      errors_.push_back({s, std::string(key)});
    };
    auto transport = std::make_unique<FakeSmpTransport>(&clock_);
    transport_ = transport.get();
    return MakeIbMadSource(std::move(options), std::move(transport), &clock_);
  }

  FakeClock clock_;
  FakeSmpTransport* transport_ = nullptr;
  std::vector<PortErrorRecord> errors_;
};

TEST_F(IbMadSourceTest, PeerIsSwitchPort17) {
  auto source = Make();
  EXPECT_EQ(source->name(), "ib_mad");
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  absl::StatusOr<std::vector<LinkPartner>> partners =
      source->Partners({IbPort("mlx5_0", 1, "ib0")}, {});
  ASSERT_TRUE(partners.ok()) << partners.status();
  ASSERT_EQ(partners->size(), 1u);
  EXPECT_EQ((*partners)[0], (LinkPartner{.device = "mlx5_0",
                                         .port = 1,
                                         .netdev = "ib0",
                                         .source = "ib_mad",
                                         .chassis_id = "0x0c42a1030079b4c0",
                                         .system_name = "MF0;leaf07:MQM8700/U1",
                                         .port_id = "17",
                                         .port_description = "switch"}));
  EXPECT_TRUE(errors_.empty());
  // NodeInfo then NodeDescription, each one hop out of local port 1.
  ASSERT_EQ(transport_->sent().size(), 2u);
  EXPECT_EQ(transport_->sent()[0].attribute, 0x0011);
  EXPECT_EQ(transport_->sent()[1].attribute, 0x0010);
  for (const SentQuery& q : transport_->sent()) {
    EXPECT_EQ(q.device, "mlx5_0");
    EXPECT_EQ(q.port, 1u);
    EXPECT_EQ(q.hop_count, 1);
    EXPECT_EQ(q.initial_path_1, 1);
    EXPECT_EQ(q.timeout, absl::Milliseconds(150));
  }
}

TEST_F(IbMadSourceTest, SteadyStateIsOneNodeInfoPerPortPerCall) {
  IbMadSourceOptions options;
  options.description_refresh_calls = 3;
  auto source = Make(options);
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  const std::vector<PortInfo> ports = {IbPort("mlx5_0", 1)};
  ASSERT_TRUE(source->Partners(ports, {}).ok());  // call 1: NodeInfo + NodeDescription
  ASSERT_TRUE(source->Partners(ports, {}).ok());  // call 2
  ASSERT_TRUE(source->Partners(ports, {}).ok());  // call 3
  EXPECT_EQ(transport_->Count(0x0011), 3);
  EXPECT_EQ(transport_->Count(0x0010), 1);

  // Renamed: seen at the refresh (call 4 = 3 calls after the fetch).
  Peer renamed = kLeaf07;
  renamed.description = "MF0;leaf07-renamed:MQM8700/U1";
  transport_->SetPeer("mlx5_0/1", renamed);
  absl::StatusOr<std::vector<LinkPartner>> partners = source->Partners(ports, {});
  ASSERT_TRUE(partners.ok());
  EXPECT_EQ(transport_->Count(0x0010), 2);
  ASSERT_EQ(partners->size(), 1u);
  EXPECT_EQ((*partners)[0].system_name, "MF0;leaf07-renamed:MQM8700/U1");
}

TEST_F(IbMadSourceTest, RecablingFetchesTheNewPeersDescription) {
  auto source = Make();
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  const std::vector<PortInfo> ports = {IbPort("mlx5_0", 1)};
  ASSERT_TRUE(source->Partners(ports, {}).ok());
  transport_->SetPeer("mlx5_0/1", kLeaf08);
  absl::StatusOr<std::vector<LinkPartner>> partners = source->Partners(ports, {});
  ASSERT_TRUE(partners.ok());
  ASSERT_EQ(partners->size(), 1u);
  EXPECT_EQ((*partners)[0].chassis_id, "0x0c42a1030079b500");
  EXPECT_EQ((*partners)[0].system_name, "MF0;leaf08:MQM8700/U1");
  EXPECT_EQ((*partners)[0].port_id, "5");
  EXPECT_EQ(transport_->Count(0x0010), 2);
}

TEST_F(IbMadSourceTest, OneDescriptionPerSwitchForPortsOnTheSameSwitch) {
  auto source = Make();
  Peer other_port = kLeaf07;
  other_port.local_port = 18;
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  transport_->SetPeer("mlx5_1/1", other_port);
  absl::StatusOr<std::vector<LinkPartner>> partners =
      source->Partners({IbPort("mlx5_1", 1), IbPort("mlx5_0", 1)}, {});
  ASSERT_TRUE(partners.ok());
  ASSERT_EQ(partners->size(), 2u);
  EXPECT_EQ((*partners)[0].device, "mlx5_0");
  EXPECT_EQ((*partners)[0].port_id, "17");
  EXPECT_EQ((*partners)[1].device, "mlx5_1");
  EXPECT_EQ((*partners)[1].port_id, "18");
  EXPECT_EQ((*partners)[1].system_name, "MF0;leaf07:MQM8700/U1");
  EXPECT_EQ(transport_->Count(0x0011), 2);
  EXPECT_EQ(transport_->Count(0x0010), 1);
}

TEST_F(IbMadSourceTest, TimeoutIsAPortErrorAndOtherPortsStillAnswer) {
  IbMadSourceOptions options;
  options.keep_partner_failed_calls = 1;
  auto source = Make(options);
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  transport_->SetPeer("mlx5_1/1", kLeaf08);
  const std::vector<PortInfo> ports = {IbPort("mlx5_0", 1), IbPort("mlx5_1", 1)};
  ASSERT_EQ(source->Partners(ports, {})->size(), 2u);

  transport_->SetError("mlx5_0/1", absl::DeadlineExceededError("no SMP reply within 150 ms"));
  // First failed call: mlx5_0/1 keeps its partner (keep_partner_failed_calls 1).
  absl::StatusOr<std::vector<LinkPartner>> partners = source->Partners(ports, {});
  ASSERT_TRUE(partners.ok()) << partners.status();
  ASSERT_EQ(partners->size(), 2u);
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_TRUE(absl::IsDeadlineExceeded(errors_[0].status));
  EXPECT_EQ(errors_[0].key, "mlx5_0/1");

  // Second failed call: gone; mlx5_1/1 still answered.
  partners = source->Partners(ports, {});
  ASSERT_TRUE(partners.ok());
  ASSERT_EQ(partners->size(), 1u);
  EXPECT_EQ((*partners)[0].device, "mlx5_1");
  EXPECT_EQ(errors_.size(), 2u);

  // Answers again: back (its description was forgotten with the partner, so
  // it is asked again).
  transport_->ClearError("mlx5_0/1");
  partners = source->Partners(ports, {});
  ASSERT_TRUE(partners.ok());
  ASSERT_EQ(partners->size(), 2u);
  EXPECT_EQ((*partners)[0].system_name, "MF0;leaf07:MQM8700/U1");
  EXPECT_EQ(errors_.size(), 2u);
  EXPECT_EQ(transport_->Count(0x0010), 3);
}

TEST_F(IbMadSourceTest, MadStatusIsAPortErrorNotTheWholeSource) {
  auto source = Make();
  transport_->SetPeer("mlx5_0/1", kLeaf07, /*mad_status=*/0x000c);
  transport_->SetPeer("mlx5_1/1", kLeaf08);
  absl::StatusOr<std::vector<LinkPartner>> partners =
      source->Partners({IbPort("mlx5_0", 1), IbPort("mlx5_1", 1)}, {});
  ASSERT_TRUE(partners.ok()) << partners.status();
  ASSERT_EQ(partners->size(), 1u);
  EXPECT_EQ((*partners)[0].device, "mlx5_1");
  ASSERT_EQ(errors_.size(), 1u);
  EXPECT_TRUE(absl::IsUnimplemented(errors_[0].status)) << errors_[0].status;
  EXPECT_NE(errors_[0].status.message().find("0x000c"), std::string::npos);
  // The next call asks again.
  ASSERT_TRUE(source->Partners({IbPort("mlx5_0", 1), IbPort("mlx5_1", 1)}, {}).ok());
  EXPECT_EQ(transport_->Count(0x0011), 4);
}

TEST_F(IbMadSourceTest, TransportUnavailableIsUnimplementedAndCheapAfterwards) {
  IbMadSourceOptions options;
  options.unavailable_retry_calls = 3;
  auto source = Make(options);
  transport_->SetHostStatus(absl::UnimplementedError("no umad device"));
  const std::vector<PortInfo> ports = {IbPort("mlx5_0", 1), IbPort("mlx5_1", 1)};
  absl::StatusOr<std::vector<LinkPartner>> partners = source->Partners(ports, {});
  EXPECT_TRUE(absl::IsUnimplemented(partners.status())) << partners.status();
  EXPECT_EQ(transport_->sent().size(), 1u);  // stopped at the first port
  EXPECT_TRUE(errors_.empty());              // not a per-port error
  // Calls 2 and 3: the same answer, no I/O.
  EXPECT_TRUE(absl::IsUnimplemented(source->Partners(ports, {}).status()));
  EXPECT_TRUE(absl::IsUnimplemented(source->Partners(ports, {}).status()));
  EXPECT_EQ(transport_->sent().size(), 1u);
  // Call 4: tried again; umad is there now.
  transport_->SetHostStatus(absl::OkStatus());
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  transport_->SetPeer("mlx5_1/1", kLeaf08);
  partners = source->Partners(ports, {});
  ASSERT_TRUE(partners.ok()) << partners.status();
  EXPECT_EQ(partners->size(), 2u);
}

TEST_F(IbMadSourceTest, PermissionDeniedNeverRetriedWhenRetryIsZero) {
  IbMadSourceOptions options;
  options.unavailable_retry_calls = 0;
  auto source = Make(options);
  transport_->SetHostStatus(absl::PermissionDeniedError("umad_open_port: Permission denied"));
  const std::vector<PortInfo> ports = {IbPort("mlx5_0", 1)};
  for (int i = 0; i < 50; ++i) {
    EXPECT_TRUE(absl::IsPermissionDenied(source->Partners(ports, {}).status()));
  }
  EXPECT_EQ(transport_->sent().size(), 1u);
}

TEST_F(IbMadSourceTest, EthernetDownAndAbsentPortsAreSkipped) {
  auto source = Make();
  PortInfo roce = IbPort("mlx5_2", 1, "eth2");
  roce.link_layer = "Ethernet";
  PortInfo down = IbPort("mlx5_3", 1);
  down.state = "DOWN";
  PortInfo gone = IbPort("mlx5_4", 1);
  gone.present = false;
  absl::StatusOr<std::vector<LinkPartner>> partners =
      source->Partners({roce, down, gone}, {"eth7"});
  ASSERT_TRUE(partners.ok());
  EXPECT_TRUE(partners->empty());
  EXPECT_TRUE(transport_->sent().empty());
  EXPECT_TRUE(errors_.empty());
}

TEST_F(IbMadSourceTest, APortThatGoesDownLosesItsPartnerAtOnce) {
  auto source = Make();
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  PortInfo port = IbPort("mlx5_0", 1);
  ASSERT_EQ(source->Partners({port}, {})->size(), 1u);
  port.state = "DOWN";
  EXPECT_TRUE(source->Partners({port}, {})->empty());
}

TEST_F(IbMadSourceTest, CallBudgetBoundsTheCallAndRotates) {
  IbMadSourceOptions options;
  options.query_timeout = absl::Milliseconds(150);
  options.call_budget = absl::Milliseconds(200);
  auto source = Make(options);
  // Nobody answers: each query costs its whole timeout.
  const std::vector<PortInfo> ports = {IbPort("mlx5_0", 1), IbPort("mlx5_1", 1),
                                       IbPort("mlx5_2", 1)};
  const SteadyTime start = clock_.SteadyNow();
  ASSERT_TRUE(source->Partners(ports, {}).ok());
  // mlx5_0 (150 ms), mlx5_1 (the 50 ms left), then the budget is spent.
  ASSERT_EQ(transport_->sent().size(), 2u);
  EXPECT_EQ(transport_->sent()[0].device, "mlx5_0");
  EXPECT_EQ(transport_->sent()[1].device, "mlx5_1");
  EXPECT_EQ(transport_->sent()[1].timeout, absl::Milliseconds(50));
  EXPECT_EQ(clock_.SteadyNow() - start, std::chrono::milliseconds(200));
  ASSERT_EQ(errors_.size(), 3u);
  EXPECT_EQ(errors_[2].key, "ib_mad");
  EXPECT_TRUE(absl::IsDeadlineExceeded(errors_[2].status));
  EXPECT_NE(errors_[2].status.message().find("1 of 3 ports not asked"), std::string::npos)
      << errors_[2].status;

  // The next call starts with the port left out.
  transport_->sent().clear();
  ASSERT_TRUE(source->Partners(ports, {}).ok());
  ASSERT_FALSE(transport_->sent().empty());
  EXPECT_EQ(transport_->sent()[0].device, "mlx5_2");
}

TEST_F(IbMadSourceTest, NetdevFollowsTheInventory) {
  auto source = Make();
  transport_->SetPeer("mlx5_0/1", kLeaf07);
  ASSERT_EQ(source->Partners({IbPort("mlx5_0", 1, "ib0")}, {})->at(0).netdev, "ib0");
  EXPECT_EQ(source->Partners({IbPort("mlx5_0", 1, "ib1")}, {})->at(0).netdev, "ib1");
}

bool HostHasUmad() {
  if (access("/sys/class/infiniband_mad/abi_version", R_OK) != 0) return false;
  glob_t g;
  const bool any = glob("/dev/infiniband/umad*", 0, nullptr, &g) == 0 && g.gl_pathc > 0;
  globfree(&g);
  return any;
}

TEST(UmadSmpTransportTest, NoUmadOnThisHostIsUnimplemented) {
  if (HostHasUmad()) GTEST_SKIP() << "this host has umad devices";
  std::unique_ptr<SmpTransport> transport = MakeUmadSmpTransport();
  std::vector<uint8_t> request(256, 0);
  request[0] = 1;
  request[1] = 0x81;
  request[2] = 1;
  request[3] = 1;
  request[7] = 1;
  request[129] = 1;
  absl::StatusOr<std::vector<uint8_t>> reply =
      transport->Query("mlx5_0", 1, request, absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsUnimplemented(reply.status())) << reply.status();
  EXPECT_NE(reply.status().message().find("umad"), std::string::npos) << reply.status();
  // Again: same answer (the transport holds nothing open).
  EXPECT_TRUE(absl::IsUnimplemented(
      transport->Query("mlx5_0", 1, request, absl::Milliseconds(100)).status()));
}

TEST(UmadSmpTransportTest, RealSourceWithoutUmadIsUnimplemented) {
  if (HostHasUmad()) GTEST_SKIP() << "this host has umad devices";
  int port_errors = 0;
  IbMadSourceOptions options;
  options.port_error = [&](const absl::Status&, absl::string_view) { ++port_errors; };
  std::unique_ptr<LinkPartnerSource> source = MakeIbMadSource(options);
  const std::vector<PortInfo> ports = {IbPort("mlx5_0", 1, "ib0")};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::vector<LinkPartner>> partners = source->Partners(ports, {});
    EXPECT_TRUE(absl::IsUnimplemented(partners.status())) << partners.status();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(port_errors, 0);
}

}  // namespace
}  // namespace ib_mad_source_test
}  // namespace fabricscope
