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

// rdma_netlink's per-process series: COUNTER@PID/COMM and COUNTER@other.
TEST(SignalsTest, PerProcessQpCounterNames) {
  auto s = MapCounter({"rdma_process", "out_of_sequence@4242/vllm: w/1 @x", "mlx5_0", 1, ""});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->family->name, "fabricscope_rdma_process_qp_counter");
  EXPECT_EQ(s->semantics.kind, CounterKind::kGauge);
  EXPECT_EQ(s->Label("counter"), "out_of_sequence");
  EXPECT_EQ(s->Label("pid"), "4242");
  EXPECT_EQ(s->Label("process"), "vllm: w/1 @x");
  EXPECT_EQ(s->Label("device"), "mlx5_0");
  EXPECT_EQ(s->Label("port"), "1");
  auto o = MapCounter({"rdma_process", "packet_seq_err@other", "mlx5_0", 1, ""});
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->Label("counter"), "packet_seq_err");
  EXPECT_EQ(o->Label("pid"), "");
  EXPECT_EQ(o->Label("process"), "other");
  EXPECT_FALSE(MapCounter({"rdma_process", "out_of_sequence", "mlx5_0", 1, ""}).has_value());
  EXPECT_FALSE(MapCounter({"rdma_process", "out_of_sequence@x/y", "mlx5_0", 1, ""}).has_value());
}

TEST(SignalsTest, UnknownIsNullopt) {
  EXPECT_FALSE(MapCounter({"counters", "not_a_counter", "x", 1, ""}).has_value());
  EXPECT_FALSE(MapCounter({"nosuchsource", "rx_bytes", "", 0, "x"}).has_value());
}

TEST(SignalsTest, EveryRuleFamilyIsInTheCatalog) {
  for (const SignalRule& r : SignalRules()) {
    if (r.family == nullptr) {  // "not collected": a driver's rule, never a generic one
      EXPECT_FALSE(r.driver.empty()) << r.pattern;
      continue;
    }
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

// What a driver's raw name means: family and the labels other than device/port/netdev.
std::string Meaning(const std::string& source, const std::string& name, const std::string& driver) {
  std::optional<Signal> s = MapCounter({source, name, "dev0", 1, "eth0"}, driver);
  if (!s.has_value()) return "(none)";
  std::string out = s->family->name;
  for (size_t i = 0; i < s->family->labels.size(); ++i) {
    const std::string& l = s->family->labels[i];
    if (l == "device" || l == "port" || l == "netdev") continue;
    if (!s->label_values[i].empty()) out += " " + l + "=" + s->label_values[i];
  }
  return out;
}

// The vendors' names for the signals the detectors read are the mlx5 names'
// families and label values.
TEST(SignalsVendorTest, CanonicalMeaningsPerDriver) {
  struct Case {
    const char* driver;
    const char* name;
    const char* mlx5_name;  // the mlx5 hw_counters name with the same meaning
  } cases[] = {
      {"bnxt_re", "rx_ecn_marked_pkts", "np_ecn_marked_roce_packets"},
      {"bnxt_re", "np_ecn_marked_roce_packets", "np_ecn_marked_roce_packets"},
      {"bnxt_re", "tx_cnp_pkts", "np_cnp_sent"},
      {"bnxt_re", "rx_cnp_pkts", "rp_cnp_handled"},
      {"bnxt_re", "to_retransmits", "local_ack_timeout_err"},
      {"bnxt_re", "local_ack_timeout_err", "local_ack_timeout_err"},
      {"bnxt_re", "seq_err_naks_rcvd", "packet_seq_err"},
      {"bnxt_re", "oos_drop_count", "out_of_sequence"},
      {"bnxt_re", "out_of_sequence", "out_of_sequence"},
      {"bnxt_re", "rx_out_of_buffer", "out_of_buffer"},
      {"bnxt_re", "rx_write_req", "rx_write_requests"},
      {"ionic", "rx_rdma_ecn_pkts", "np_ecn_marked_roce_packets"},
      {"ionic", "tx_rdma_cnp_pkts", "np_cnp_sent"},
      {"ionic", "resp_rx_outouf_seq", "out_of_sequence"},
      {"ionic", "req_rx_pkt_seq_err", "packet_seq_err"},
      {"ionic", "tx_rdma_ack_timeout", "local_ack_timeout_err"},
      {"ionic", "resp_rx_outof_buf", "out_of_buffer"},
      {"irdma", "RxECNMrkd", "np_ecn_marked_roce_packets"},
      {"irdma", "cnpIgnored", "rp_cnp_ignored"},
      {"irdma", "Rcvd Out of order packets", "out_of_sequence"},
      {"irdma", "Nak Sequence Error", "packet_seq_err"},
      {"irdma", "RTO", "local_ack_timeout_err"},
      {"irdma", "InRdmaWrites", "rx_write_requests"},
      {"irdma", "iwInRdmaWrites", "rx_write_requests"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Meaning("hw_counters", c.name, c.driver), Meaning("hw_counters", c.mlx5_name, ""))
        << c.driver << " " << c.name;
  }
  EXPECT_EQ(Meaning("hw_counters", "rx_bytes", "bnxt_re"),
            "fabricscope_port_bytes_total direction=rx");
  EXPECT_EQ(Meaning("hw_counters", "tx_rdma_ucast_bytes", "ionic"),
            "fabricscope_port_bytes_total direction=tx");
  EXPECT_EQ(Meaning("hw_counters", "RNR sent", "irdma"),
            "fabricscope_rdma_errors_total counter=rnr_sent");
  EXPECT_EQ(Meaning("hw_counters", "tcpRetransSegs", "irdma"),
            "fabricscope_rdma_errors_total counter=RetransSegs");
  EXPECT_EQ(Meaning("hw_counters", "res_unaligned_atmeomic", "bnxt_re"),
            "fabricscope_rdma_errors_total counter=res_unaligned_atomic");
}

TEST(SignalsVendorTest, SemanticsSkipsAndInvalidMarker) {
  // bnxt_re: 64-bit values, where mlx5's Q-counters wrap at 32 bits.
  EXPECT_EQ(MapCounter({"hw_counters", "out_of_sequence", "d", 1, ""}, "bnxt_re")->semantics.kind,
            CounterKind::kCounter64);
  EXPECT_EQ(MapCounter({"hw_counters", "out_of_sequence", "d", 1, ""}, "mlx5")->semantics.kind,
            CounterKind::kWrap32);
  // Not collected on bnxt_re: gauges, and rp_cnp_ignored (always 0 there: never a detector
  // input); on mlx5 rp_cnp_ignored is the reaction point's counter.
  EXPECT_EQ(Meaning("hw_counters", "rp_cnp_ignored", "bnxt_re"), "(none)");
  EXPECT_EQ(Meaning("hw_counters", "active_qps", "bnxt_re"), "(none)");
  EXPECT_EQ(Meaning("hw_counters", "watermark_mrs", "bnxt_re"), "(none)");
  EXPECT_EQ(Meaning("hw_counters", "rp_cnp_ignored", "mlx5"), "fabricscope_cnp_ignored_total");
  // Unknown driver (a recording): a name several drivers share takes its generic meaning,
  // a name only one driver uses still maps.
  EXPECT_EQ(Meaning("hw_counters", "rp_cnp_ignored", ""), "fabricscope_cnp_ignored_total");
  // bnxt_re's "not collected" roce_adp_retrans is mlx5's counter in a recording.
  EXPECT_EQ(Meaning("hw_counters", "roce_adp_retrans", ""),
            "fabricscope_rdma_errors_total counter=roce_adp_retrans");
  EXPECT_EQ(Meaning("hw_counters", "resp_rx_outouf_seq", ""),
            "fabricscope_rdma_errors_total counter=out_of_sequence");
  EXPECT_EQ(Meaning("hw_counters", "Nak Sequence Error", ""),
            "fabricscope_rdma_errors_total counter=packet_seq_err");
  EXPECT_EQ(Meaning("hw_counters", "some_new_counter", ""),
            "fabricscope_rdma_errors_total counter=some_new_counter");
  EXPECT_EQ(MapCounter({"hw_counters", "some_new_counter", "d", 1, ""})->semantics.kind,
            CounterKind::kWrap32);
  // Another driver's rules do not apply to a known driver.
  EXPECT_EQ(Meaning("hw_counters", "resp_rx_outouf_seq", "mlx5"),
            "fabricscope_rdma_errors_total counter=resp_rx_outouf_seq");
  // ionic's all-ones "invalid" marker.
  EXPECT_TRUE(
      MapCounter({"hw_counters", "rx_rdma_ecn_pkts", "d", 1, ""}, "ionic")->all_ones_invalid);
  EXPECT_TRUE(MapCounter({"hw_counters", "req_rx_cqe_err", "d", 1, ""}, "ionic")->all_ones_invalid);
  EXPECT_FALSE(
      MapCounter({"hw_counters", "out_of_sequence", "d", 1, ""}, "mlx5")->all_ones_invalid);
}

TEST(SignalsVendorTest, EthtoolVendorNames) {
  EXPECT_EQ(Meaning("ethtool", "rx_pfc_ena_frames_pri3", ""),
            "fabricscope_pfc_pause_frames_total priority=3 direction=rx");
  EXPECT_EQ(Meaning("ethtool", "pfc_pri3_tx_duration_us", ""),
            "fabricscope_pfc_pause_seconds_total priority=3 direction=tx");
  EXPECT_DOUBLE_EQ(MapCounter({"ethtool", "pfc_pri3_tx_duration_us", "", 0, "e"})->scale, 1e-6);
  EXPECT_EQ(Meaning("ethtool", "pfc_pri5_rx_transitions", ""),
            "fabricscope_pfc_pause_transitions_total priority=5 direction=rx");
  EXPECT_EQ(Meaning("ethtool", "rx_discard_packets_cos2", ""),
            "fabricscope_discards_total reason=rx_discard_packets_cos2");
  EXPECT_EQ(Meaning("ethtool", "rx_fec_corrected_blocks", ""),
            "fabricscope_fec_corrected_blocks_total");
  EXPECT_EQ(Meaning("ethtool", "rx_pripause_3_1us_count", ""),
            "fabricscope_pfc_pause_seconds_total priority=3 direction=rx");
  EXPECT_EQ(Meaning("ethtool", "frames_tx_pripause", ""),
            "fabricscope_pfc_pause_frames_total priority=all direction=tx");
  EXPECT_EQ(Meaning("ethtool", "tx_priority_3_xoff.nic", ""),
            "fabricscope_pfc_pause_frames_total priority=3 direction=tx");
  EXPECT_EQ(Meaning("ethtool", "tx_priority_3_xon.nic", ""),
            "fabricscope_pfc_pause_transitions_total priority=3 direction=tx");
  EXPECT_EQ(Meaning("ethtool", "port.tx_priority_3_xoff_tx", ""),
            "fabricscope_pfc_pause_frames_total priority=3 direction=tx");
}

// ice/i40e count XOFF frames, no pause time: the estimate (core/signals.h,
// "Pause-time estimates") scales the frames by 65535 quanta x 512 bit times at the link rate.
TEST(SignalsVendorTest, PauseTimeEstimatedFromXoffFrames) {
  const SeriesKey frames{"ethtool", "rx_priority_3_xoff.nic", "irdma1", 1, "ens801f0"};
  auto f = MapCounter(frames);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->pause_quanta, 65535u);
  EXPECT_FALSE(f->estimated);
  EXPECT_EQ(ParseLinkRateBps("100 Gb/sec (4X EDR)"), 100e9);
  EXPECT_EQ(ParseLinkRateBps("2.5 Gb/sec (1X SDR)"), 2.5e9);
  EXPECT_EQ(ParseLinkRateBps("unknown"), 0);
  auto key = PauseEstimateKey(frames, 100e9);
  ASSERT_TRUE(key);
  EXPECT_EQ(key->source, "pause_estimate");
  EXPECT_EQ(key->name, "rx_priority_3_xoff.nic@100000Mbps");
  EXPECT_EQ(key->device, "irdma1");
  EXPECT_EQ(key->netdev, "ens801f0");
  auto e = MapCounter(*key);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->family->name, "fabricscope_pfc_pause_seconds_total");
  EXPECT_EQ(e->name, "pfc_pause_seconds");
  EXPECT_TRUE(e->estimated);
  EXPECT_EQ(e->pause_quanta, 0u);  // an estimate is not estimated again
  EXPECT_EQ(e->Label("netdev"), "ens801f0");
  EXPECT_EQ(e->Label("priority"), "3");
  EXPECT_EQ(e->Label("direction"), "rx");
  EXPECT_DOUBLE_EQ(e->scale, 65535.0 * 512 / 100e9);  // 335.5 us per XOFF frame
  auto slow = MapCounter(*PauseEstimateKey(frames, 25e9));
  ASSERT_TRUE(slow);
  EXPECT_DOUBLE_EQ(slow->scale, 4 * e->scale);
  // link-level XOFF and i40e's names too.
  auto link = MapCounter(*PauseEstimateKey({"ethtool", "link_xoff_tx.nic", "", 0, "e0"}, 10e9));
  ASSERT_TRUE(link);
  EXPECT_EQ(link->Label("priority"), "global");
  EXPECT_EQ(link->Label("direction"), "tx");
  auto i40e =
      MapCounter(*PauseEstimateKey({"ethtool", "port.tx_priority_5_xoff_tx", "", 0, "e1"}, 40e9));
  ASSERT_TRUE(i40e);
  EXPECT_EQ(i40e->Label("priority"), "5");
  EXPECT_DOUBLE_EQ(i40e->scale, 65535.0 * 512 / 40e9);
  // Not estimated: frames of a NIC that counts pause time (mlx5), XON frames, bad names.
  EXPECT_EQ(MapCounter({"ethtool", "rx_prio3_pause", "", 0, "e0"})->pause_quanta, 0u);
  EXPECT_FALSE(MapCounter(*PauseEstimateKey({"ethtool", "rx_prio3_pause", "", 0, "e0"}, 1e11)));
  EXPECT_FALSE(
      MapCounter(*PauseEstimateKey({"ethtool", "rx_priority_3_xon.nic", "", 0, "e0"}, 1e11)));
  for (const char* bad :
       {"rx_priority_3_xoff.nic", "rx_priority_3_xoff.nic@Mbps", "rx_priority_3_xoff.nic@0Mbps",
        "rx_priority_3_xoff.nic@100Gbps", "rx_priority_3_xoff.nic@-5Mbps", "@100Mbps"}) {
    EXPECT_FALSE(MapCounter({"pause_estimate", bad, "", 0, "e0"})) << bad;
  }
  EXPECT_FALSE(PauseEstimateKey(frames, 0));
}

TEST(SignalsVendorTest, DriverProbe) {
  EXPECT_EQ(RdmaDriverOf("bnxt_en", "rocep1s0"), "bnxt_re");
  EXPECT_EQ(RdmaDriverOf("bnxt_re", "x"), "bnxt_re");
  EXPECT_EQ(RdmaDriverOf("ionic", "rocep132s0"), "ionic");
  EXPECT_EQ(RdmaDriverOf("ice", "x"), "irdma");
  EXPECT_EQ(RdmaDriverOf("idpf", "x"), "irdma");
  EXPECT_EQ(RdmaDriverOf("mlx5_core", "x"), "mlx5");
  EXPECT_EQ(RdmaDriverOf("", "mlx5_3"), "mlx5");
  EXPECT_EQ(RdmaDriverOf("", "ionic_2"), "ionic");
  EXPECT_EQ(RdmaDriverOf("", "rocep132s0"), "");
  EXPECT_EQ(RdmaDriverOf("hfi1", "hfi1_0"), "");
  const std::string table = RenderSignalTable();
  EXPECT_NE(table.find("| hw_counters | ionic | `resp_rx_outouf_seq`"), std::string::npos);
  EXPECT_NE(table.find("## Raw names per family and driver"), std::string::npos);
  EXPECT_NE(table.find("| `fabricscope_pfc_pause_seconds_total` | bnxt_en | ethtool |"),
            std::string::npos);
}

}  // namespace
}  // namespace fabricscope
