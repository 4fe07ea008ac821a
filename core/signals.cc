#include "core/signals.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <regex>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"

namespace fabricscope {
namespace families {

const MetricSpec& kPortInfo = DefineMetric(
    {.name = "fabricscope_port_info",
     .type = MetricType::kGauge,
     .help = "RDMA port inventory: always 1, the port's attributes are labels "
             "(driver: the signal table's driver name, mlx5, bnxt_re, ionic, "
             "irdma, ...; fw_ver: the device's sysfs fw_ver, \"\" where empty).",
     .labels = {"device", "port", "netdev", "link_layer", "state", "rate", "driver", "fw_ver"},
     .component = "rdma_sysfs"});
const MetricSpec& kPortBytes = DefineMetric(
    {.name = "fabricscope_port_bytes_total",
     .type = MetricType::kCounter,
     .help = "Bytes through the RDMA port (IB PMA port_xmit_data/port_rcv_data x 4; on bnxt_re "
             "and ionic, whose IB counters are empty or fail, the driver's hw_counters bytes). On "
             "a RoCE port this is RDMA traffic only.",
     .labels = {"device", "port", "direction"},
     .component = "rdma_sysfs"});
const MetricSpec& kPortPackets = DefineMetric(
    {.name = "fabricscope_port_packets_total",
     .type = MetricType::kCounter,
     .help = "Packets through the RDMA port (IB PMA port_xmit_packets/port_rcv_packets; on "
             "bnxt_re and ionic the driver's hw_counters packets).",
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
     .help = "PFC pause frames per priority (\"global\": 802.3x link-level pause; \"all\": "
             "every priority together, on ionic, which has no per-priority pause frame count), "
             "by direction (rx: received from the peer, tx: sent by this NIC). On ice and i40e: "
             "XOFF frames.",
     .labels = {"netdev", "priority", "direction"},
     .component = "ethtool"});
const MetricSpec& kPfcPauseSeconds = DefineMetric(
    {.name = "fabricscope_pfc_pause_seconds_total",
     .type = MetricType::kCounter,
     .help = "Time paused per priority (rx: this port was paused and did not send; tx: pause "
             "time requested from the peer). mlx5 *_pause_duration, bnxt_en "
             "pfc_priN_*_duration_us, ionic *_pripause_N_1us_count: microseconds scaled to s. "
             "ice and i40e count no pause time: there it is ESTIMATED from the XOFF frames "
             "(source pause_estimate: each XOFF frame x 65535 quanta x 512 bit times at the link "
             "rate; an upper bound, a XON ends a pause early), and only where the link rate is "
             "known: the netdev's RDMA port's rate, else the netdev's own link speed.",
     .labels = {"netdev", "priority", "direction"},
     .component = "ethtool"});
const MetricSpec& kPfcPauseTransitions =
    DefineMetric({.name = "fabricscope_pfc_pause_transitions_total",
                  .type = MetricType::kCounter,
                  .help = "Pause XOFF->XON transitions per priority (mlx5 *_pause_transition, "
                          "bnxt_en pfc_priN_*_transitions, ice XON frames).",
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

const MetricSpec& kProcessQpCounter = DefineMetric(
    {.name = "fabricscope_rdma_process_qp_counter",
     .type = MetricType::kGauge,
     .help = "Retransmit and out-of-sequence counters of the QPs of one process on a port "
             "(--rdma-per-process: auto mode by PID, one counter object per process), summed "
             "over its counter objects: the top processes per port by these counters, the rest "
             "summed as process=\"other\" (pid=\"\"). A gauge: the value drops when a "
             "process's last QP, and with it its counter object, goes away. Kept in the store "
             "per process (source rdma_process) for process-scoped span correlation. namespace, "
             "pod and container: the Kubernetes pod the process runs in, where the kubernetes "
             "source knows it (empty otherwise).",
     .labels = {"device", "port", "process", "pid", "counter", "namespace", "pod", "container"},
     .component = "rdma_netlink"});

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
                    .unit = row.unit,
                    .driver = {},
                    .catch_all = false,
                    .all_ones_invalid = false};
    for (absl::string_view label : absl::StrSplit(row.labels, ", ", absl::SkipEmpty())) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(label, '=');
      rule.labels.push_back(kv);
    }
    rules->push_back(std::move(rule));
  }
}

// Per-rule flags of a vendor group.
enum VendorFlags : unsigned {
  kNoFlags = 0,
  kAllOnesInvalid = 1,  // 0xFFFFFFFFFFFFFFFF is "invalid" (SignalRule::all_ones_invalid)
  kXoffFullQuanta = 2,  // XOFF frames of 0xFFFF pause quanta (SignalRule::pause_quanta)
};

// The pause quanta of a standard XOFF frame (IEEE 802.1Qbb / 802.3x: the
// largest pause time a frame can request), and the bit times per quantum.
constexpr uint32_t kFullPauseQuanta = 0xFFFF;
constexpr double kBitTimesPerQuantum = 512;

// Appends `rows` as rules of `source` that belong to `driver`.
void AddVendorRules(std::vector<SignalRule>* rules, absl::string_view source,
                    absl::string_view driver, unsigned flags, std::initializer_list<Row> rows) {
  const size_t first = rules->size();
  AddRules(rules, source, rows);
  for (size_t i = first; i < rules->size(); ++i) {
    (*rules)[i].driver = driver;
    (*rules)[i].all_ones_invalid = (flags & kAllOnesInvalid) != 0;
    if ((flags & kXoffFullQuanta) != 0) (*rules)[i].pause_quanta = kFullPauseQuanta;
  }
}

// Marks the last rule added as a catch-all (SignalRule::catch_all).
void MarkCatchAll(std::vector<SignalRule>* rules) { rules->back().catch_all = true; }

// "Not collected": a name the table knows and deliberately skips.
constexpr const MetricSpec* kSkip = nullptr;

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
  MarkCatchAll(&rules);
  // --- hw_counters, vendor maps. Each maps the vendor's names to the families and
  // canonical (mlx5) label values above, so detectors and the correlator work unchanged.
  // bnxt_re (Broadcom): upstream names and the out-of-tree driver's mlx5-style names.
  // 64-bit values.
  AddVendorRules(&rules, "hw_counters", "bnxt_re", kNoFlags, {
      // Not collected: resource gauges, doorbell-pacing debug values, and the counters the
      // out-of-tree driver's README documents as always 0 (rp_cnp_ignored: never an ECN
      // detector input on bnxt_re).
      {"(active|watermark)_(pds|ahs|qps|rc_qps|ud_qps|srqs|cqs|mrs|mws)",  kRegex, kSkip, kGauge, 1.0, "", "resources (a gauge)"},
      {"pacing_(reschedule|complete|alerts)|db_fifo_register",             kRegex, kSkip, kGauge, 1.0, "", "debug"},
      {"rp_cnp_ignored|rx_icrc_encapsulated|req_cqe_flush_error|resp_cqe_flush_error|roce_adp_retrans(_to)?|roce_slow_restart(_cnps|_trans)?", kRegex, kSkip, kU64, 1.0, "", "always 0 (OOT README)"},
      // Traffic of the RoCE context, CNPs included: the port's bytes and packets (the IB
      // counters/ files fail with EINVAL or wrap at 32 bits on bnxt_re).
      {"(rx|tx)_bytes",                kRegex, &kPortBytes,    kU64, 1.0, "direction=$1",          "bytes"},
      {"(rx|tx)_pkts",                 kRegex, &kPortPackets,  kU64, 1.0, "direction=$1",          "packets"},
      {"rx_ecn_marked_pkts|np_ecn_marked_roce_packets", kRegex, &kEcnMarked, kU64, 1.0, "",      "packets"},
      {"tx_cnp_pkts|np_cnp_sent",      kRegex, &kCnpSent,      kU64, 1.0, "",                      "packets"},
      {"rx_cnp_pkts|rp_cnp_handled",   kRegex, &kCnpHandled,   kU64, 1.0, "",                      "packets"},
      {"rx_out_of_buffer|out_of_buffer", kRegex, &kDiscards,   kU64, 1.0, "reason=out_of_buffer",  "packets"},
      {"(rx|tx)_roce_discards",        kRegex, &kDiscards,     kU64, 1.0, "reason=$0",             "packets"},
      {"to_retransmits",               kExact, &kRdmaErrors,   kU64, 1.0, "counter=local_ack_timeout_err",   "events"},
      {"seq_err_naks_rcvd",            kExact, &kRdmaErrors,   kU64, 1.0, "counter=packet_seq_err",          "NAKs"},
      {"oos_drop_count",               kExact, &kRdmaErrors,   kU64, 1.0, "counter=out_of_sequence",         "packets"},
      {"rnr_naks_rcvd",                kExact, &kRdmaErrors,   kU64, 1.0, "counter=rnr_nak_retry_err",       "NAKs"},
      {"missing_resp",                 kExact, &kRdmaErrors,   kU64, 1.0, "counter=implied_nak_seq_err",     "events"},
      {"dup_req",                      kExact, &kRdmaErrors,   kU64, 1.0, "counter=duplicate_request",       "requests"},
      {"remote_invalid_req_err",       kExact, &kRdmaErrors,   kU64, 1.0, "counter=req_remote_invalid_request", "events"},
      {"remote_access_err",            kExact, &kRdmaErrors,   kU64, 1.0, "counter=req_remote_access_errors", "events"},
      {"res_length_mismatch",          kExact, &kRdmaErrors,   kU64, 1.0, "counter=resp_local_length_error", "events"},
      {"res_unaligned_atmeomic",       kExact, &kRdmaErrors,   kU64, 1.0, "counter=res_unaligned_atomic",    "events (older kernels' spelling)"},
      {"rx_(atomic|read|write)_req",   kRegex, &kRdmaRequests, kU64, 1.0, "counter=rx_$1_requests",          "requests"},
      {"rx_(atomic|read|write)_requests", kRegex, &kRdmaRequests, kU64, 1.0, "counter=$0",               "requests"},
      {"[A-Za-z0-9_]+",                kRegex, &kRdmaErrors,   kU64, 1.0, "counter=$0",                      "events"},
  });
  MarkCatchAll(&rules);
  // ionic (AMD Pensando): names come from NIC firmware and change with it (42 names, 54 on
  // newer firmware; typos such as resp_rx_outouf_seq are the real names). 64-bit values;
  // 0xFFFFFFFFFFFFFFFF is the driver's "invalid" (a firmware offset it could not read).
  AddVendorRules(&rules, "hw_counters", "ionic", kAllOnesInvalid, {
      {"(rx|tx)_rdma_ucast_bytes",     kRegex, &kPortBytes,            kU64, 1.0, "direction=$1", "bytes (unicast)"},
      {"(rx|tx)_rdma_ucast_pkts",      kRegex, &kPortPackets,          kU64, 1.0, "direction=$1", "packets (unicast)"},
      {"(rx|tx)_rdma_mcast_pkts",      kRegex, &kPortMulticastPackets, kU64, 1.0, "direction=$1", "packets"},
      {"rx_rdma_ecn_pkts",             kExact, &kEcnMarked,            kU64, 1.0, "",             "packets"},
      {"tx_rdma_cnp_pkts",             kExact, &kCnpSent,              kU64, 1.0, "",             "packets"},
      {"rx_rdma_cnp_pkts",             kExact, &kCnpHandled,           kU64, 1.0, "",             "packets (every CNP received: no handled/ignored split)"},
      {"resp_rx_outof_buf",            kExact, &kDiscards,             kU64, 1.0, "reason=out_of_buffer", "packets"},
      {"rx_rdma_mtu_discard_pkts",     kExact, &kDiscards,             kU64, 1.0, "reason=$0",    "packets"},
      {"resp_rx_outouf_seq",           kExact, &kRdmaErrors,           kU64, 1.0, "counter=out_of_sequence",       "packets"},
      {"req_rx_pkt_seq_err",           kExact, &kRdmaErrors,           kU64, 1.0, "counter=packet_seq_err",        "NAKs"},
      {"tx_rdma_ack_timeout",          kExact, &kRdmaErrors,           kU64, 1.0, "counter=local_ack_timeout_err", "events"},
      {"req_rx_rnr_retry_err",         kExact, &kRdmaErrors,           kU64, 1.0, "counter=rnr_nak_retry_err",     "NAKs"},
      {"req_rx_impl_nak_seq_err",      kExact, &kRdmaErrors,           kU64, 1.0, "counter=implied_nak_seq_err",   "events"},
      {"resp_rx_dup_request",          kExact, &kRdmaErrors,           kU64, 1.0, "counter=duplicate_request",     "requests"},
      {"[A-Za-z0-9_]+",                kRegex, &kRdmaErrors,           kU64, 1.0, "counter=$0",                    "events"},
  });
  MarkCatchAll(&rules);
  // irdma (Intel X722 GEN1, E810 GEN2, IPU GEN3): GEN3 names contain spaces; the tcp*/iw*
  // names are older kernels' spellings of the same counters. 64-bit values (the GEN1
  // 32-bit ones wrap).
  AddVendorRules(&rules, "hw_counters", "irdma", kNoFlags, {
      {"RxECNMrkd",                    kExact, &kEcnMarked,    kU64, 1.0, "",                              "packets"},
      {"cnpSent",                      kExact, &kCnpSent,      kU64, 1.0, "",                              "packets"},
      {"cnpHandled",                   kExact, &kCnpHandled,   kU64, 1.0, "",                              "packets"},
      {"cnpIgnored",                   kExact, &kCnpIgnored,   kU64, 1.0, "",                              "packets"},
      {"ip(4|6)InDiscards",            kRegex, &kDiscards,     kW32, 1.0, "reason=$0",                     "packets"},
      {"Rcvd Out of order packets",    kExact, &kRdmaErrors,   kU64, 1.0, "counter=out_of_sequence",       "packets"},
      {"Nak Sequence Error",           kExact, &kRdmaErrors,   kU64, 1.0, "counter=packet_seq_err",        "NAKs"},
      {"Nak Sequence Error Implied",   kExact, &kRdmaErrors,   kU64, 1.0, "counter=implied_nak_seq_err",   "events"},
      {"RTO",                          kExact, &kRdmaErrors,   kU64, 1.0, "counter=local_ack_timeout_err", "events"},
      {"RNR received",                 kExact, &kRdmaErrors,   kU64, 1.0, "counter=rnr_nak_retry_err",     "NAKs"},
      {"RNR sent",                     kExact, &kRdmaErrors,   kU64, 1.0, "counter=rnr_sent",              "NAKs"},
      {"ord limit count",              kExact, &kRdmaErrors,   kU64, 1.0, "counter=ord_limit_count",       "events"},
      {"ird limit count",              kExact, &kRdmaErrors,   kU64, 1.0, "counter=ird_limit_count",       "events"},
      {"CRC errors",                   kExact, &kRdmaErrors,   kU64, 1.0, "counter=crc_errors",            "packets"},
      {"Rx atomics",                   kExact, &kRdmaRequests, kU64, 1.0, "counter=rx_atomic_requests",    "requests"},
      {"Tx atomics",                   kExact, &kRdmaErrors,   kU64, 1.0, "counter=tx_atomics",            "requests"},
      {"(iw)?InRdmaReads",             kRegex, &kRdmaRequests, kU64, 1.0, "counter=rx_read_requests",      "requests"},
      {"(iw)?InRdmaWrites",            kRegex, &kRdmaRequests, kU64, 1.0, "counter=rx_write_requests",     "requests"},
      {"(iw)?InRdmaSends",             kRegex, &kRdmaRequests, kU64, 1.0, "counter=InRdmaSends",           "requests"},
      {"tcp(RetransSegs|InOptErrors|InProtoErrors|InSegs|OutSegs)", kRegex, &kRdmaErrors, kU64, 1.0, "counter=$1", "segments"},
      {"iw(OutRdmaReads|OutRdmaSends|OutRdmaWrites|RdmaBnd|RdmaInv)", kRegex, &kRdmaErrors, kU64, 1.0, "counter=$1", "operations"},
      {"ip(4|6)(InTruncatedPkts|OutNoRoutes)|rxVlanErrors", kRegex, &kRdmaErrors, kW32, 1.0, "counter=$0", "packets"},
      {"[^/]+",                        kRegex, &kRdmaErrors,   kU64, 1.0, "counter=$0",                    "events"},
  });
  MarkCatchAll(&rules);
  // --- netdev: rtnetlink IFLA_STATS64
  AddRules(&rules, "netdev", {
      {"(rx|tx)_bytes",   kRegex, &kNetdevBytes,   kU64, 1.0, "direction=$1", "bytes"},
      {"(rx|tx)_packets", kRegex, &kNetdevPackets, kU64, 1.0, "direction=$1", "packets"},
      {"(rx|tx)_dropped", kRegex, &kNetdevDrops,   kU64, 1.0, "direction=$1", "packets"},
      {"(rx|tx)_errors",  kRegex, &kNetdevErrors,  kU64, 1.0, "direction=$1", "packets"},
  });
  // --- ethtool -S (ETHTOOL_GSTATS / --ethtool-dir text): mlx5 names (the vendor groups
  // follow the hw_counters vendor groups below). Where two
  // names of one device map to the same label set, the ethtool collector keeps the one whose
  // rule comes first (e.g. rx_global_pause over rx_pause_ctrl_phy).
  // Pause frames (PFC per priority, "global" for 802.3x link pause).
  AddRules(&rules, "ethtool", {
      {"(rx|tx)_prio([0-7])_pause",                    kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=$2, direction=$1",     "frames"},
      {"(rx|tx)_global_pause",                         kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=global, direction=$1", "frames"},
      {"(rx|tx)_pause_ctrl_phy",                       kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=global, direction=$1", "frames"},
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
  // --- ethtool -S, vendor maps.
  // bnxt_en (Broadcom): per-priority PFC frames, pause time (µs) and transitions, per-CoS
  // discards, FEC and PHY counters (the RoCE counters of the port are bnxt_re's hw_counters).
  AddVendorRules(&rules, "ethtool", "bnxt_en", kNoFlags, {
      {"(rx|tx)_pfc_ena_frames_pri([0-7])",  kRegex, &kPfcPauseFrames,      kU64, 1.0,  "priority=$2, direction=$1",     "frames"},
      {"(rx|tx)_pause_frames",               kRegex, &kPfcPauseFrames,      kU64, 1.0,  "priority=global, direction=$1", "frames"},
      {"pfc_pri([0-7])_(rx|tx)_duration_us", kRegex, &kPfcPauseSeconds,     kU64, 1e-6, "priority=$1, direction=$2",     "microseconds"},
      {"pfc_pri([0-7])_(rx|tx)_transitions", kRegex, &kPfcPauseTransitions, kU64, 1.0,  "priority=$1, direction=$2",     "transitions"},
      {"rx_discard_packets_cos([0-7])",      kRegex, &kDiscards,            kU64, 1.0,  "reason=$0",                     "packets (per CoS queue)"},
      {"(rx|tx)_stat_discard",               kRegex, &kDiscards,            kU64, 1.0,  "reason=$0",                     "packets"},
      {"rx_buffer_passed_threshold",         kExact, &kRxBufferPassedThreshold, kU64, 1.0, "",                          "events"},
      {"rx_fec_corrected_blocks",            kExact, &kFecCorrectedBlocks,  kU64, 1.0,  "",                              "blocks"},
      {"rx_fec_uncorrectable_blocks",        kExact, &kFecUncorrectableBlocks, kU64, 1.0, "",                            "blocks"},
      {"rx_corrected_bits",                  kExact, &kPhyCorrectedBits,    kU64, 1.0,  "",                              "bits"},
      {"rx_pcs_symbol_err",                  kExact, &kPhySymbolErrors,     kU64, 1.0,  "",                              "symbols"},
      {"link_down_events",                   kExact, &kLinkDownEvents,      kU64, 1.0,  "",                              "events"},
  });
  // ionic (AMD Pensando): pause time per priority (µs); pause frames only as a total of all
  // priorities (no per-priority pause frame count exists on this NIC: priority="all").
  AddVendorRules(&rules, "ethtool", "ionic", kNoFlags, {
      {"(rx|tx)_pripause_([0-7])_1us_count", kRegex, &kPfcPauseSeconds, kU64, 1e-6, "priority=$2, direction=$1",     "microseconds"},
      {"rx_pause_1us_count",                 kExact, &kPfcPauseSeconds, kU64, 1e-6, "priority=global, direction=rx", "microseconds"},
      {"frames_(rx|tx)_pripause",            kRegex, &kPfcPauseFrames,  kU64, 1.0,  "priority=all, direction=$1",    "frames (all priorities together)"},
      {"frames_(rx|tx)_pause",               kRegex, &kPfcPauseFrames,  kU64, 1.0,  "priority=global, direction=$1", "frames"},
      {"frames_rx_dropped",                  kExact, &kDiscards,        kU64, 1.0,  "reason=$0",                     "packets"},
  });
  // ice (Intel E810): XOFF and XON frames per priority; no pause time exists on this NIC
  // (estimated from the XOFF frames: source pause_estimate, "Pause-time estimates" in
  // signals.h).
  AddVendorRules(&rules, "ethtool", "ice", kXoffFullQuanta, {
      {"(rx|tx)_priority_([0-7])_xoff\\.nic", kRegex, &kPfcPauseFrames,      kU64, 1.0, "priority=$2, direction=$1",     "XOFF frames"},
      {"link_xoff_(rx|tx)\\.nic",             kRegex, &kPfcPauseFrames,      kU64, 1.0, "priority=global, direction=$1", "XOFF frames"},
  });
  AddVendorRules(&rules, "ethtool", "ice", kNoFlags, {
      {"(rx|tx)_priority_([0-7])_xon\\.nic",  kRegex, &kPfcPauseTransitions, kU64, 1.0, "priority=$2, direction=$1",     "XON frames (one per XOFF->XON)"},
      {"link_xon_(rx|tx)\\.nic",              kRegex, &kPfcPauseTransitions, kU64, 1.0, "priority=global, direction=$1", "XON frames (one per XOFF->XON)"},
      {"rx_dropped\\.nic",                    kExact, &kDiscards,            kU64, 1.0, "reason=rx_dropped",             "packets"},
  });
  // i40e (Intel X710/XL710/X722): XOFF frames (pause time estimated as on ice).
  AddVendorRules(&rules, "ethtool", "i40e", kXoffFullQuanta, {
      {"port\\.(rx|tx)_priority_([0-7])_xoff_(rx|tx)", kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=$2, direction=$1",     "XOFF frames"},
      {"port\\.link_xoff_(rx|tx)",                     kRegex, &kPfcPauseFrames, kU64, 1.0, "priority=global, direction=$1", "XOFF frames"},
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
  // --- rdma_process: per-process QP counters (rdma_netlink --rdma-per-process). The raw name
  // is COUNTER@PID/COMM (COMM printable ASCII), or COUNTER@other for the folded rest.
  AddRules(&rules, "rdma_process", {
      {"([a-z0-9_]+)@([0-9]+)/(.*)", kRegex, &kProcessQpCounter, kGauge, 1.0, "counter=$1, pid=$2, process=$3", "events"},
      {"([a-z0-9_]+)@other",         kRegex, &kProcessQpCounter, kGauge, 1.0, "counter=$1, process=other",      "events"},
  });
  // clang-format on
  return rules;
}

// `tmpl` with each $N (one digit) replaced: $0 by the whole raw name, $1.. by
// the capture groups (an absent group is "").
std::string Substitute(absl::string_view tmpl, const std::smatch* m, absl::string_view whole) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '$' && i + 1 < tmpl.size() && tmpl[i + 1] >= '0' && tmpl[i + 1] <= '9') {
      const int idx = tmpl[++i] - '0';
      if (idx == 0) {
        absl::StrAppend(&out, whole);
      } else if (m != nullptr && idx < static_cast<int>(m->size())) {
        absl::StrAppend(&out, (*m)[idx].str());
      }
      continue;
    }
    out.push_back(tmpl[i]);
  }
  return out;
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

namespace {

// Whether rule `i` matches `key` (its source and raw name); `m` gets the groups.
bool RuleMatches(size_t i, const SeriesKey& key, std::smatch* m) {
  const SignalRule& rule = SignalRules()[i];
  if (rule.source != key.source) return false;
  if (!rule.regex) return rule.pattern == key.name;
  return std::regex_match(key.name, *m, CompiledRuleRegexes()[i]);
}

std::optional<Signal> Resolve(const SignalRule& rule, const SeriesKey& key, const std::smatch& m) {
  if (rule.family == nullptr) return std::nullopt;  // known, not collected
  Signal s;
  s.family = rule.family;
  s.name = SignalNameOf(rule.family->name);
  s.semantics = rule.semantics;
  s.scale = rule.scale;
  s.all_ones_invalid = rule.all_ones_invalid;
  s.pause_quanta = rule.pause_quanta;
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

}  // namespace

namespace {

// Splits a pause_estimate name "<frames name>@<N>Mbps" into the frames name
// and N; false when it is not of that form.
bool SplitEstimateName(absl::string_view name, absl::string_view* frames, uint64_t* mbps) {
  const size_t at = name.rfind('@');
  if (at == absl::string_view::npos || at == 0) return false;
  absl::string_view rate = name.substr(at + 1);
  if (!absl::ConsumeSuffix(&rate, "Mbps") || rate.empty()) return false;
  if (!absl::c_all_of(rate, absl::ascii_isdigit) || !absl::SimpleAtoi(rate, mbps)) return false;
  if (*mbps == 0) return false;
  *frames = name.substr(0, at);
  return true;
}

// The pause-time estimate of a pause_estimate key (see "Pause-time estimates").
std::optional<Signal> MapPauseEstimate(const SeriesKey& key, absl::string_view driver) {
  absl::string_view frames_name;
  uint64_t mbps = 0;
  if (!SplitEstimateName(key.name, &frames_name, &mbps)) return std::nullopt;
  SeriesKey frames_key = key;
  frames_key.source = "ethtool";
  frames_key.name = std::string(frames_name);
  std::optional<Signal> frames = MapCounter(frames_key, driver);
  if (!frames || frames->pause_quanta == 0 || frames->family != &families::kPfcPauseFrames) {
    return std::nullopt;
  }
  Signal s;
  s.family = &families::kPfcPauseSeconds;
  s.name = SignalNameOf(s.family->name);
  s.semantics = frames->semantics;
  s.scale = frames->scale * frames->pause_quanta * kBitTimesPerQuantum /
            (static_cast<double>(mbps) * 1e6);
  s.estimated = true;
  for (const std::string& label : s.family->labels) {
    s.label_values.push_back(std::string(frames->Label(label)));
  }
  return s;
}

}  // namespace

std::optional<SeriesKey> PauseEstimateKey(const SeriesKey& frames_key, double link_bps) {
  const double mbps = std::round(link_bps / 1e6);
  if (!(mbps >= 1) || mbps > 1e12) return std::nullopt;
  SeriesKey key = frames_key;
  key.source = std::string(kPauseEstimateSource);
  key.name = absl::StrCat(frames_key.name, "@", static_cast<uint64_t>(mbps), "Mbps");
  return key;
}

double ParseLinkRateBps(absl::string_view rate) {
  size_t i = 0;
  while (i < rate.size() &&
         (absl::ascii_isdigit(static_cast<unsigned char>(rate[i])) || rate[i] == '.')) {
    ++i;
  }
  double gbps = 0;
  if (i == 0 || !absl::SimpleAtod(rate.substr(0, i), &gbps)) return 0;
  return gbps * 1e9;
}

std::optional<Signal> MapCounter(const SeriesKey& key, absl::string_view driver) {
  if (key.source == kPauseEstimateSource) return MapPauseEstimate(key, driver);
  const std::vector<SignalRule>& rules = SignalRules();
  // The passes, in order: each a filter over the table (see "Vendors" in signals.h).
  using Filter = bool (*)(const SignalRule&, absl::string_view);
  static constexpr Filter kKnownDriver[] = {
      [](const SignalRule& r, absl::string_view d) { return r.driver == d; },
      [](const SignalRule& r, absl::string_view) { return r.driver.empty(); },
  };
  static constexpr Filter kUnknownDriver[] = {
      [](const SignalRule& r, absl::string_view) { return r.driver.empty() && !r.catch_all; },
      // A driver's "not collected" says nothing about another driver's same name.
      [](const SignalRule& r, absl::string_view) {
        return !r.driver.empty() && !r.catch_all && r.family != nullptr;
      },
      [](const SignalRule& r, absl::string_view) { return r.driver.empty() && r.catch_all; },
  };
  absl::Span<const Filter> passes = driver.empty() ? absl::Span<const Filter>(kUnknownDriver)
                                                   : absl::Span<const Filter>(kKnownDriver);
  for (Filter pass : passes) {
    for (size_t i = 0; i < rules.size(); ++i) {
      if (!pass(rules[i], driver)) continue;
      std::smatch m;
      if (RuleMatches(i, key, &m)) return Resolve(rules[i], key, m);
    }
  }
  return std::nullopt;
}

std::string RdmaDriverOf(absl::string_view kernel_driver, absl::string_view device) {
  // The PCI function's driver (the RDMA device's parent) or the auxiliary
  // RDMA driver itself, -> the table's name.
  static constexpr std::pair<absl::string_view, absl::string_view> kByKernelDriver[] = {
      {"mlx5_core", "mlx5"}, {"mlx5_ib", "mlx5"},     {"mlx4_core", "mlx4"},
      {"mlx4_ib", "mlx4"},   {"bnxt_en", "bnxt_re"},  {"bnxt_re", "bnxt_re"},
      {"ionic", "ionic"},    {"ionic_rdma", "ionic"}, {"ice", "irdma"},
      {"i40e", "irdma"},     {"idpf", "irdma"},       {"irdma", "irdma"},
  };
  for (const auto& [k, d] : kByKernelDriver) {
    if (k == kernel_driver) return std::string(d);
  }
  // Kernel default device names (renamed devices such as rocep132s0 need the
  // probe above).
  static constexpr std::pair<absl::string_view, absl::string_view> kByPrefix[] = {
      {"mlx5_", "mlx5"},   {"mlx4_", "mlx4"},  {"bnxt_re", "bnxt_re"},
      {"ionic_", "ionic"}, {"irdma", "irdma"},
  };
  for (const auto& [prefix, d] : kByPrefix) {
    if (absl::StartsWith(device, prefix)) return std::string(d);
  }
  return "";
}

std::string RenderSignalTable() {
  std::string out =
      "## Signal table\n\n"
      "How each raw counter maps to a family. `$0` is the raw name, `$1`.. the pattern's\n"
      "capture groups. Semantics: `u64` 64-bit counter (a decrease is a reset), `wrap32`\n"
      "32-bit counter that wraps, `satN` IB PMA counter that saturates at N bits, `gauge` a\n"
      "level. Driver: the rule applies to that driver's devices only (blank: any driver).\n"
      "For a device of a known driver, its rules are tried first, then the generic ones;\n"
      "with an unknown driver (a replayed recording) the generic rules first, then every\n"
      "driver's, then the catch-alls (`[A-Za-z0-9_]+`). Family `(not collected)`: a name\n"
      "skipped on purpose. `invalid: all-ones`: 0xFFFFFFFFFFFFFFFF is the driver's invalid\n"
      "marker, never a value (no sample; counted in fabricscope_collector_errors_total\n"
      "{code=\"parse\"}).\n\n"
      "Source `pause_estimate` (ice, i40e): no rule of its own. Each XOFF frame rule marked\n"
      "`XOFF: 65535 quanta` also yields an ESTIMATED pause time: the ethtool collector\n"
      "registers `<frames name>@<link Mb/s>Mbps` next to the frame counter (same raw value)\n"
      "when the link rate is known (the netdev's RDMA port's rate, else the netdev's own link\n"
      "speed: ETHTOOL_GLINKSETTINGS, or <sysfs-root>/class/net/<netdev>/speed with\n"
      "--ethtool-dir) and no name of the netdev counts pause\n"
      "time for that priority and direction; scale = 65535 x 512 bit times / link bit/s (one\n"
      "XOFF frame = 335.5 us at 100 Gb/s). An upper bound: a XON ends a pause early, a peer\n"
      "may request fewer quanta, refreshed XOFFs overlap (the pause fraction is clamped to 1).\n\n"
      "| source | driver | raw name | family | semantics | scale | labels | raw unit |\n"
      "|---|---|---|---|---|---|---|---|\n";
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
    std::string unit(r.unit);
    if (r.all_ones_invalid) absl::StrAppend(&unit, "; invalid: all-ones");
    if (r.pause_quanta > 0) absl::StrAppend(&unit, "; XOFF: ", r.pause_quanta, " quanta");
    absl::StrAppend(&out, "| ", r.source, " | ", r.driver, " | `", pattern, "`",
                    r.regex ? " (regex)" : "", " | ",
                    r.family == nullptr ? std::string("(not collected)")
                                        : absl::StrCat("`", r.family->name, "`"),
                    " | ", sem, " | ", r.scale, " | ", absl::StrJoin(labels, ", "), " | ", unit,
                    " |\n");
    if (r.pause_quanta > 0) {
      absl::StrAppend(&out, "| ", kPauseEstimateSource, " | ", r.driver, " | `", pattern,
                      "@<Mb/s>Mbps` | `", families::kPfcPauseSeconds.name, "` | ", sem, " | ",
                      r.pause_quanta, " x ", kBitTimesPerQuantum, " / link bit/s | ",
                      absl::StrJoin(labels, ", "), " | ", r.unit, ": ESTIMATED seconds |\n");
    }
  }
  // Per family: which driver provides which raw names.
  absl::StrAppend(&out,
                  "\n## Raw names per family and driver\n\n"
                  "The same table by family: which driver's raw names feed it (`any`: the\n"
                  "generic names, mlx5's and the IB standard ones, whatever the driver).\n\n"
                  "| family | driver | source | raw names |\n|---|---|---|---|\n");
  std::vector<const MetricSpec*> order;
  for (const SignalRule& r : SignalRules()) {
    if (r.family != nullptr && std::find(order.begin(), order.end(), r.family) == order.end()) {
      order.push_back(r.family);
    }
  }
  for (const MetricSpec* family : order) {
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // "driver|source"
    auto add = [&](absl::string_view driver, absl::string_view source, std::string name) {
      const std::string group =
          absl::StrCat(driver.empty() ? absl::string_view("any") : driver, " | ", source);
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == group; });
      if (it == groups.end()) it = groups.insert(groups.end(), {group, {}});
      it->second.push_back(std::move(name));
    };
    for (const SignalRule& r : SignalRules()) {
      const std::string pattern = absl::StrReplaceAll(r.pattern, {{"|", "\\|"}});
      if (r.family == family) add(r.driver, r.source, absl::StrCat("`", pattern, "`"));
      if (r.pause_quanta > 0 && family == &families::kPfcPauseSeconds) {
        add(r.driver, kPauseEstimateSource, absl::StrCat("`", pattern, "@<Mb/s>Mbps` (estimated)"));
      }
    }
    for (const auto& [group, names] : groups) {
      absl::StrAppend(&out, "| `", family->name, "` | ", group, " | ", absl::StrJoin(names, ", "),
                      " |\n");
    }
  }
  return out;
}

}  // namespace fabricscope
