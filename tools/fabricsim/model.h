// fabricsim's fabric model: a small, deterministic RoCE fabric seen from one
// host with a few mlx5 ports.
//
// Each local port p has two queues, both stepped in discrete time (default
// 50 us per step):
//
//  - the *send* queue S_p: a switch egress queue fed by the local sender and
//    N-1 remote senders, drained towards a remote receiver. When it passes
//    XOFF the switch pauses its senders on the PFC priority, so the local NIC
//    counts received pause frames and pause time (rx_prioP_pause[_duration]).
//    Its ECN marks come back as CNPs to the local reaction point
//    (rp_cnp_handled, or rp_cnp_ignored when congestion control is off), and
//    the local sender's DCQCN rate reacts. Its drops and losses are seen by the
//    local requester as NAK sequence errors and ACK timeouts.
//  - the *receive* queue R_p: N remote senders into the local port (the last
//    hop: switch egress plus the NIC's receive buffer). Its ECN marks arrive at
//    the local notification point (np_ecn_marked_roce_packets, np_cnp_sent);
//    passing XOFF makes the local NIC send pause frames (tx_prioP_pause*);
//    overflow is counted as receive discards (rx_discards_phy,
//    rx_prioP_discards, out_of_buffer) and the lost packets as out_of_sequence.
//
// Links carry a bit error rate that feeds the FEC counters; link flaps take a
// port down; a loss probability drives retransmissions. A decode worker per
// port emits decode-step spans whose communication phase is sent through S_p,
// so pauses, rate cuts and link downs stretch them.
//
// Scenarios (scenario.h) change the parameters over time through episodes.
// The model uses its own seeded generator only: the same seed and start time
// give the same output, byte for byte.
//
// Thread-safety: none; one thread drives a Fabric.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fabricsim {

// splitmix64: small, fast and identical on every platform (unlike the
// distributions of <random>).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// `bytes` random bytes from `rng` as lowercase hex (trace and span ids).
std::string RandomHex(Rng& rng, int bytes);

// Queue parameters; bytes, Gb/s, nanoseconds.
struct QueueParams {
  double drain_gbps = 200;  // service rate towards the receiver
  double buffer_bytes = 12e6;
  bool pfc = true;
  double xoff_bytes = 3e6;
  double xon_bytes = 2.4e6;
  bool ecn = true;
  double kmin_bytes = 150e3;
  double kmax_bytes = 1.5e6;
  double pmax = 0.2;
  bool cc_enabled = true;       // DCQCN reaction point enabled on the priority
  double loss_probability = 0;  // silent per-packet loss (bad optics, switch bug)
};

// What happened in one queue during one step.
struct QueueStep {
  std::vector<double> sent_bytes;   // per sender
  std::vector<double> marked_pkts;  // per sender
  std::vector<double> cnps;         // per sender (CNPs generated for its flow)
  std::vector<double> lost_pkts;    // per sender: dropped on overflow + silent loss
  double delivered_bytes = 0;
  double dropped_pkts = 0;  // overflow drops only
  bool paused = false;      // PFC XOFF asserted towards the senders this step
  bool pause_onset = false;
  bool pause_release = false;
  bool passed_85pct = false;  // crossed 85% of the buffer upwards
};

// DCQCN-like reaction point state of one sender.
struct Sender {
  double rc_gbps = 200;  // current rate
  double rt_gbps = 200;  // target rate
  double alpha = 1.0;
  int64_t last_decrease_ns = -1'000'000'000;
  int64_t last_alpha_ns = 0;
  int64_t last_increase_ns = 0;
  int stage = 0;
  double cnp_accum = 0;
  double mark_accum = 0;
};

struct DcqcnParams {
  double g = 1.0 / 16;
  int64_t rate_reduce_period_ns = 50'000;
  int64_t alpha_period_ns = 55'000;
  int64_t increase_period_ns = 300'000;
  int fast_recovery_stages = 5;
  double ai_gbps = 5;
  double hai_gbps = 50;
  double min_rate_gbps = 1;
  int64_t min_time_between_cnps_ns = 50'000;  // per flow at the notification point
};

// One DCQCN reaction-point update at `now_ns` after `handled_cnps` CNPs
// (expected value, may be fractional) arrived for the sender's flow: a rate
// cut when a whole CNP has accumulated and the reduce period has passed, else
// alpha decay and the fast-recovery / additive / hyper increase stages.
void DcqcnUpdate(int64_t now_ns, double handled_cnps, const DcqcnParams& dcqcn,
                 double line_rate_gbps, Sender* sender);

// A switch queue with N senders, PFC and ECN.
class Queue {
 public:
  Queue(int senders, double line_rate_gbps, double mtu_bytes);
  // Advances one step of `dt_ns` at model time `now_ns`. `demand_gbps[i]` is
  // what sender i wants to send; `send_allowed` false stops every sender (link
  // down). Marks, CNPs and losses are expected values (fractional), so the
  // queue itself draws no random numbers.
  const QueueStep& Step(int64_t now_ns, int64_t dt_ns, const QueueParams& params,
                        const DcqcnParams& dcqcn, const std::vector<double>& demand_gbps,
                        bool send_allowed);
  double length_bytes() const { return length_; }
  bool paused() const { return paused_; }
  const Sender& sender(int i) const { return senders_[i]; }
  // CNPs delivered to sender i in the last step that it handled (cc enabled).
  double handled_cnps(int i) const { return handled_[i]; }
  double ignored_cnps(int i) const { return ignored_[i]; }

 private:
  double line_rate_gbps_;
  double mtu_bytes_;
  double length_ = 0;
  bool paused_ = false;
  std::vector<Sender> senders_;
  std::vector<double> handled_, ignored_;
  QueueStep step_;
};

// The raw counters of one local port, in the driver's units, as floating
// accumulators (written out truncated to integers).
struct PortCounters {
  // counters/ (IB PMA)
  double port_xmit_data = 0, port_rcv_data = 0;  // octets/4
  double port_xmit_packets = 0, port_rcv_packets = 0;
  double port_xmit_wait = 0;  // sat32
  double symbol_error = 0, link_error_recovery = 0, link_downed = 0, port_rcv_errors = 0;
  double port_xmit_discards = 0;
  // hw_counters
  double np_ecn_marked_roce_packets = 0, np_cnp_sent = 0, rp_cnp_handled = 0, rp_cnp_ignored = 0;
  double out_of_buffer = 0, out_of_sequence = 0, packet_seq_err = 0, local_ack_timeout_err = 0;
  double duplicate_request = 0, implied_nak_seq_err = 0, rnr_nak_retry_err = 0;
  double roce_adp_retrans = 0, roce_adp_retrans_to = 0;
  double rx_write_requests = 0, rx_read_requests = 0;
  double req_cqe_error = 0, resp_cqe_error = 0, req_cqe_flush_error = 0, resp_cqe_flush_error = 0;
  // ethtool -S (mlx5 names)
  double rx_bytes_phy = 0, tx_bytes_phy = 0, rx_packets_phy = 0, tx_packets_phy = 0;
  double rdma_rx_bytes = 0, rdma_tx_bytes = 0, rdma_rx_packets = 0, rdma_tx_packets = 0;
  double eth_rx_bytes = 0, eth_tx_bytes = 0, eth_rx_packets = 0, eth_tx_packets = 0;
  std::array<double, 8> rx_prio_pause{}, rx_prio_pause_duration{}, rx_prio_pause_transition{};
  std::array<double, 8> tx_prio_pause{}, tx_prio_pause_duration{};
  std::array<double, 8> rx_prio_discards{};
  double tx_pause_storm_warning_events = 0, tx_pause_storm_error_events = 0;
  double rx_discards_phy = 0, rx_out_of_buffer = 0, rx_buffer_passed_thres_phy = 0;
  double rx_crc_errors_phy = 0, rx_symbol_err_phy = 0, rx_pcs_symbol_err_phy = 0;
  double rx_corrected_bits_phy = 0, rx_bits_phy = 0, link_down_events_phy = 0;
  // FEC blocks (ethtool netlink FEC stats; recorded with source "fec").
  double fec_corrected_blocks = 0, fec_uncorrectable_blocks = 0;
};

// Seed-dependent start values of a port's counters (a host that has been up
// for a while). Draws a fixed number of values from `init`.
void InitPortCounters(Rng& init, double mtu_bytes, int pfc_priority, PortCounters* counters);

// One step of a link that is up: background (non-RDMA) Ethernet traffic both
// ways, and the physical layer at pre-FEC bit error rate `ber` (corrected
// bits and blocks, uncorrectable blocks with their symbol/CRC errors and lost
// packets). Draws one value from `rng`.
void AddLinkStep(Rng& rng, double line_gbps, double dt_ns, double ber, PortCounters* counters);
// The *_phy byte and packet totals from the RDMA and Ethernet ones.
void UpdatePhyTotals(PortCounters* counters);

// Static description of a local port.
struct PortInfo {
  std::string device;  // mlx5_0
  int port = 1;
  std::string netdev;  // eth2
};

// The live state of a port besides its counters.
struct PortStatus {
  bool link_up = true;
  double ber = 1e-13;    // pre-FEC bit error rate now
  double rate_gbps = 0;  // local sender's DCQCN rate now
  double send_queue_bytes = 0, recv_queue_bytes = 0;
  bool rx_paused = false;   // the switch pauses us
  bool tx_pausing = false;  // we pause the switch
};

// Parameters a scenario may change for one port at one step.
struct PortParams {
  QueueParams send;  // S_p
  QueueParams recv;  // R_p
  // Offered load of each remote sender as a fraction of its fair share of line
  // rate (1.0 = the remote senders together fill the link).
  double remote_load = 0.4;
  // Remote senders into R_p send at line rate (an incast burst).
  bool recv_incast = false;
  double recv_incast_load = 1.0;  // fraction of line rate per remote sender
  bool send_incast = false;       // the other senders of S_p burst
  double ber = 1e-13;
  bool link_up = true;
  bool local_rx_stuck = false;  // the local NIC stops draining R_p (tx pause storm)
};

struct FabricOptions {
  int ports = 2;
  int senders = 8;  // per queue, the local sender included in S_p
  double line_rate_gbps = 200;
  int64_t step_ns = 50'000;
  int pfc_priority = 3;
  double mtu_bytes = 4096;
  uint64_t seed = 1;
  // Decode worker: compute phase, then a communication phase of
  // comm_fraction x line rate x comm_ms worth of bytes.
  double compute_ms = 20;
  double comm_ms = 10;
  double comm_fraction = 0.25;
  int steps_per_request = 64;  // decode steps per trace
};

// One finished decode-step span.
struct SpanRecord {
  std::string trace_id;  // 32 hex
  std::string span_id;   // 16 hex
  std::string name = "decode_step";
  int64_t start_ns = 0;  // model time, relative to the run start
  int64_t end_ns = 0;
  int port_index = 0;
  double paused_ms = 0;  // time the communication phase was paused by PFC
  double nominal_ms = 0;
  // A request span (llm_request, GenAI-shaped as vLLM emits it): its first
  // step produced the first token; `tokens` output tokens, one per step.
  bool request = false;
  int64_t first_token_ns = 0;
  int tokens = 0;
  // A decode step's communication phase (its all-reduce): when it started and
  // how many bytes it moved.
  int64_t comm_start_ns = 0;
  double comm_bytes = 0;
};

// The request a decode worker is generating: one output token per decode
// step, `steps_per_request` steps per request (one trace).
struct RequestTracker {
  int64_t start_ns = 0;
  int64_t first_token_ns = 0;
  double paused_ms = 0;
  int steps = 0;
  // Records a finished decode step (its span goes to `out`) and, after the
  // request's last step, the request's span (same trace, its own span id
  // from `span_id`).
  void StepDone(SpanRecord step, int steps_per_request, std::string span_id,
                std::vector<SpanRecord>* out);
};

// A decode worker (the single-host model's per port, the fleet's per host):
// a compute phase, then a communication phase of `bytes_left` bytes.
struct DecodeWorker {
  bool in_comm = false;
  int64_t phase_start_ns = 0;
  int64_t span_start_ns = 0;
  double compute_ns = 0;
  double bytes_left = 0;
  double paused_ns = 0;
  int step_in_request = 0;
  std::string trace_id;
  RequestTracker request;
  double comm_bytes = 0;

  // Ends the step at `end_ns`: its decode-step span (span ids from `rng`;
  // `nominal_ms`: what a step takes unpaused) goes through the request
  // tracker to `out`, and the next step's compute phase starts.
  void FinishStep(int64_t end_ns, int port_index, double nominal_ms, int steps_per_request,
                  Rng& rng, std::vector<SpanRecord>* out);
};

// Scenario hook: fills the parameters of `port` at model time `now_ns`.
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  virtual void Params(int port, int64_t now_ns, PortParams* params) const = 0;
};

class Fabric {
 public:
  Fabric(const FabricOptions& options, const ParamSource* params);

  // Steps the model until model time (ns since the run start) reaches `t_ns`.
  void AdvanceTo(int64_t t_ns);
  int64_t now_ns() const { return now_ns_; }

  const FabricOptions& options() const { return options_; }
  const std::vector<PortInfo>& ports() const { return info_; }
  const PortCounters& counters(int port) const { return ports_[port].counters; }
  const PortStatus& status(int port) const { return ports_[port].status; }
  // Spans finished since the last call, in end order.
  std::vector<SpanRecord> TakeSpans();

 private:
  using Worker = DecodeWorker;
  struct Port {
    Queue send;
    Queue recv;
    PortCounters counters;
    PortStatus status;
    Worker worker;
    int64_t tx_pause_run_ns = 0;  // continuous time we have been pausing the switch
    bool storm_warned = false, storm_errored = false;
    double fec_accum = 0;
    Port(int senders, double line_rate, double mtu)
        : send(senders, line_rate, mtu), recv(senders, line_rate, mtu) {}
  };

  void StepPort(int p);
  void StepWorker(int p, double sent_bytes, double lost_bytes, bool paused, bool link_up);

  FabricOptions options_;
  const ParamSource* params_;
  Rng rng_;
  Rng span_rng_;
  int64_t now_ns_ = 0;
  std::vector<PortInfo> info_;
  std::vector<Port> ports_;
  std::vector<SpanRecord> finished_;
  DcqcnParams dcqcn_;
  std::vector<double> demand_;
};

}  // namespace fabricsim
