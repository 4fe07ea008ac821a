#include "core/signals.h"

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

TEST(SignalsTest, PortDataIsOctetsOverFour) {
  auto s = MapCounter({"counters", "port_rcv_data", "mlx5_0", 1, ""});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->family->name, "fabricscope_port_bytes_total");
  EXPECT_EQ(s->scale, 4.0);
  EXPECT_EQ(s->Label("direction"), "rx");
  EXPECT_EQ(s->Label("device"), "mlx5_0");
  EXPECT_EQ(s->Label("port"), "1");
  EXPECT_EQ(s->name, "port_bytes");
}

TEST(SignalsTest, PmaErrorWidths) {
  struct Case {
    const char* name;
    uint8_t width;
  } cases[] = {{"symbol_error", 16},
               {"link_downed", 8},
               {"local_link_integrity_errors", 4},
               {"excessive_buffer_overrun_errors", 4},
               {"VL15_dropped", 16}};
  for (const Case& c : cases) {
    auto s = MapCounter({"counters", c.name, "mlx5_0", 1, ""});
    ASSERT_TRUE(s.has_value()) << c.name;
    EXPECT_EQ(s->family->name, "fabricscope_ib_port_errors_total");
    EXPECT_EQ(s->semantics.kind, CounterKind::kSaturating) << c.name;
    EXPECT_EQ(s->semantics.width, c.width) << c.name;
    EXPECT_EQ(s->Label("counter"), c.name);
  }
  auto wait = MapCounter({"counters", "port_xmit_wait", "mlx5_0", 1, ""});
  EXPECT_EQ(wait->semantics.width, 32);
}

TEST(SignalsTest, HwCountersCongestionAndCatchAll) {
  auto ecn = MapCounter({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""});
  EXPECT_EQ(ecn->family->name, "fabricscope_ecn_marked_packets_total");
  EXPECT_EQ(ecn->semantics.kind, CounterKind::kCounter64);
  auto oob = MapCounter({"hw_counters", "out_of_buffer", "mlx5_0", 1, "eth2"});
  EXPECT_EQ(oob->family->name, "fabricscope_discards_total");
  EXPECT_EQ(oob->Label("reason"), "out_of_buffer");
  EXPECT_EQ(oob->Label("netdev"), "eth2");
  EXPECT_EQ(oob->Label("priority"), "");
  EXPECT_EQ(oob->semantics.kind, CounterKind::kWrap32);
  auto seq = MapCounter({"hw_counters", "packet_seq_err", "mlx5_0", 1, ""});
  EXPECT_EQ(seq->family->name, "fabricscope_rdma_errors_total");
  EXPECT_EQ(seq->Label("counter"), "packet_seq_err");
  auto req = MapCounter({"hw_counters", "rx_write_requests", "mlx5_0", 1, ""});
  EXPECT_EQ(req->family->name, "fabricscope_rdma_requests_total");
}

TEST(SignalsTest, NetdevDirectionFromTheName) {
  auto s = MapCounter({"netdev", "tx_dropped", "", 0, "eth0"});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->family->name, "fabricscope_netdev_drops_total");
  EXPECT_EQ(s->Label("direction"), "tx");
  EXPECT_EQ(s->Label("netdev"), "eth0");
}

TEST(SignalsTest, UnknownIsNullopt) {
  EXPECT_FALSE(MapCounter({"counters", "not_a_counter", "x", 1, ""}).has_value());
  EXPECT_FALSE(MapCounter({"nosuchsource", "rx_bytes", "", 0, "x"}).has_value());
}

TEST(SignalsTest, EveryRuleFamilyIsInTheCatalog) {
  for (const SignalRule& r : SignalRules()) {
    ASSERT_NE(r.family, nullptr);
    EXPECT_EQ(FindMetric(r.family->name), r.family);
    for (const auto& [label, value] : r.labels) {
      bool known = false;
      for (const auto& l : r.family->labels) known = known || l == label;
      EXPECT_TRUE(known) << r.pattern << " sets label " << label << " that " << r.family->name
                         << " does not have";
    }
  }
  EXPECT_NE(RenderSignalTable().find("port_xmit_data"), std::string::npos);
}

}  // namespace
}  // namespace fabricscope
