// fabricsim's fleet model: many hosts on a leaf-spine RoCE fabric, each with
// one port, and the switches between them. Where model.h sees one host and
// summarises the rest of the fabric as a queue per direction, this model has
// every switch egress queue, so PFC pause spreads the way it does in a real
// fabric: from a host that stops draining, through its leaf, over the spines,
// to hosts that did nothing wrong.
//
// Topology (FleetTopology): LEAVES leaf switches leaf01.., SPINES spines
// spine01.., HOSTS_PER_LEAF hosts per leaf. Host h (0-based; named host-01..)
// sits on leaf h / HOSTS_PER_LEAF, in slot k = h % HOSTS_PER_LEAF, cabled to
// that leaf's port Ethernet1/(k+1). Leaf l's uplink to spine s is its port
// Ethernet1/(HOSTS_PER_LEAF+s+1); spine s's port towards leaf l is
// Ethernet1/(l+1). Every host has one RoCE port: RDMA device mlx5_0 port 1,
// netdev ens1f0np0 (the same names on every host, as on a real fleet of
// identical machines).
//
// The model is a fluid model stepped in discrete time (FleetOptions::step_ns,
// default 100 us). Each step:
//  1. every host that its leaf does not pause offers the bytes of its flows
//     (DCQCN-limited rates, capped at its line rate) to the leaf;
//  2. switch egress queues are served in path order (leaf uplinks, spine
//     downlinks, leaf downlinks), each after it has received this step's
//     arrivals (cut-through), unless the device at the other end pauses it;
//     a queue serves its contents in proportion (a fluid FIFO) and each flow's
//     share moves to its next hop, or into the destination NIC's receive
//     buffer;
//  3. every NIC drains its receive buffer at its receive rate (line rate, or a
//     fraction of it when a scenario stalls its receive pipeline);
//  4. pause state is updated with hysteresis:
//     - a NIC whose receive buffer passes kNicXoff pauses its leaf's egress
//       towards it (tx pause on that host), until it drops below kNicXon;
//     - a switch accounts its buffer per ingress port (the bytes that entered
//       through that port and still wait in any egress queue); an ingress port
//       over kIngressXoff sends XOFF to the device feeding it (a host: rx pause
//       on that host; a spine: its egress towards this leaf stops; a leaf: its
//       uplink towards this spine stops), until it drops below kIngressXon.
//     So a paused egress stops draining, fills, pushes the ingress ports that
//     feed it over XOFF, and the pause moves one hop upstream each time.
// ECN: a packet entering an egress queue is marked with the RED probability of
// the queue it sees (Kmin..Kmax, Pmax), the destination counts the marks and
// sends CNPs (at most one per flow per 50 us), the source's DCQCN reaction
// point (model.h DcqcnUpdate) cuts the flow's rate.
// Routing: same-leaf flows go host -> leaf -> host; others go host -> leaf ->
// spine -> leaf -> host with the spine chosen by a hash of (seed, source,
// destination) (ECMP).
// Traffic: each host sends to up to 8 other hosts spread over the fleet
// (destination h + 1 + j*(N-1)/K), each flow at its share of kBaseLoad of
// line rate with per-step noise: a moderately loaded all-to-all-ish inference
// pattern. Scenarios (fleet_scenario.h) add flows and change NIC receive
// rates and link error rates.
//
// All thresholds are scaled to the step: in one 100 us step a 200 Gb/s host
// offers 2.5 MB, so XOFF thresholds and buffers are a few MB (the overshoot of
// one step must fit). The counters the hosts see (pause counts and durations,
// ECN marks, CNPs, bytes, FEC) use model.h's PortCounters, in the same units
// and names as the single-host model.
//
// Thread-safety: none; one thread drives a Fleet. Deterministic: the same
// options and scenario give the same state, bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/fabricsim/model.h"

namespace fabricsim {

class FleetScenario;

struct FleetTopology {
  int hosts = 0;
  int leaves = 0;
  int spines = 0;
  int hosts_per_leaf = 0;

  // `fabric` is "leaf-spine:LEAVES,SPINES[,HOSTS_PER_LEAF]"; HOSTS_PER_LEAF
  // defaults to ceil(hosts / LEAVES) and must leave room for every host.
  static absl::StatusOr<FleetTopology> Parse(int hosts, absl::string_view fabric);
  std::string Describe() const;  // "leaf-spine:3,2,4"

  int LeafOf(int host) const { return host / hosts_per_leaf; }
  int SlotOf(int host) const { return host % hosts_per_leaf; }
  std::string HostName(int host) const;   // host-01 (at least two digits)
  static std::string LeafName(int leaf);  // leaf01
  static std::string SpineName(int spine);
  static std::string LeafDownPort(int slot);  // Ethernet1/(slot+1)
  std::string LeafUpPort(int spine) const;    // Ethernet1/(hosts_per_leaf+spine+1)
  static std::string SpinePort(int leaf);     // Ethernet1/(leaf+1)
  static std::string LeafChassis(int leaf);   // 02:fa:b0:01:00:LL (hex)
  static std::string SpineChassis(int spine);
};

struct FleetOptions {
  int64_t step_ns = 100'000;
  double host_gbps = 200;    // host <-> leaf links
  double uplink_gbps = 400;  // leaf <-> spine links
  int pfc_priority = 3;
  double mtu_bytes = 4096;
  uint64_t seed = 1;
  // Decode worker of each host: compute phase, then a communication phase
  // that ends when the host has sent comm_bytes (comm_ms at its base load).
  double compute_ms = 20;
  double comm_ms = 10;
  int steps_per_request = 64;
};

// What a scenario sets for one step (FleetScenario::Params).
struct FleetStepParams {
  struct ExtraFlow {
    int src = 0;
    int dst = 0;
    double load = 0;  // fraction of the host line rate
  };
  std::vector<double> rx_drain_fraction;  // per host; 1 = line rate
  std::vector<double> ber;                // per host: pre-FEC BER of the leaf->host link
  std::vector<bool> sends;                // per host: its workload sends (base flows)
  // Base flows whose demand is zeroed this step (src*hosts+dst).
  std::vector<bool> suppressed;  // size hosts*hosts, or empty
  std::vector<ExtraFlow> extra;  // scenario flows (incast, ...)
};

// Accumulated time (ns) each element spent in a state; a ground-truth episode
// is the difference of two of these.
struct FleetTally {
  std::vector<double> host_rx_paused_ns;  // the leaf paused the host
  std::vector<double> host_tx_paused_ns;  // the host paused the leaf
  std::vector<double> egress_paused_ns;   // per egress queue: the peer paused it
  std::vector<double> egress_marking_ns;  // per egress queue: marking (over Kmin)
  std::vector<double> ingress_xoff_ns;    // per ingress port: XOFF sent upstream
};

// A switch port in the model.
struct SwitchPortRef {
  std::string switch_name;
  std::string port;
  std::string toward;  // the device at the other end (host or switch name)
};

class Fleet {
 public:
  // Switch thresholds (bytes); see the file comment.
  static constexpr double kIngressXoff = 1.0e6;
  static constexpr double kIngressXon = 0.6e6;
  static constexpr double kEgressBuffer = 24e6;
  static constexpr double kKmin = 200e3;
  static constexpr double kKmax = 2e6;
  static constexpr double kPmax = 0.2;
  static constexpr double kNicXoff = 1.0e6;
  static constexpr double kNicXon = 0.5e6;
  static constexpr double kNicBuffer = 6e6;
  static constexpr double kBaseLoad = 0.3;  // of line rate, per host
  static constexpr int kMaxDestinations = 8;

  // `scenario` must outlive the Fleet.
  Fleet(const FleetTopology& topology, const FleetOptions& options, const FleetScenario* scenario);

  void AdvanceTo(int64_t t_ns);
  int64_t now_ns() const { return now_ns_; }

  const FleetTopology& topology() const { return topology_; }
  const FleetOptions& options() const { return options_; }
  const PortInfo& port_info() const { return port_info_; }
  const PortCounters& counters(int host) const { return hosts_[host].counters; }
  const PortStatus& status(int host) const { return hosts_[host].status; }
  std::vector<SpanRecord> TakeSpans(int host);

  // Egress queues and ingress ports, by index: names for the ground truth.
  int egress_count() const { return static_cast<int>(egress_.size()); }
  int ingress_count() const { return static_cast<int>(ingress_.size()); }
  const SwitchPortRef& egress_ref(int q) const { return egress_[q].ref; }
  const SwitchPortRef& ingress_ref(int i) const { return ingress_[i].ref; }
  int DownQueue(int host) const { return host; }  // the leaf's egress towards host
  const FleetTally& tally() const { return tally_; }
  // The tally when episode i started (null before) and ended (null while it
  // runs). Recorded at the first step at or after the boundary.
  const FleetTally* EpisodeStartTally(int i) const;
  const FleetTally* EpisodeEndTally(int i) const;

 private:
  struct Hop {
    int queue;
    int ingress;
  };
  struct Flow {
    int src, dst;
    std::vector<Hop> hops;
    std::vector<double> bytes;  // per hop: queued there
    Sender rate;
    double demand_gbps = 0;  // this step
    double marked = 0;       // packets marked this step
    bool base = false;
  };
  struct Entry {  // flow f's bytes at hop i of a queue
    int flow, hop;
  };
  struct Egress {
    SwitchPortRef ref;
    double gbps;
    std::vector<Entry> entries;
    int paused_by_ingress = -1;  // the downstream ingress port whose XOFF stops it
    int paused_by_host = -1;     // or the host NIC
    double arrivals = 0;         // this step
    double length = 0;
  };
  struct Ingress {
    SwitchPortRef ref;
    bool xoff = false;
    double occupancy = 0;
  };
  using Worker = DecodeWorker;
  struct Host {
    PortCounters counters;
    PortStatus status;
    double rx_buffer = 0;
    bool tx_pausing = false;
    bool was_rx_paused = false;
    int64_t tx_pause_run_ns = 0;
    bool storm_warned = false, storm_errored = false;
    Worker worker;
    Rng span_rng{0};
    std::vector<SpanRecord> finished;
    std::vector<int> flows;                    // flows it sources
    double sent = 0, delivered = 0, lost = 0;  // this step
    double marked = 0, cnps = 0;               // this step, as destination
  };

  int FlowFor(int src, int dst);
  void Step();
  void Serve(int q);
  void Enqueue(int flow, int hop, double bytes);
  void StepHost(int h, const FleetStepParams& params);

  FleetTopology topology_;
  FleetOptions options_;
  const FleetScenario* scenario_;
  PortInfo port_info_;
  Rng rng_;
  DcqcnParams dcqcn_;
  int64_t now_ns_ = 0;
  std::vector<Host> hosts_;
  std::vector<Flow> flows_;
  std::vector<int> flow_index_;  // src*hosts+dst -> flow, -1
  std::vector<Egress> egress_;
  std::vector<Ingress> ingress_;
  std::vector<int> serve_order_;
  FleetTally tally_;
  int episode_ = -1;
  std::map<int, FleetTally> episode_start_, episode_end_;
  FleetStepParams params_;
};

}  // namespace fabricsim
