#include "core/signals.h"

#include <initializer_list>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fabricscope {
namespace families {

const MetricSpec& kPortInfo =
    DefineMetric({.name = "fabricscope_port_info",
                  .type = MetricType::kGauge,
                  .help = "RDMA port inventory: always 1, the port's attributes are labels.",
                  .labels = {"device", "port", "netdev", "link_layer", "state", "rate"},
                  .component = "rdma_sysfs"});
const MetricSpec& kPortBytes = DefineMetric(
    {.name = "fabricscope_port_bytes_total",
     .type = MetricType::kCounter,
     .help = "Bytes through the RDMA port (IB PMA port_xmit_data/port_rcv_data x 4). On a RoCE "
             "port this is RDMA traffic only.",
     .labels = {"device", "port", "direction"},
     .component = "rdma_sysfs"});
const MetricSpec& kPortPackets = DefineMetric(
    {.name = "fabricscope_port_packets_total",
     .type = MetricType::kCounter,
     .help = "Packets through the RDMA port (IB PMA port_xmit_packets/port_rcv_packets).",
     .labels = {"device", "port", "direction"},
     .component = "rdma_sysfs"});
const MetricSpec& kPortUnicastPackets =
    DefineMetric({.name = "fabricscope_port_unicast_packets_total",
                  .type = MetricType::kCounter,
                  .help = "Unicast packets through the RDMA port (IB PMA extended counters).",
                  .labels = {"device", "port", "direction"},
                  .component = "rdma_sysfs"});
const MetricSpec& kPortMulticastPackets =
    DefineMetric({.name = "fabricscope_port_multicast_packets_total",
                  .type = MetricType::kCounter,
                  .help = "Multicast packets through the RDMA port (IB PMA extended counters).",
                  .labels = {"device", "port", "direction"},
                  .component = "rdma_sysfs"});
const MetricSpec& kIbPortErrors =
    DefineMetric({.name = "fabricscope_ib_port_errors_total",
                  .type = MetricType::kCounter,
                  .help = "IB PMA port error counters (saturating at 4/8/16 bits: see "
                          "fabricscope_ib_pma_saturated).",
                  .labels = {"device", "port", "counter"},
                  .component = "rdma_sysfs"});
const MetricSpec& kIbPortXmitWait = DefineMetric(
    {.name = "fabricscope_ib_port_xmit_wait_ticks_total",
     .type = MetricType::kCounter,
     .help = "Ticks the port had data to send but no credit (IB PMA port_xmit_wait, device-"
             "defined tick, saturates at 32 bits).",
     .labels = {"device", "port"},
     .component = "rdma_sysfs"});
const MetricSpec& kEcnMarked =
    DefineMetric({.name = "fabricscope_ecn_marked_packets_total",
                  .type = MetricType::kCounter,
                  .help = "RoCEv2 packets received with ECN CE marked (notification point, "
                          "np_ecn_marked_roce_packets).",
                  .labels = {"device", "port"},
                  .component = "rdma_sysfs"});
const MetricSpec& kCnpSent = DefineMetric(
    {.name = "fabricscope_cnp_sent_total",
     .type = MetricType::kCounter,
     .help = "Congestion notification packets sent in response to CE marks (np_cnp_sent).",
     .labels = {"device", "port"},
     .component = "rdma_sysfs"});
const MetricSpec& kCnpHandled = DefineMetric(
    {.name = "fabricscope_cnp_handled_total",
     .type = MetricType::kCounter,
     .help = "CNPs handled by the reaction point, i.e. rate reductions (rp_cnp_handled).",
     .labels = {"device", "port"},
     .component = "rdma_sysfs"});
const MetricSpec& kCnpIgnored = DefineMetric(
    {.name = "fabricscope_cnp_ignored_total",
     .type = MetricType::kCounter,
     .help = "CNPs received and ignored by the reaction point: congestion control not enabled "
             "for that priority (rp_cnp_ignored).",
     .labels = {"device", "port"},
     .component = "rdma_sysfs"});
const MetricSpec& kRdmaErrors = DefineMetric(
    {.name = "fabricscope_rdma_errors_total",
     .type = MetricType::kCounter,
     .help = "RDMA transport error and retransmission counters from hw_counters (every "
             "hw_counter not mapped to another family).",
     .labels = {"device", "port", "counter"},
     .component = "rdma_sysfs"});
const MetricSpec& kRdmaRequests = DefineMetric(
    {.name = "fabricscope_rdma_requests_total",
     .type = MetricType::kCounter,
     .help = "RDMA requests received by the responder, by operation (rx_write_requests, "
             "rx_read_requests, rx_atomic_requests, rx_dct_connect).",
     .labels = {"device", "port", "counter"},
     .component = "rdma_sysfs"});
const MetricSpec& kDiscards = DefineMetric(
    {.name = "fabricscope_discards_total",
     .type = MetricType::kCounter,
     .help = "Packets discarded by the NIC, by reason (and priority where the NIC splits it).",
     .labels = {"device", "port", "netdev", "priority", "reason"},
     .component = "rdma_sysfs, ethtool"});
const MetricSpec& kNetdevBytes =
    DefineMetric({.name = "fabricscope_netdev_bytes_total",
                  .type = MetricType::kCounter,
                  .help = "Bytes through the network interface (rtnetlink link stats64).",
                  .labels = {"netdev", "direction"},
                  .component = "netdev"});
const MetricSpec& kNetdevPackets =
    DefineMetric({.name = "fabricscope_netdev_packets_total",
                  .type = MetricType::kCounter,
                  .help = "Packets through the network interface (rtnetlink link stats64).",
                  .labels = {"netdev", "direction"},
                  .component = "netdev"});
const MetricSpec& kNetdevDrops = DefineMetric(
    {.name = "fabricscope_netdev_drops_total",
     .type = MetricType::kCounter,
     .help = "Packets dropped by the network interface (rtnetlink link stats64 rx/tx_dropped).",
     .labels = {"netdev", "direction"},
     .component = "netdev"});
const MetricSpec& kNetdevErrors =
    DefineMetric({.name = "fabricscope_netdev_errors_total",
                  .type = MetricType::kCounter,
                  .help = "Errors on the network interface (rtnetlink link stats64 rx/tx_errors).",
                  .labels = {"netdev", "direction"},
                  .component = "netdev"});

// --- ethtool and dcb_config (collectors/ethtool_collector.cc, dcb_config_collector.cc)
const MetricSpec& kPfcPauseFrames = DefineMetric(
    {.name = "fabricscope_pfc_pause_frames_total",
     .type = MetricType::kCounter,
     .help = "PFC pause frames per priority (\"global\": 802.3x link-level pause), by direction "
             "(rx: received from the peer, tx: sent by this NIC).",
     .labels = {"netdev", "priority", "direction"},
     .component = "ethtool"});
const MetricSpec& kPfcPauseSeconds = DefineMetric(
    {.name = "fabricscope_pfc_pause_seconds_total",
     .type = MetricType::kCounter,
     .help = "Time paused per priority (rx: this port was paused and did not send; tx: pause "
             "time requested from the peer). mlx5 *_pause_duration, microseconds scaled to s.",
     .labels = {"netdev", "priority", "direction"},
     .component = "ethtool"});
const MetricSpec& kPfcPauseTransitions =
    DefineMetric({.name = "fabricscope_pfc_pause_transitions_total",
                  .type = MetricType::kCounter,
                  .help = "Pause XOFF->XON transitions per priority (mlx5 *_pause_transition).",
                  .labels = {"netdev", "priority", "direction"},
                  .component = "ethtool"});
const MetricSpec& kPauseStormEvents = DefineMetric(
    {.name = "fabricscope_pause_storm_events_total",
     .type = MetricType::kCounter,
     .help = "PFC storm watermark events (mlx5 tx_pause_storm_warning_events / "
             "tx_pause_storm_error_events; error: storm prevention stopped sending pauses).",
     .labels = {"netdev", "level"},
     .component = "ethtool"});
const MetricSpec& kRxBufferPassedThreshold =
    DefineMetric({.name = "fabricscope_rx_buffer_passed_threshold_total",
                  .type = MetricType::kCounter,
                  .help = "Times the port receive buffer went over its threshold (mlx5 "
                          "rx_buffer_passed_thres_phy, 85%).",
                  .labels = {"netdev"},
                  .component = "ethtool"});
const MetricSpec& kFecCorrectedBlocks = DefineMetric(
    {.name = "fabricscope_fec_corrected_blocks_total",
     .type = MetricType::kCounter,
     .help = "FEC blocks corrected (ethtool netlink FEC stats); lane \"\" is the total.",
     .labels = {"netdev", "lane"},
     .component = "ethtool"});
const MetricSpec& kFecUncorrectableBlocks = DefineMetric(
    {.name = "fabricscope_fec_uncorrectable_blocks_total",
     .type = MetricType::kCounter,
     .help = "FEC blocks that could not be corrected (ethtool netlink FEC stats); lane \"\" is "
             "the total.",
     .labels = {"netdev", "lane"},
     .component = "ethtool"});
const MetricSpec& kPhyCorrectedBits =
    DefineMetric({.name = "fabricscope_phy_corrected_bit_errors_total",
                  .type = MetricType::kCounter,
                  .help = "Bits corrected by FEC (mlx5 rx_corrected_bits_phy, or ethtool "
                          "netlink FEC corrected bits).",
                  .labels = {"netdev"},
                  .component = "ethtool"});
const MetricSpec& kPhySymbolErrors =
    DefineMetric({.name = "fabricscope_phy_symbol_errors_total",
                  .type = MetricType::kCounter,
                  .help = "PHY symbol errors not corrected by FEC (mlx5 rx_pcs_symbol_err_phy; "
                          "rx_symbol_err_phy when the former is absent).",
                  .labels = {"netdev"},
                  .component = "ethtool"});
const MetricSpec& kLinkDownEvents =
    DefineMetric({.name = "fabricscope_link_down_events_total",
                  .type = MetricType::kCounter,
                  .help = "Link operational-down transitions (mlx5 link_down_events_phy).",
                  .labels = {"netdev"},
                  .component = "ethtool"});
const MetricSpec& kPfcEnabled =
    DefineMetric({.name = "fabricscope_pfc_enabled",
                  .type = MetricType::kGauge,
                  .help = "1 when PFC is enabled on the priority (dcbnl IEEE pfc_en), else 0.",
                  .labels = {"netdev", "priority"},
                  .component = "dcb_config"});
const MetricSpec& kEcnEnabled = DefineMetric(
    {.name = "fabricscope_ecn_enabled",
     .type = MetricType::kGauge,
     .help = "1 when RoCE ECN (DCQCN) is enabled on the priority for the role (np: notification "
             "point, rp: reaction point); MLNX_OFED /sys/class/net/<if>/ecn tree only.",
     .labels = {"netdev", "priority", "role"},
     .component = "dcb_config"});
const MetricSpec& kHwCountersLifespan = DefineMetric(
    {.name = "fabricscope_hw_counters_lifespan_seconds",
     .type = MetricType::kGauge,
     .help = "How long the kernel caches hw_counters values (hw_counters/lifespan, ms scaled to "
             "s); a value above the poll interval hides changes between polls.",
     .labels = {"device", "port"},
     .component = "dcb_config"});

}  // namespace families

namespace {

using CK = CounterKind;
constexpr CounterSemantics kU64{CK::kCounter64, 64};
constexpr CounterSemantics kW32{CK::kWrap32, 32};
constexpr CounterSemantics kGauge{CK::kGauge, 64};
constexpr CounterSemantics Sat(uint8_t w) { return {CK::kSaturating, w}; }
constexpr bool kExact = false;  // the raw name matched as is
constexpr bool kRegex = true;   // the raw name matched by a full-match regex

// One row of the table: a SignalRule without its source (given once per
// group). `labels` is "name=value, name=value", as docs/metrics.md shows it.
struct Row {
  absl::string_view pattern;
  bool regex;
  const MetricSpec* family;
  CounterSemantics semantics;
  double scale;
  absl::string_view labels;
  absl::string_view unit;
};

// Appends `rows` as rules of `source`, in order.
void AddRules(std::vector<SignalRule>* rules, absl::string_view source,
              std::initializer_list<Row> rows) {
  for (const Row& row : rows) {
    SignalRule rule{.source = source,
                    .pattern = row.pattern,
                    .regex = row.regex,
                    .family = row.family,
                    .semantics = row.semantics,
                    .scale = row.scale,
                    .labels = {},
                    .unit = row.unit};
    for (absl::string_view label : absl::StrSplit(row.labels, ", ", absl::SkipEmpty())) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(label, '=');
      rule.labels.push_back(kv);
    }
    rules->push_back(std::move(rule));
  }
}

// The table, in match order (the first match wins). Each row: raw name, match,
// family, semantics, scale (raw unit -> family unit), labels, raw unit.
std::vector<SignalRule> BuildRules() {
  using namespace families;
  std::vector<SignalRule> rules;
  // One row per rule, however long.
  // clang-format off
  // --- IB PMA PortCounters(Extended): /sys/class/infiniband/<dev>/ports/<p>/counters
  AddRules(&rules, "counters", {
      {"port_xmit_data",                  kExact, &kPortBytes,            kU64,    4.0, "direction=tx", "octets/4"},
      {"port_rcv_data",                   kExact, &kPortBytes,            kU64,    4.0, "direction=rx", "octets/4"},
      {"port_xmit_packets",               kExact, &kPortPackets,          kU64,    1.0, "direction=tx", "packets"},
      {"port_rcv_packets",                kExact, &kPortPackets,          kU64,    1.0, "direction=rx", "packets"},
      {"unicast_xmit_packets",            kExact, &kPortUnicastPackets,   kU64,    1.0, "direction=tx", "packets"},
      {"unicast_rcv_packets",             kExact, &kPortUnicastPackets,   kU64,    1.0, "direction=rx", "packets"},
      {"multicast_xmit_packets",          kExact, &kPortMulticastPackets, kU64,    1.0, "direction=tx", "packets"},
      {"multicast_rcv_packets",           kExact, &kPortMulticastPackets, kU64,    1.0, "direction=rx", "packets"},
      {"port_xmit_wait",                  kExact, &kIbPortXmitWait,       Sat(32), 1.0, "",             "ticks"},
      {"symbol_error",                    kExact, &kIbPortErrors,         Sat(16), 1.0, "counter=$0",   "events"},
      {"link_error_recovery",             kExact, &kIbPortErrors,         Sat(8),  1.0, "counter=$0",   "events"},
      {"link_downed",                     kExact, &kIbPortErrors,         Sat(8),  1.0, "counter=$0",   "events"},
      {"port_rcv_errors",                 kExact, &kIbPortErrors,         Sat(16), 1.0, "counter=$0",   "events"},
      {"port_rcv_remote_physical_errors", kExact, &kIbPortErrors,         Sat(16), 1.0, "counter=$0",   "events"},
      {"port_rcv_switch_relay_errors",    kExact, &kIbPortErrors,         Sat(16), 1.0, "counter=$0",   "events"},
      {"port_xmit_discards",              kExact, &kIbPortErrors,         Sat(16), 1.0, "counter=$0",   "events"},
      {"port_xmit_constraint_errors",     kExact, &kIbPortErrors,         Sat(8),  1.0, "counter=$0",   "events"},
      {"port_rcv_constraint_errors",      kExact, &kIbPortErrors,         Sat(8),  1.0, "counter=$0",   "events"},
      {"local_link_integrity_errors",     kExact, &kIbPortErrors,         Sat(4),  1.0, "counter=$0",   "events"},
      {"excessive_buffer_overrun_errors", kExact, &kIbPortErrors,         Sat(4),  1.0, "counter=$0",   "events"},
      {"VL15_dropped",                    kExact, &kIbPortErrors,         Sat(16), 1.0, "counter=$0",   "events"},
      // Non-standard per-driver additions (procfs knows port_rcv_discards): width unknown.
      {"port_rcv_discards", kExact, &kIbPortErrors, kU64, 1.0, "counter=$0", "packets"},
  });
  // --- Legacy 64-bit counters_ext/ (MLNX_OFED / mlx4 before 4.5)
  AddRules(&rules, "counters_ext", {
      {"port_xmit_data_64",           kExact, &kPortBytes,            kU64, 4.0, "direction=tx", "octets/4"},
      {"port_rcv_data_64",            kExact, &kPortBytes,            kU64, 4.0, "direction=rx", "octets/4"},
      {"port_xmit_packets_64",        kExact, &kPortPackets,          kU64, 1.0, "direction=tx", "packets"},
      {"port_rcv_packets_64",         kExact, &kPortPackets,          kU64, 1.0, "direction=rx", "packets"},
      {"port_unicast_xmit_packets",   kExact, &kPortUnicastPackets,   kU64, 1.0, "direction=tx", "packets"},
      {"port_unicast_rcv_packets",    kExact, &kPortUnicastPackets,   kU64, 1.0, "direction=rx", "packets"},
      {"port_multicast_xmit_packets", kExact, &kPortMulticastPackets, kU64, 1.0, "direction=tx", "packets"},
      {"port_multicast_rcv_packets",  kExact, &kPortMulticastPackets, kU64, 1.0, "direction=rx", "packets"},
  });
  // --- hw_counters (mlx5 names; 64-bit congestion counters, 32-bit wrapping Q-counters)
  AddRules(&rules, "hw_counters", {
      {"np_ecn_marked_roce_packets", kExact, &kEcnMarked,  kU64, 1.0, "",                     "packets"},
      {"np_cnp_sent",                kExact, &kCnpSent,    kU64, 1.0, "",                     "packets"},
      {"rp_cnp_handled",             kExact, &kCnpHandled, kU64, 1.0, "",                     "packets"},
      {"rp_cnp_ignored",             kExact, &kCnpIgnored, kU64, 1.0, "",                     "packets"},
      {"out_of_buffer",              kExact, &kDiscards,   kW32, 1.0, "reason=out_of_buffer", "packets"},
      {"(vport_)?rx_(write|read|atomic)_requests|(vport_)?rx_dct_connect", kRegex, &kRdmaRequests, kW32, 1.0, "counter=$0",           "requests"},
      {"rx_icrc_encapsulated",       kExact, &kRdmaErrors, kU64, 1.0, "counter=$0",           "packets"},
      // Everything else in hw_counters: transport errors and retransmissions (wrap32
      // Q-counters on mlx5; a driver that reports more than 32 bits is detected).
      {"[A-Za-z0-9_]+", kRegex, &kRdmaErrors, kW32, 1.0, "counter=$0", "events"},
  });
  // --- netdev: rtnetlink IFLA_STATS64
  AddRules(&rules, "netdev", {
      {"(rx|tx)_bytes",   kRegex, &kNetdevBytes,   kU64, 1.0, "direction=$1", "bytes"},
      {"(rx|tx)_packets", kRegex, &kNetdevPackets, kU64, 1.0, "direction=$1", "packets"},
      {"(rx|tx)_dropped", kRegex, &kNetdevDrops,   kU64, 1.0, "direction=$1", "packets"},
      {"(rx|tx)_errors",  kRegex, &kNetdevErrors,  kU64, 1.0, "direction=$1", "packets"},
  });
  // --- ethtool -S (ETHTOOL_GSTATS / --ethtool-dir text): mlx5, i40e, ice names. Where two
  // names of one device map to the same label set, the ethtool collector keeps the one whose
  // rule comes first (e.g. rx_global_pause over rx_pause_ctrl_phy).
  // Pause frames (PFC per priority, "global" for 802.3x link pause).
  AddRules(&rules, "ethtool", {
      {"(rx|tx)_prio([0-7])_pause",                    kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=$2, direction=$1",     "frames"},
      {"(rx|tx)_global_pause",                         kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=global, direction=$1", "frames"},
      {"(rx|tx)_pause_ctrl_phy",                       kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=global, direction=$1", "frames"},
      {"port\\.(rx|tx)_priority_([0-7])_xoff_(rx|tx)", kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=$2, direction=$1",     "frames (i40e)"},
      {"port\\.link_xoff_(rx|tx)",                     kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=global, direction=$1", "frames (i40e)"},
      {"(rx|tx)_priority_([0-7])_xoff\\.nic",          kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=$2, direction=$1",     "frames (ice)"},
      {"link_xoff_(rx|tx)\\.nic",                      kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=global, direction=$1", "frames (ice)"},
      // Pause time and XOFF->XON transitions (mlx5).
      {"(rx|tx)_prio([0-7])_pause_duration",   kRegex, &kPfcPauseSeconds,     kU64, 1e-6, "priority=$2, direction=$1",     "microseconds"},
      {"(rx|tx)_global_pause_duration",        kRegex, &kPfcPauseSeconds,     kU64, 1e-6, "priority=global, direction=$1", "microseconds"},
      {"(rx|tx)_prio([0-7])_pause_transition", kRegex, &kPfcPauseTransitions, kU64, 1.0,  "priority=$2, direction=$1",     "transitions"},
      {"(rx|tx)_global_pause_transition",      kRegex, &kPfcPauseTransitions, kU64, 1.0,  "priority=global, direction=$1", "transitions"},
      // PFC storm prevention (mlx5).
      {"tx_pause_storm_warning_events", kExact, &kPauseStormEvents, kU64, 1.0, "level=warning", "events"},
      {"tx_pause_storm_error_events",   kExact, &kPauseStormEvents, kU64, 1.0, "level=error",   "events"},
      // Discards, by reason and priority.
      {"(rx|tx)_discards_phy",        kRegex, &kDiscards, kU64, 1.0, "reason=$0",                                 "packets"},
      {"rx_out_of_buffer",            kExact, &kDiscards, kW32, 1.0, "reason=rx_out_of_buffer",                   "packets"},
      {"rx_prio([0-7])_buf_discard",  kRegex, &kDiscards, kU64, 1.0, "priority=$1, reason=rx_buffer_discard",     "packets"},
      {"rx_prio([0-7])_cong_discard", kRegex, &kDiscards, kU64, 1.0, "priority=$1, reason=rx_congestion_discard", "packets"},
      {"rx_prio([0-7])_discards",     kRegex, &kDiscards, kU64, 1.0, "priority=$1, reason=rx_prio_discards",      "packets"},
      // Buffer threshold and PHY health (mlx5).
      {"rx_buffer_passed_thres_phy", kExact, &kRxBufferPassedThreshold, kU64, 1.0, "", "events"},
      {"rx_corrected_bits_phy",      kExact, &kPhyCorrectedBits,        kU64, 1.0, "", "bits"},
      {"rx_pcs_symbol_err_phy",      kExact, &kPhySymbolErrors,         kU64, 1.0, "", "symbols"},
      {"rx_symbol_err_phy",          kExact, &kPhySymbolErrors,         kU64, 1.0, "", "symbols"},
      {"link_down_events_phy",       kExact, &kLinkDownEvents,          kU64, 1.0, "", "events"},
  });
  // --- ethtool netlink standard stats (ETHTOOL_MSG_PAUSE_GET / FEC_GET with stats). Used for
  // a label set only when no ethtool -S name of the device provides it.
  AddRules(&rules, "ethtool_netlink", {
      {"pause_(rx|tx)_frames",              kRegex, &kPfcPauseFrames,         kU64, 1.0, "priority=global, direction=$1", "frames"},
      {"fec_corrected_bits",                kExact, &kPhyCorrectedBits,       kU64, 1.0, "",                              "bits"},
      {"fec_corrected(_lane([0-9]+))?",     kRegex, &kFecCorrectedBlocks,     kU64, 1.0, "lane=$2",                       "blocks"},
      {"fec_uncorrectable(_lane([0-9]+))?", kRegex, &kFecUncorrectableBlocks, kU64, 1.0, "lane=$2",                       "blocks"},
  });
  // --- dcb_config: configuration levels (gauges).
  AddRules(&rules, "dcb_config", {
      {"pfc_enabled_prio([0-7])",         kRegex, &kPfcEnabled,         kGauge, 1.0,  "priority=$1",          "0/1"},
      {"ecn_roce_(np|rp)_enable_([0-7])", kRegex, &kEcnEnabled,         kGauge, 1.0,  "priority=$2, role=$1", "0/1"},
      {"hw_counters_lifespan",            kExact, &kHwCountersLifespan, kGauge, 1e-3, "",                     "milliseconds"},
  });
  // clang-format on
  return rules;
}

std::string Substitute(absl::string_view tmpl, const std::smatch* m, absl::string_view whole) {
  if (tmpl.size() == 2 && tmpl[0] == '$' && tmpl[1] >= '0' && tmpl[1] <= '9') {
    int idx = tmpl[1] - '0';
    if (idx == 0) return std::string(whole);
    if (m != nullptr && idx < static_cast<int>(m->size())) return (*m)[idx].str();
    return "";
  }
  return std::string(tmpl);
}

}  // namespace

absl::string_view Signal::Label(absl::string_view label) const {
  if (family == nullptr) return "";
  for (size_t i = 0; i < family->labels.size() && i < label_values.size(); ++i) {
    if (family->labels[i] == label) return label_values[i];
  }
  return "";
}

const std::vector<SignalRule>& SignalRules() {
  static const auto* rules = new std::vector<SignalRule>(BuildRules());
  return *rules;
}

std::string SignalNameOf(absl::string_view family_name) {
  absl::string_view n = family_name;
  absl::ConsumePrefix(&n, "fabricscope_");
  absl::ConsumeSuffix(&n, "_total");
  return std::string(n);
}

namespace {

// The rules' regexes, compiled once (index-aligned with SignalRules(); empty
// for exact-match rules). Compiling per lookup made resolving a 751-name
// ethtool set take a third of a second.
const std::vector<std::regex>& CompiledRuleRegexes() {
  static const auto* compiled = [] {
    auto* v = new std::vector<std::regex>();
    for (const SignalRule& rule : SignalRules()) {
      v->push_back(rule.regex ? std::regex(std::string(rule.pattern), std::regex::optimize)
                              : std::regex());
    }
    return v;
  }();
  return *compiled;
}

}  // namespace

std::optional<Signal> MapCounter(const SeriesKey& key) {
  const std::vector<SignalRule>& rules = SignalRules();
  const std::vector<std::regex>& compiled = CompiledRuleRegexes();
  for (size_t i = 0; i < rules.size(); ++i) {
    const SignalRule& rule = rules[i];
    if (rule.source != key.source) continue;
    std::smatch m;
    bool matched;
    if (rule.regex) {
      matched = std::regex_match(key.name, m, compiled[i]);
    } else {
      matched = rule.pattern == key.name;
    }
    if (!matched) continue;
    Signal s;
    s.family = rule.family;
    s.name = SignalNameOf(rule.family->name);
    s.semantics = rule.semantics;
    s.scale = rule.scale;
    for (const std::string& label : rule.family->labels) {
      std::string value;
      if (label == "device") {
        value = key.device;
      } else if (label == "port") {
        value = key.port == 0 ? "" : absl::StrCat(key.port);
      } else if (label == "netdev") {
        value = key.netdev;
      } else {
        for (const auto& [l, tmpl] : rule.labels) {
          if (l == label) value = Substitute(tmpl, rule.regex ? &m : nullptr, key.name);
        }
      }
      s.label_values.push_back(std::move(value));
    }
    return s;
  }
  return std::nullopt;
}

std::string RenderSignalTable() {
  std::string out =
      "## Signal table\n\n"
      "How each raw counter maps to a family (first matching rule wins). `$0` is the raw\n"
      "name, `$1`.. the pattern's capture groups. Semantics: `u64` 64-bit counter (a\n"
      "decrease is a reset), `wrap32` 32-bit counter that wraps, `satN` IB PMA counter\n"
      "that saturates at N bits, `gauge` a level.\n\n"
      "| source | raw name | family | semantics | scale | labels | raw unit |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const SignalRule& r : SignalRules()) {
    std::string sem;
    switch (r.semantics.kind) {
      case CounterKind::kGauge:
        sem = "gauge";
        break;
      case CounterKind::kCounter64:
        sem = "u64";
        break;
      case CounterKind::kWrap32:
        sem = "wrap32";
        break;
      case CounterKind::kSaturating:
        sem = absl::StrCat("sat", r.semantics.width);
        break;
    }
    std::vector<std::string> labels;
    for (const auto& [l, v] : r.labels) labels.push_back(absl::StrCat(l, "=", v));
    std::string pattern = absl::StrReplaceAll(r.pattern, {{"|", "\\|"}});
    absl::StrAppend(&out, "| ", r.source, " | `", pattern, "`", r.regex ? " (regex)" : "", " | `",
                    r.family->name, "` | ", sem, " | ", r.scale, " | ", absl::StrJoin(labels, ", "),
                    " | ", r.unit, " |\n");
  }
  return out;
}

}  // namespace fabricscope
