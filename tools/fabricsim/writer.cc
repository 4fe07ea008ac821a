#include "tools/fabricsim/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/hot_counters.h"
#include "core/json.h"

namespace fabricsim {
namespace {

using fabricscope::JsonString;

uint64_t U64(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(std::floor(v)); }
uint64_t Wrap32(double v) { return U64(v) & 0xffffffffull; }
uint64_t Sat(double v, int bits) { return std::min<uint64_t>(U64(v), (1ull << bits) - 1); }

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& HotCounterNames() {
  static const auto* names = new std::vector<std::string>(fabricscope::DefaultHotCounters());
  return *names;
}

std::vector<CounterValue> HwCounters(const PortCounters& c) {
  // The 29-counter set of a ConnectX RoCE port on kernels ~5.6-6.x, sorted as
  // sysfs lists them. Q-counters are 32-bit and wrap; congestion counters and
  // rx_icrc_encapsulated are 64-bit.
  return {
      {"duplicate_request", Wrap32(c.duplicate_request)},
      {"implied_nak_seq_err", Wrap32(c.implied_nak_seq_err)},
      {"local_ack_timeout_err", Wrap32(c.local_ack_timeout_err)},
      {"np_cnp_sent", U64(c.np_cnp_sent)},
      {"np_ecn_marked_roce_packets", U64(c.np_ecn_marked_roce_packets)},
      {"out_of_buffer", Wrap32(c.out_of_buffer)},
      {"out_of_sequence", Wrap32(c.out_of_sequence)},
      {"packet_seq_err", Wrap32(c.packet_seq_err)},
      {"req_cqe_error", Wrap32(c.req_cqe_error)},
      {"req_cqe_flush_error", Wrap32(c.req_cqe_flush_error)},
      {"req_remote_access_errors", 0},
      {"req_remote_invalid_request", 0},
      {"resp_cqe_error", Wrap32(c.resp_cqe_error)},
      {"resp_cqe_flush_error", Wrap32(c.resp_cqe_flush_error)},
      {"resp_local_length_error", 0},
      {"resp_remote_access_errors", 0},
      {"rnr_nak_retry_err", Wrap32(c.rnr_nak_retry_err)},
      {"roce_adp_retrans", Wrap32(c.roce_adp_retrans)},
      {"roce_adp_retrans_to", Wrap32(c.roce_adp_retrans_to)},
      {"roce_slow_restart", 0},
      {"roce_slow_restart_cnps", 0},
      {"roce_slow_restart_trans", 0},
      {"rp_cnp_handled", U64(c.rp_cnp_handled)},
      {"rp_cnp_ignored", U64(c.rp_cnp_ignored)},
      {"rx_atomic_requests", 0},
      {"rx_dct_connect", 0},
      {"rx_icrc_encapsulated", 0},
      {"rx_read_requests", Wrap32(c.rx_read_requests)},
      {"rx_write_requests", Wrap32(c.rx_write_requests)},
  };
}

std::vector<CounterValue> PmaCounters(const PortCounters& c) {
  // mlx5 always advertises extended width: 64-bit data/packets plus the
  // unicast/multicast files; error counters saturate at their PMA width.
  return {
      {"VL15_dropped", 0},
      {"excessive_buffer_overrun_errors", 0},
      {"link_downed", Sat(c.link_downed, 8)},
      {"link_error_recovery", Sat(c.link_error_recovery, 8)},
      {"local_link_integrity_errors", 0},
      {"multicast_rcv_packets", 0},
      {"multicast_xmit_packets", 0},
      {"port_rcv_constraint_errors", 0},
      {"port_rcv_data", U64(c.port_rcv_data)},
      {"port_rcv_errors", Sat(c.port_rcv_errors, 16)},
      {"port_rcv_packets", U64(c.port_rcv_packets)},
      {"port_rcv_remote_physical_errors", 0},
      {"port_rcv_switch_relay_errors", 0},
      {"port_xmit_constraint_errors", 0},
      {"port_xmit_data", U64(c.port_xmit_data)},
      {"port_xmit_discards", Sat(c.port_xmit_discards, 16)},
      {"port_xmit_packets", U64(c.port_xmit_packets)},
      {"port_xmit_wait", Sat(c.port_xmit_wait, 32)},
      {"symbol_error", Sat(c.symbol_error, 16)},
      {"unicast_rcv_packets", U64(c.port_rcv_packets)},
      {"unicast_xmit_packets", U64(c.port_xmit_packets)},
  };
}

std::vector<CounterValue> EthtoolCounters(const PortCounters& c, int prio) {
  std::vector<CounterValue> v = {
      // Software (netdev) counters: the non-RDMA traffic.
      {"rx_packets", U64(c.eth_rx_packets)},
      {"rx_bytes", U64(c.eth_rx_bytes)},
      {"tx_packets", U64(c.eth_tx_packets)},
      {"tx_bytes", U64(c.eth_tx_bytes)},
      {"tx_tso_packets", 0},
      {"tx_tso_bytes", 0},
      {"rx_csum_unnecessary", U64(c.eth_rx_packets)},
      {"rx_csum_none", 0},
      {"tx_csum_partial", U64(c.eth_tx_packets)},
      {"tx_queue_stopped", 0},
      {"tx_queue_dropped", 0},
      {"rx_wqe_err", 0},
      {"rx_buff_alloc_err", 0},
      {"link_down_events_phy", U64(c.link_down_events_phy)},
      {"rx_out_of_buffer", Wrap32(c.rx_out_of_buffer)},
      {"rx_if_down_packets", 0},
      {"rx_vport_unicast_packets", U64(c.eth_rx_packets)},
      {"rx_vport_unicast_bytes", U64(c.eth_rx_bytes)},
      {"tx_vport_unicast_packets", U64(c.eth_tx_packets)},
      {"tx_vport_unicast_bytes", U64(c.eth_tx_bytes)},
      {"rx_vport_rdma_unicast_packets", U64(c.rdma_rx_packets)},
      {"rx_vport_rdma_unicast_bytes", U64(c.rdma_rx_bytes)},
      {"tx_vport_rdma_unicast_packets", U64(c.rdma_tx_packets)},
      {"tx_vport_rdma_unicast_bytes", U64(c.rdma_tx_bytes)},
      {"tx_packets_phy", U64(c.tx_packets_phy)},
      {"rx_packets_phy", U64(c.rx_packets_phy)},
      {"rx_crc_errors_phy", U64(c.rx_crc_errors_phy)},
      {"tx_bytes_phy", U64(c.tx_bytes_phy)},
      {"rx_bytes_phy", U64(c.rx_bytes_phy)},
      {"tx_multicast_phy", 0},
      {"tx_broadcast_phy", 0},
      {"rx_multicast_phy", 0},
      {"rx_broadcast_phy", 0},
      {"rx_in_range_len_errors_phy", 0},
      {"rx_out_of_range_len_phy", 0},
      {"rx_oversize_pkts_phy", 0},
      {"rx_symbol_err_phy", U64(c.rx_symbol_err_phy)},
      {"tx_mac_control_phy", U64(c.tx_prio_pause[prio])},
      {"rx_mac_control_phy", U64(c.rx_prio_pause[prio])},
      {"rx_unsupported_op_phy", 0},
      {"rx_pause_ctrl_phy", 0},
      {"tx_pause_ctrl_phy", 0},
      {"rx_discards_phy", U64(c.rx_discards_phy)},
      {"tx_discards_phy", U64(c.port_xmit_discards)},
      {"tx_errors_phy", 0},
      {"rx_undersize_pkts_phy", 0},
      {"rx_fragments_phy", 0},
      {"rx_jabbers_phy", 0},
      {"rx_pcs_symbol_err_phy", U64(c.rx_pcs_symbol_err_phy)},
      {"rx_corrected_bits_phy", U64(c.rx_corrected_bits_phy)},
      {"rx_buffer_passed_thres_phy", U64(c.rx_buffer_passed_thres_phy)},
      {"rx_pci_signal_integrity", 0},
      {"tx_pci_signal_integrity", 0},
      {"outbound_pci_stalled_rd", 0},
      {"outbound_pci_stalled_wr", 0},
      {"outbound_pci_stalled_rd_events", 0},
      {"outbound_pci_stalled_wr_events", 0},
  };
  for (int p = 0; p < 8; ++p) {
    bool roce = p == prio;
    v.push_back({absl::StrCat("rx_prio", p, "_bytes"), roce     ? U64(c.rdma_rx_bytes)
                                                       : p == 0 ? U64(c.eth_rx_bytes)
                                                                : 0});
    v.push_back({absl::StrCat("rx_prio", p, "_packets"), roce     ? U64(c.rdma_rx_packets)
                                                         : p == 0 ? U64(c.eth_rx_packets)
                                                                  : 0});
    v.push_back({absl::StrCat("rx_prio", p, "_discards"), U64(c.rx_prio_discards[p])});
    v.push_back({absl::StrCat("tx_prio", p, "_bytes"), roce     ? U64(c.rdma_tx_bytes)
                                                       : p == 0 ? U64(c.eth_tx_bytes)
                                                                : 0});
    v.push_back({absl::StrCat("tx_prio", p, "_packets"), roce     ? U64(c.rdma_tx_packets)
                                                         : p == 0 ? U64(c.eth_tx_packets)
                                                                  : 0});
  }
  // PFC names exist only for the PFC-enabled priority.
  v.push_back({absl::StrCat("rx_prio", prio, "_pause"), U64(c.rx_prio_pause[prio])});
  v.push_back(
      {absl::StrCat("rx_prio", prio, "_pause_duration"), U64(c.rx_prio_pause_duration[prio])});
  v.push_back({absl::StrCat("tx_prio", prio, "_pause"), U64(c.tx_prio_pause[prio])});
  v.push_back(
      {absl::StrCat("tx_prio", prio, "_pause_duration"), U64(c.tx_prio_pause_duration[prio])});
  v.push_back(
      {absl::StrCat("rx_prio", prio, "_pause_transition"), U64(c.rx_prio_pause_transition[prio])});
  v.push_back({"tx_pause_storm_warning_events", U64(c.tx_pause_storm_warning_events)});
  v.push_back({"tx_pause_storm_error_events", U64(c.tx_pause_storm_error_events)});
  v.push_back({"module_unplug", 0});
  v.push_back({"module_bus_stuck", 0});
  v.push_back({"module_high_temp", 0});
  v.push_back({"module_bad_shorted", 0});
  return v;
}

std::vector<CounterValue> FecCounters(const PortCounters& c) {
  return {{"corrected_blocks", U64(c.fec_corrected_blocks)},
          {"uncorrectable_blocks", U64(c.fec_uncorrectable_blocks)},
          {"corrected_bits", U64(c.rx_corrected_bits_phy)}};
}

std::string EthtoolText(const PortCounters& c, int pfc_priority) {
  std::string out = "NIC statistics:\n";
  for (const CounterValue& cv : EthtoolCounters(c, pfc_priority)) {
    absl::StrAppend(&out, "     ", cv.name, ": ", cv.value, "\n");
  }
  return out;
}

absl::Status WriteFileAtomic(const std::string& tmp_dir, const std::string& path,
                             absl::string_view content) {
  static uint64_t counter = 0;
  std::string tmp = absl::StrCat(tmp_dir, "/", getpid(), ".", ++counter);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", tmp, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("write ", tmp, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("rename to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

TreeWriter::~TreeWriter() {
  for (auto& [path, fd] : fds_) close(fd);
}

absl::Status TreeWriter::PutInPlace(const std::string& path, const std::string& content) {
  auto it = last_.find(path);
  if (it != last_.end() && it->second == content) return absl::OkStatus();
  auto fd_it = fds_.find(path);
  if (fd_it == fds_.end()) {
    int opened = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (opened < 0) {
      return absl::InternalError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
    }
    fd_it = fds_.emplace(path, opened).first;
  }
  const int fd = fd_it->second;
  ssize_t n = pwrite(fd, content.data(), content.size(), 0);
  if (n != static_cast<ssize_t>(content.size())) {
    return absl::InternalError(absl::StrCat("write ", path, ": ", std::strerror(errno)));
  }
  if (it == last_.end() || it->second.size() > content.size()) {
    if (ftruncate(fd, static_cast<off_t>(content.size())) != 0) {
      return absl::InternalError(absl::StrCat("truncate ", path, ": ", std::strerror(errno)));
    }
  }
  last_[path] = content;
  ++files_written_;
  return absl::OkStatus();
}

absl::Status TreeWriter::Put(const std::string& tmp_dir, const std::string& path,
                             const std::string& content) {
  auto it = last_.find(path);
  if (it != last_.end() && it->second == content) return absl::OkStatus();
  if (auto s = WriteFileAtomic(tmp_dir, path, content); !s.ok()) return s;
  last_[path] = content;
  ++files_written_;
  return absl::OkStatus();
}

std::string DcbPfcShowText(int pfc_priority) {
  std::string out = "pfc-cap 8 macsec-bypass off delay 0\nprio-pfc";
  for (int p = 0; p < 8; ++p) absl::StrAppend(&out, " ", p, p == pfc_priority ? ":on" : ":off");
  out += "\n";
  return out;
}

TreeSource SourceOf(const Fabric& fabric) {
  TreeSource source;
  source.pfc_priority = fabric.options().pfc_priority;
  source.line_rate_gbps = fabric.options().line_rate_gbps;
  source.ports = fabric.ports();
  for (size_t p = 0; p < fabric.ports().size(); ++p) {
    source.counters.push_back(&fabric.counters(static_cast<int>(p)));
    source.status.push_back(&fabric.status(static_cast<int>(p)));
  }
  return source;
}

absl::Status TreeWriter::WriteStatic(const TreeSource& fabric) {
  if (!sysfs_root_.empty()) {
    std::string tmp = sysfs_root_ + "/.fabricsim-tmp";
    if (auto s = MakeDirs(tmp); !s.ok()) return s;
    const int prio = fabric.pfc_priority;
    for (size_t p = 0; p < fabric.ports.size(); ++p) {
      const PortInfo& info = fabric.ports[p];
      std::string dev = absl::StrCat(sysfs_root_, "/class/infiniband/", info.device);
      std::string port = absl::StrCat(dev, "/ports/", info.port);
      for (const char* d : {"/hw_counters", "/counters", "/gid_attrs/ndevs", "/gid_attrs/types"}) {
        if (auto s = MakeDirs(port + d); !s.ok()) return s;
      }
      std::string guid =
          absl::StrFormat("b859:%04x:00%02x:%04x", 0x9f03 + host_index_, p, 0x1a2b + p);
      std::vector<std::pair<std::string, std::string>> files = {
          {dev + "/node_type", "1: CA\n"},
          {dev + "/hca_type", "MT4129\n"},
          {dev + "/fw_ver", "28.39.1002\n"},
          {dev + "/board_id", "MT_0000000838\n"},
          {dev + "/node_guid", guid + "\n"},
          {dev + "/sys_image_guid", guid + "\n"},
          {dev + "/node_desc", absl::StrCat("fabricsim ", info.device, "\n")},
          {port + "/rate", absl::StrFormat("%.0f Gb/sec (4X HDR)\n", fabric.line_rate_gbps)},
          {port + "/link_layer", "Ethernet\n"},
          {port + "/lid", "0x0\n"},
          {port + "/sm_lid", "0x0\n"},
          {port + "/lid_mask_count", "0\n"},
          {port + "/sm_sl", "0\n"},
          {port + "/cap_mask", "0x00010000\n"},
          {port + "/hw_counters/lifespan", "10\n"},
          {port + "/gid_attrs/ndevs/0", info.netdev + "\n"},
          {port + "/gid_attrs/ndevs/1", info.netdev + "\n"},
          {port + "/gid_attrs/types/0", "IB/RoCE v1\n"},
          {port + "/gid_attrs/types/1", "RoCE v2\n"},
      };
      std::string net = absl::StrCat(sysfs_root_, "/class/net/", info.netdev);
      for (const char* side : {"roce_np", "roce_rp"}) {
        std::string ecn = absl::StrCat(net, "/ecn/", side);
        if (auto s = MakeDirs(ecn + "/enable"); !s.ok()) return s;
        for (int q = 0; q < 8; ++q) {
          files.push_back({absl::StrCat(ecn, "/enable/", q), q == prio ? "1\n" : "0\n"});
        }
      }
      files.push_back({net + "/ecn/roce_np/min_time_between_cnps", "4\n"});
      files.push_back({net + "/ecn/roce_np/cnp_dscp", "48\n"});
      files.push_back({net + "/ecn/roce_np/cnp_802p_prio", "6\n"});
      files.push_back({net + "/mtu", "4200\n"});
      files.push_back({net + "/speed", absl::StrFormat("%.0f\n", fabric.line_rate_gbps * 1000)});
      for (const auto& [path, content] : files) {
        if (auto s = Put(tmp, path, content); !s.ok()) return s;
      }
    }
  }
  if (!ethtool_dir_.empty()) {
    if (auto s = MakeDirs(ethtool_dir_ + "/.fabricsim-tmp"); !s.ok()) return s;
  }
  if (!dcb_dir_.empty()) {
    const std::string tmp = dcb_dir_ + "/.fabricsim-tmp";
    if (auto s = MakeDirs(tmp); !s.ok()) return s;
    for (const PortInfo& info : fabric.ports) {
      if (auto s = Put(tmp, absl::StrCat(dcb_dir_, "/", info.netdev),
                       DcbPfcShowText(fabric.pfc_priority));
          !s.ok()) {
        return s;
      }
    }
  }
  static_done_ = true;
  return absl::OkStatus();
}

absl::Status TreeWriter::Write(const TreeSource& fabric) {
  if (!static_done_) {
    if (auto s = WriteStatic(fabric); !s.ok()) return s;
  }
  const int prio = fabric.pfc_priority;
  ++writes_;
  for (size_t p = 0; p < fabric.ports.size(); ++p) {
    const PortInfo& info = fabric.ports[p];
    const PortCounters& c = *fabric.counters[p];
    const PortStatus& st = *fabric.status[p];
    if (!sysfs_root_.empty()) {
      std::string tmp = sysfs_root_ + "/.fabricsim-tmp";
      std::string port =
          absl::StrCat(sysfs_root_, "/class/infiniband/", info.device, "/ports/", info.port);
      for (const CounterValue& cv : HwCounters(c)) {
        if (auto s = PutInPlace(absl::StrCat(port, "/hw_counters/", cv.name),
                                absl::StrCat(cv.value, "\n"));
            !s.ok()) {
          return s;
        }
      }
      // IB PMA counters/ are a slow-tier read (a firmware MAD per file on a
      // real mlx5): refreshed every 10th write.
      for (const CounterValue& cv :
           ((writes_ - 1) % 10 == 0) ? PmaCounters(c) : std::vector<CounterValue>{}) {
        if (auto s =
                PutInPlace(absl::StrCat(port, "/counters/", cv.name), absl::StrCat(cv.value, "\n"));
            !s.ok()) {
          return s;
        }
      }
      std::string net = absl::StrCat(sysfs_root_, "/class/net/", info.netdev);
      std::vector<std::pair<std::string, std::string>> files = {
          {port + "/state", st.link_up ? "4: ACTIVE\n" : "1: DOWN\n"},
          {port + "/phys_state", st.link_up ? "5: LinkUp\n" : "3: Disabled\n"},
          {net + "/operstate", st.link_up ? "up\n" : "down\n"},
          {net + "/carrier", st.link_up ? "1\n" : "0\n"},
          {net + "/carrier_changes",
           absl::StrCat(2 * U64(c.link_down_events_phy) + (st.link_up ? 1 : 0), "\n")},
      };
      for (const auto& [path, content] : files) {
        if (auto s = Put(tmp, path, content); !s.ok()) return s;
      }
    }
    if (!ethtool_dir_.empty()) {
      if (auto s = Put(ethtool_dir_ + "/.fabricsim-tmp", ethtool_dir_ + "/" + info.netdev,
                       EthtoolText(c, prio));
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

std::string InspectorJson(const SpanRecord& step, int port_index, int64_t start_unix_ns,
                          uint64_t sn, int pid) {
  const int64_t start_us = (start_unix_ns + step.comm_start_ns) / 1000;
  const int64_t end_us = (start_unix_ns + step.end_ns) / 1000;
  const double exec_us = static_cast<double>(std::max<int64_t>(1, end_us - start_us));
  const uint64_t bytes = static_cast<uint64_t>(step.comm_bytes);
  const double algbw = static_cast<double>(bytes) / (exec_us * 1e3);  // GB/s
  return absl::StrCat(
      "{\"header\": {\"id\": \"0xf5", absl::Hex(port_index, absl::kZeroPad4),
      "\", \"comm_name\": \"tp", port_index,
      "\", \"rank\": 0, \"n_ranks\": 8, \"nnodes\": 1}, \"metadata\": "
      "{\"inspector_output_format_version\": \"v4.0\", \"dump_timestamp_us\": ",
      end_us + 100, ", \"hostname\": \"fabricsim\", \"pid\": ", pid,
      "}, \"coll_perf\": {\"coll\": \"AllReduce\", \"coll_sn\": ", sn,
      ", \"coll_msg_size_bytes\": ", bytes,
      ", \"coll_exec_time_us\": ", static_cast<int64_t>(exec_us),
      ", \"coll_timing_source\": \"kernel_gpu\", \"coll_algobw_gbs\": ",
      absl::StrFormat("%.3f", algbw),
      ", \"coll_busbw_gbs\": ", absl::StrFormat("%.3f", algbw * 2 * 7 / 8),
      ", \"event_trace_ts\": {\"kernel_events\": [{\"channel_id\": 0, \"kernel_start_ts\": ",
      start_us, ", \"kernel_stop_ts\": ", end_us, "}]}}}");
}

std::string SpanJson(const SpanRecord& span, const PortInfo& port, int64_t start_unix_ns,
                     absl::string_view scenario) {
  if (span.request) {
    // As vLLM's llm_request: OpenTelemetry GenAI attributes, latencies in
    // seconds, no fabricscope attribute and no NIC hint (a serving engine
    // does not know its NICs).
    const double ttft = static_cast<double>(span.first_token_ns - span.start_ns) * 1e-9;
    const double e2e = static_cast<double>(span.end_ns - span.start_ns) * 1e-9;
    return absl::StrCat(
        "{\"trace_id\":\"", span.trace_id, "\",\"span_id\":\"", span.span_id,
        "\",\"name\":", JsonString(span.name),
        ",\"start_unix_nano\":", start_unix_ns + span.start_ns,
        ",\"end_unix_nano\":", start_unix_ns + span.end_ns,
        ",\"attributes\":{\"service.name\":\"fabricsim\",\"gen_ai.response.model\":\"sim-model\"",
        ",\"gen_ai.request.id\":\"", span.span_id, "\",\"gen_ai.latency.time_in_queue\":\"0\"",
        ",\"gen_ai.latency.time_to_first_token\":\"", absl::StrFormat("%.6f", ttft),
        "\",\"gen_ai.latency.e2e\":\"", absl::StrFormat("%.6f", e2e),
        "\",\"gen_ai.latency.time_in_model_decode\":\"", absl::StrFormat("%.6f", e2e - ttft),
        "\",\"gen_ai.usage.prompt_tokens\":\"512\",\"gen_ai.usage.completion_tokens\":\"",
        span.tokens, "\",\"fabricsim.scenario\":", JsonString(scenario),
        ",\"fabricsim.port\":", JsonString(port.netdev), ",\"fabricsim.paused_ms\":\"",
        absl::StrFormat("%.3f", span.paused_ms), "\"}}");
  }
  return absl::StrCat(
      "{\"trace_id\":\"", span.trace_id, "\",\"span_id\":\"", span.span_id,
      "\",\"name\":", JsonString(span.name),
      ",\"kind\":\"decode_step\",\"start_unix_nano\":", start_unix_ns + span.start_ns,
      ",\"end_unix_nano\":", start_unix_ns + span.end_ns,
      ",\"attributes\":{\"rdma.device\":", JsonString(port.device), ",\"rdma.port\":\"", port.port,
      "\",\"network.interface.name\":", JsonString(port.netdev),
      ",\"service.name\":\"fabricsim\",\"fabricsim.scenario\":", JsonString(scenario),
      ",\"fabricsim.nominal_ms\":\"", absl::StrFormat("%.0f", span.nominal_ms),
      "\",\"fabricsim.paused_ms\":\"", absl::StrFormat("%.3f", span.paused_ms), "\"}}");
}

std::string GroundTruthJson(const Scenario& scenario, uint64_t seed, const Fabric& fabric,
                            int64_t start_unix_ns, int64_t now_ns, bool finished) {
  const int prio = fabric.options().pfc_priority;
  std::string out = absl::StrCat(
      "{\"scenario\":", JsonString(scenario.name()), ",\"seed\":", seed, ",\"pfc_priority\":", prio,
      ",\"start_unix_nano\":", start_unix_ns,
      ",\"end_unix_nano\":", finished ? absl::StrCat(start_unix_ns + now_ns) : std::string("null"),
      ",\"ports\":[");
  for (size_t p = 0; p < fabric.ports().size(); ++p) {
    const PortInfo& info = fabric.ports()[p];
    absl::StrAppend(&out, p ? "," : "", "{\"device\":", JsonString(info.device),
                    ",\"port\":", info.port, ",\"netdev\":", JsonString(info.netdev), "}");
  }
  absl::StrAppend(&out, "],\"events\":[");
  bool first = true;
  for (const GroundTruthEvent& e : scenario.GroundTruth(now_ns, prio)) {
    const PortInfo& info = fabric.ports()[e.port_index];
    bool running = e.end_ns > now_ns;
    absl::StrAppend(
        &out, first ? "\n" : ",\n", "{\"kind\":", JsonString(e.kind),
        ",\"detector\":", JsonString(e.detector),
        ",\"detector_kind\":", JsonString(e.detector_kind), ",\"device\":", JsonString(info.device),
        ",\"port\":", info.port, ",\"netdev\":", JsonString(info.netdev),
        ",\"priority\":", e.priority >= 0 ? absl::StrCat(e.priority) : std::string("null"),
        ",\"direction\":", e.direction.empty() ? std::string("null") : JsonString(e.direction),
        ",\"start_unix_nano\":", start_unix_ns + e.start_ns, ",\"end_unix_nano\":",
        running ? std::string("null") : absl::StrCat(start_unix_ns + e.end_ns), "}");
    first = false;
  }
  absl::StrAppend(&out, first ? "" : "\n", "]}\n");
  return out;
}

void RecordingWriter::Line(const std::string& line) {
  if (std::fputs(line.c_str(), out_) < 0) ok_ = false;
}

void RecordingWriter::Span(const std::string& span_json) {
  Line(absl::StrCat("{\"span\":", span_json, "}\n"));
}

void RecordingWriter::Sample(const Fabric& fabric) {
  const int64_t ts = start_unix_ns_ + fabric.now_ns();
  const bool medium = samples_ % 10 == 0;
  const bool slow = samples_ % 100 == 0;
  ++samples_;
  const auto& hot = HotCounterNames();
  for (size_t p = 0; p < fabric.ports().size(); ++p) {
    const PortInfo& info = fabric.ports()[p];
    const PortCounters& c = fabric.counters(static_cast<int>(p));
    std::string prefix = absl::StrCat("{\"ts_ns\":", ts, ",\"device\":", JsonString(info.device),
                                      ",\"port\":", info.port,
                                      ",\"netdev\":", JsonString(info.netdev), ",\"source\":\"");
    auto emit = [&](absl::string_view source, const CounterValue& cv) {
      Line(absl::StrCat(prefix, source, "\",\"name\":", JsonString(cv.name),
                        ",\"value\":", cv.value, "}\n"));
    };
    for (const CounterValue& cv : HwCounters(c)) {
      bool is_hot = std::find(hot.begin(), hot.end(), cv.name) != hot.end();
      if (is_hot || medium) emit("hw_counters", cv);
    }
    if (medium) {
      for (const CounterValue& cv : EthtoolCounters(c, fabric.options().pfc_priority)) {
        emit("ethtool", cv);
      }
      for (const CounterValue& cv : FecCounters(c)) emit("fec", cv);
    }
    if (slow) {
      for (const CounterValue& cv : PmaCounters(c)) emit("counters", cv);
    }
  }
}

}  // namespace fabricsim
