#include "tools/fabricsim/fleet.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tools/fabricsim/fleet_scenario.h"

namespace fabricsim {
namespace {

constexpr double kBytesPerGbpsNs = 1.0 / 8.0;
// Share of one step's arrivals that a packet finds queued ahead of it (as in
// model.cc).
constexpr double kBurstOccupancy = 0.05;
// The NIC's PFC storm prevention, as in model.cc.
constexpr int64_t kStormWarningNs = 100'000'000;
constexpr int64_t kStormErrorNs = 500'000'000;

}  // namespace

absl::StatusOr<FleetTopology> FleetTopology::Parse(int hosts, absl::string_view fabric) {
  constexpr absl::string_view kPrefix = "leaf-spine:";
  const std::string usage =
      absl::StrCat("--fabric: '", fabric, "' is not leaf-spine:LEAVES,SPINES[,HOSTS_PER_LEAF]");
  if (hosts < 2) return absl::InvalidArgumentError("--hosts: need at least 2 hosts");
  if (fabric.substr(0, kPrefix.size()) != kPrefix) return absl::InvalidArgumentError(usage);
  std::vector<absl::string_view> parts = absl::StrSplit(fabric.substr(kPrefix.size()), ',');
  if (parts.size() < 2 || parts.size() > 3) return absl::InvalidArgumentError(usage);
  int v[3] = {0, 0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtoi(parts[i], &v[i]) || v[i] < 1 || v[i] > 99) {
      return absl::InvalidArgumentError(usage + " (each count 1..99)");
    }
  }
  FleetTopology t;
  t.hosts = hosts;
  t.leaves = v[0];
  t.spines = v[1];
  t.hosts_per_leaf = parts.size() == 3 ? v[2] : (hosts + t.leaves - 1) / t.leaves;
  if (t.leaves * t.hosts_per_leaf < hosts) {
    return absl::InvalidArgumentError(absl::StrCat("--fabric ", fabric, ": ", t.leaves,
                                                   " leaves x ", t.hosts_per_leaf,
                                                   " hosts hold fewer than ", hosts, " hosts"));
  }
  return t;
}

std::string FleetTopology::Describe() const {
  return absl::StrCat("leaf-spine:", leaves, ",", spines, ",", hosts_per_leaf);
}

std::string FleetTopology::HostName(int host) const {
  int width = std::max<int>(2, static_cast<int>(std::to_string(hosts).size()));
  return absl::StrFormat("host-%0*d", width, host + 1);
}
std::string FleetTopology::LeafName(int leaf) { return absl::StrFormat("leaf%02d", leaf + 1); }
std::string FleetTopology::SpineName(int spine) { return absl::StrFormat("spine%02d", spine + 1); }
std::string FleetTopology::LeafDownPort(int slot) { return absl::StrCat("Ethernet1/", slot + 1); }
std::string FleetTopology::LeafUpPort(int spine) const {
  return absl::StrCat("Ethernet1/", hosts_per_leaf + spine + 1);
}
std::string FleetTopology::SpinePort(int leaf) { return absl::StrCat("Ethernet1/", leaf + 1); }
std::string FleetTopology::LeafChassis(int leaf) {
  return absl::StrFormat("02:fa:b0:01:00:%02x", leaf + 1);
}
std::string FleetTopology::SpineChassis(int spine) {
  return absl::StrFormat("02:fa:b0:02:00:%02x", spine + 1);
}

Fleet::Fleet(const FleetTopology& topology, const FleetOptions& options,
             const FleetScenario* scenario)
    : topology_(topology),
      options_(options),
      scenario_(scenario),
      port_info_{"mlx5_0", 1, "ens1f0np0"},
      rng_(options.seed) {
  const int n = topology_.hosts, nl = topology_.leaves, ns = topology_.spines;
  // Ports (and so egress queues and ingress ports) by index: [0, n) leaf
  // downlinks, then leaf uplinks (leaf-major), then spine downlinks
  // (spine-major). Egress q and ingress q are the two directions of one port.
  auto add_port = [&](const std::string& sw, const std::string& port, const std::string& toward,
                      double gbps) {
    egress_.push_back(Egress{{sw, port, toward}, gbps, {}, -1, -1, 0, 0});
    ingress_.push_back(Ingress{{sw, port, toward}, false, 0});
  };
  for (int h = 0; h < n; ++h) {
    add_port(FleetTopology::LeafName(topology_.LeafOf(h)),
             FleetTopology::LeafDownPort(topology_.SlotOf(h)), topology_.HostName(h),
             options_.host_gbps);
    egress_.back().paused_by_host = h;
  }
  auto up = [&](int l, int s) { return n + l * ns + s; };
  auto spine_down = [&](int s, int l) { return n + nl * ns + s * nl + l; };
  for (int l = 0; l < nl; ++l) {
    for (int s = 0; s < ns; ++s) {
      add_port(FleetTopology::LeafName(l), topology_.LeafUpPort(s), FleetTopology::SpineName(s),
               options_.uplink_gbps);
    }
  }
  for (int s = 0; s < ns; ++s) {
    for (int l = 0; l < nl; ++l) {
      add_port(FleetTopology::SpineName(s), FleetTopology::SpinePort(l), FleetTopology::LeafName(l),
               options_.uplink_gbps);
    }
  }
  for (int l = 0; l < nl; ++l) {
    for (int s = 0; s < ns; ++s) {
      // A leaf uplink stops when the spine's port from that leaf sends XOFF,
      // and the other way round.
      egress_[up(l, s)].paused_by_ingress = spine_down(s, l);
      egress_[spine_down(s, l)].paused_by_ingress = up(l, s);
    }
  }
  for (int l = 0; l < nl; ++l)
    for (int s = 0; s < ns; ++s) serve_order_.push_back(up(l, s));
  for (int s = 0; s < ns; ++s)
    for (int l = 0; l < nl; ++l) serve_order_.push_back(spine_down(s, l));
  for (int h = 0; h < n; ++h) serve_order_.push_back(h);

  Rng init(options_.seed * 7919 + 17);
  hosts_.resize(n);
  for (int h = 0; h < n; ++h) {
    InitPortCounters(init, options_.mtu_bytes, options_.pfc_priority, &hosts_[h].counters);
    hosts_[h].span_rng = Rng(options_.seed ^ (0x5eed5a17ull + 0x1000193ull * (h + 1)));
  }
  flow_index_.assign(static_cast<size_t>(n) * n, -1);
  const int k = std::min(n - 1, kMaxDestinations);
  for (int h = 0; h < n; ++h) {
    for (int j = 0; j < k; ++j) {
      int dst = (h + 1 + j * (n - 1) / k) % n;
      const int fi = FlowFor(h, dst);
      flows_[fi].base = true;
    }
  }
  tally_.host_rx_paused_ns.assign(n, 0);
  tally_.host_tx_paused_ns.assign(n, 0);
  tally_.egress_paused_ns.assign(egress_.size(), 0);
  tally_.egress_marking_ns.assign(egress_.size(), 0);
  tally_.ingress_xoff_ns.assign(ingress_.size(), 0);
}

int Fleet::FlowFor(int src, int dst) {
  const int n = topology_.hosts, nl = topology_.leaves, ns = topology_.spines;
  int& index = flow_index_[static_cast<size_t>(src) * n + dst];
  if (index >= 0) return index;
  Flow f;
  f.src = src;
  f.dst = dst;
  f.rate.rc_gbps = f.rate.rt_gbps = options_.host_gbps;
  const int ls = topology_.LeafOf(src), ld = topology_.LeafOf(dst);
  if (ls == ld) {
    f.hops.push_back({dst, src});
  } else {
    // ECMP: the spine from a hash of the flow.
    Rng hash(options_.seed ^ (static_cast<uint64_t>(src) * 1315423911ull +
                              static_cast<uint64_t>(dst) * 2654435761ull + 0xecull));
    const int s = static_cast<int>(hash.Next() % static_cast<uint64_t>(ns));
    const int up = n + ls * ns + s;
    const int spine_down = n + nl * ns + s * nl + ld;
    const int spine_in = n + nl * ns + s * nl + ls;  // the spine's port from the source leaf
    const int leaf_in = n + ld * ns + s;             // the destination leaf's port from s
    f.hops = {{up, src}, {spine_down, spine_in}, {dst, leaf_in}};
  }
  f.bytes.assign(f.hops.size(), 0);
  index = static_cast<int>(flows_.size());
  for (size_t i = 0; i < f.hops.size(); ++i) {
    egress_[f.hops[i].queue].entries.push_back({index, static_cast<int>(i)});
  }
  hosts_[src].flows.push_back(index);
  flows_.push_back(std::move(f));
  return index;
}

const FleetTally* Fleet::EpisodeStartTally(int i) const {
  auto it = episode_start_.find(i);
  return it == episode_start_.end() ? nullptr : &it->second;
}

const FleetTally* Fleet::EpisodeEndTally(int i) const {
  auto it = episode_end_.find(i);
  return it == episode_end_.end() ? nullptr : &it->second;
}

std::vector<SpanRecord> Fleet::TakeSpans(int host) {
  std::vector<SpanRecord> out;
  out.swap(hosts_[host].finished);
  return out;
}

void Fleet::AdvanceTo(int64_t t_ns) {
  while (now_ns_ + options_.step_ns <= t_ns) {
    const int episode = scenario_->EpisodeAt(now_ns_);
    if (episode != episode_) {
      if (episode_ >= 0) episode_end_[episode_] = tally_;
      if (episode >= 0) episode_start_[episode] = tally_;
      episode_ = episode;
    }
    Step();
    now_ns_ += options_.step_ns;
  }
}

void Fleet::Enqueue(int flow, int hop, double bytes) {
  if (bytes <= 0) return;
  Flow& f = flows_[flow];
  Egress& q = egress_[f.hops[hop].queue];
  q.arrivals += bytes;
  // ECN: RED on the queue this traffic sees.
  const double seen = q.length + kBurstOccupancy * q.arrivals;
  if (seen > kKmin) {
    double p = seen >= kKmax ? 1.0 : kPmax * (seen - kKmin) / (kKmax - kKmin);
    f.marked += bytes / options_.mtu_bytes * p;
  }
  // A lossless queue overflows only when PFC comes a step too late.
  const double over = q.length + q.arrivals - kEgressBuffer;
  if (over > 0) {
    const double dropped = std::min(over, bytes);
    q.arrivals -= dropped;
    bytes -= dropped;
    hosts_[f.src].lost += dropped;
    hosts_[f.dst].counters.out_of_sequence += dropped / options_.mtu_bytes;
  }
  f.bytes[hop] += bytes;
}

void Fleet::Serve(int qi) {
  Egress& q = egress_[qi];
  const double dt = static_cast<double>(options_.step_ns);
  const bool paused = (q.paused_by_ingress >= 0 && ingress_[q.paused_by_ingress].xoff) ||
                      (q.paused_by_host >= 0 && hosts_[q.paused_by_host].tx_pausing);
  // Marking this step: the queue that arriving packets saw was over Kmin.
  const bool marking = q.length + kBurstOccupancy * q.arrivals > kKmin;
  double len = q.length + q.arrivals;
  q.arrivals = 0;
  if (!paused && len > 0) {
    const double frac = std::min(1.0, q.gbps * dt * kBytesPerGbpsNs / len);
    double moved_total = 0;
    for (const Entry& e : q.entries) {
      Flow& f = flows_[e.flow];
      const double moved = f.bytes[e.hop] * frac;
      if (moved <= 0) continue;
      f.bytes[e.hop] -= moved;
      moved_total += moved;
      if (e.hop + 1 < static_cast<int>(f.hops.size())) {
        Enqueue(e.flow, e.hop + 1, moved);
      } else {
        hosts_[f.dst].rx_buffer += moved;
      }
    }
    len = std::max(0.0, len - moved_total);
    if (len < 1) len = 0;
  }
  q.length = len;
  if (paused) tally_.egress_paused_ns[qi] += dt;
  if (marking) tally_.egress_marking_ns[qi] += dt;
}

void Fleet::Step() {
  scenario_->Params(now_ns_, &params_);
  const int n = topology_.hosts;
  const double dt = static_cast<double>(options_.step_ns);
  const double line = options_.host_gbps;

  // Flow demands this step.
  for (Flow& f : flows_) f.demand_gbps = 0;
  for (int h = 0; h < n; ++h) {
    Host& host = hosts_[h];
    host.sent = host.lost = host.marked = host.cnps = 0;
    if (!params_.sends[h]) continue;
    int base = 0;
    for (int fi : host.flows) base += flows_[fi].base ? 1 : 0;
    for (int fi : host.flows) {
      Flow& f = flows_[fi];
      if (!f.base) continue;
      double noise = 0.5 + rng_.Uniform();
      if (!params_.suppressed.empty() && params_.suppressed[static_cast<size_t>(h) * n + f.dst]) {
        continue;
      }
      f.demand_gbps = kBaseLoad * line / base * noise;
    }
  }
  for (const FleetStepParams::ExtraFlow& e : params_.extra) {
    if (!params_.sends[e.src]) continue;
    const int fi = FlowFor(e.src, e.dst);
    flows_[fi].demand_gbps += e.load * line;
  }

  // Hosts send unless their leaf pauses them.
  for (int h = 0; h < n; ++h) {
    Host& host = hosts_[h];
    if (ingress_[h].xoff) continue;
    double want_total = 0;
    for (int fi : host.flows) {
      const Flow& f = flows_[fi];
      want_total += std::min(f.rate.rc_gbps, f.demand_gbps);
    }
    if (want_total <= 0) continue;
    const double scale = std::min(1.0, line / want_total);
    for (int fi : host.flows) {
      const Flow& f = flows_[fi];
      double bytes = std::min(f.rate.rc_gbps, f.demand_gbps) * scale * dt * kBytesPerGbpsNs;
      host.sent += bytes;
      Enqueue(fi, 0, bytes);
    }
  }

  // Switch egress queues in path order, each after its arrivals.
  for (int q : serve_order_) Serve(q);

  // ECN feedback: the destination counts marks and sends CNPs (at most one per
  // flow per min_time_between_cnps); the source's reaction point reacts.
  const double cnp_cap = dt / static_cast<double>(dcqcn_.min_time_between_cnps_ns);
  for (Flow& f : flows_) {
    const double marked = f.marked;
    f.marked = 0;
    const double cnps = std::min(marked, cnp_cap);
    if (marked > 0) {
      hosts_[f.dst].marked += marked;
      hosts_[f.dst].cnps += cnps;
      hosts_[f.src].counters.rp_cnp_handled += cnps;
    }
    DcqcnUpdate(now_ns_, cnps, dcqcn_, line, &f.rate);
  }

  // Switch ingress accounting and XOFF/XON.
  for (Ingress& in : ingress_) in.occupancy = 0;
  for (const Flow& f : flows_) {
    for (size_t i = 0; i < f.hops.size(); ++i) ingress_[f.hops[i].ingress].occupancy += f.bytes[i];
  }
  for (size_t i = 0; i < ingress_.size(); ++i) {
    Ingress& in = ingress_[i];
    if (in.xoff) tally_.ingress_xoff_ns[i] += dt;
  }

  for (int h = 0; h < n; ++h) StepHost(h, params_);

  for (Ingress& in : ingress_) {
    if (!in.xoff && in.occupancy > kIngressXoff) {
      in.xoff = true;
    } else if (in.xoff && in.occupancy < kIngressXon) {
      in.xoff = false;
    }
  }
}

void Fleet::StepHost(int h, const FleetStepParams& params) {
  Host& host = hosts_[h];
  PortCounters& c = host.counters;
  PortStatus& st = host.status;
  const int prio = options_.pfc_priority;
  const double line = options_.host_gbps;
  const double dt = static_cast<double>(options_.step_ns);
  const double dt_us = dt / 1000.0;
  const double mtu = options_.mtu_bytes;
  const double refresh_ns = 65535.0 * 512 / line / 2;  // XOFF refresh: half a pause quantum

  // Sent (this step's XOFF state of the leaf's port towards us decided it).
  const bool rx_paused = ingress_[h].xoff;
  c.rdma_tx_bytes += host.sent;
  c.rdma_tx_packets += host.sent / mtu;
  c.port_xmit_data += host.sent / 4;
  c.port_xmit_packets += host.sent / mtu;
  const double lost_pkts = host.lost / mtu;
  c.packet_seq_err += lost_pkts * 0.9;
  c.implied_nak_seq_err += lost_pkts * 0.1;
  c.roce_adp_retrans += lost_pkts;
  if (rx_paused) {
    c.rx_prio_pause_duration[prio] += dt_us;
    c.rx_prio_pause[prio] += dt / refresh_ns;
    c.port_xmit_wait += dt / 4;
    tally_.host_rx_paused_ns[h] += dt;
  }
  if (rx_paused && !host.was_rx_paused) c.rx_prio_pause[prio] += 1;
  if (!rx_paused && host.was_rx_paused) {
    c.rx_prio_pause[prio] += 1;  // the XON frame
    c.rx_prio_pause_transition[prio] += 1;
  }
  host.was_rx_paused = rx_paused;

  // Received: the NIC drains its receive buffer.
  const double before = host.rx_buffer;
  const double drain =
      std::min(host.rx_buffer, line * params.rx_drain_fraction[h] * dt * kBytesPerGbpsNs);
  host.rx_buffer -= drain;
  c.rdma_rx_bytes += drain;
  c.rdma_rx_packets += drain / mtu;
  c.port_rcv_data += drain / 4;
  c.port_rcv_packets += drain / mtu;
  c.rx_write_requests += drain / mtu / 16;
  c.rx_read_requests += drain / mtu / 256;
  c.np_ecn_marked_roce_packets += host.marked;
  c.np_cnp_sent += host.cnps;
  if (host.rx_buffer > kNicBuffer) {
    const double dropped = (host.rx_buffer - kNicBuffer) / mtu;
    host.rx_buffer = kNicBuffer;
    c.rx_discards_phy += dropped;
    c.rx_prio_discards[prio] += dropped;
    c.out_of_buffer += dropped * 0.25;
    c.rx_out_of_buffer += dropped * 0.25;
    c.out_of_sequence += dropped;
  }
  if (before < 0.85 * kNicBuffer && host.rx_buffer >= 0.85 * kNicBuffer) {
    c.rx_buffer_passed_thres_phy += 1;
  }

  // The NIC pauses its leaf over XOFF (this step's pausing stopped the leaf's
  // egress already; the new state applies from the next step).
  if (host.tx_pausing) {
    c.tx_prio_pause_duration[prio] += dt_us;
    c.tx_prio_pause[prio] += dt / refresh_ns;
    host.tx_pause_run_ns += options_.step_ns;
    tally_.host_tx_paused_ns[h] += dt;
  } else {
    host.tx_pause_run_ns = 0;
    host.storm_warned = host.storm_errored = false;
  }
  if (host.tx_pause_run_ns >= kStormWarningNs && !host.storm_warned) {
    host.storm_warned = true;
    c.tx_pause_storm_warning_events += 1;
  }
  if (host.tx_pause_run_ns >= kStormErrorNs && !host.storm_errored) {
    host.storm_errored = true;  // storm prevention: the NIC stops pausing
    c.tx_pause_storm_error_events += 1;
  }
  const bool was_pausing = host.tx_pausing;
  if (host.storm_errored) {
    host.tx_pausing = false;
  } else if (!host.tx_pausing && host.rx_buffer > kNicXoff) {
    host.tx_pausing = true;
  } else if (host.tx_pausing && host.rx_buffer < kNicXon) {
    host.tx_pausing = false;
  }
  if (host.tx_pausing != was_pausing) c.tx_prio_pause[prio] += 1;

  AddLinkStep(rng_, line, dt, params.ber[h], &c);
  UpdatePhyTotals(&c);

  st.link_up = true;
  st.ber = params.ber[h];
  double rate = 0;
  int flows = 0;
  for (int fi : host.flows) {
    if (!flows_[fi].base) continue;
    rate += flows_[fi].rate.rc_gbps;
    ++flows;
  }
  st.rate_gbps = flows > 0 ? rate / flows : line;
  st.send_queue_bytes = ingress_[h].occupancy;
  st.recv_queue_bytes = host.rx_buffer;
  st.rx_paused = rx_paused;
  st.tx_pausing = host.tx_pausing;

  // Decode worker: a compute phase, then a communication phase that ends when
  // the host has sent comm bytes; pauses stretch it.
  Worker& w = host.worker;
  if (w.trace_id.empty() || w.step_in_request >= options_.steps_per_request) {
    w.trace_id = RandomHex(host.span_rng, 16);
    w.step_in_request = 0;
  }
  if (!w.in_comm && w.compute_ns == 0) {
    w.compute_ns = options_.compute_ms * 1e6 * (0.95 + 0.1 * host.span_rng.Uniform());
  }
  if (!w.in_comm && static_cast<double>(now_ns_ - w.phase_start_ns) >= w.compute_ns) {
    w.in_comm = true;
    w.phase_start_ns = now_ns_;
    w.bytes_left = kBaseLoad * line * options_.comm_ms * 1e6 * kBytesPerGbpsNs;
    w.comm_bytes = w.bytes_left;
  }
  if (!w.in_comm) return;
  w.bytes_left -= std::max(0.0, host.sent - 4 * host.lost);
  if (rx_paused) w.paused_ns += dt;
  if (w.bytes_left > 0) return;
  w.FinishStep(now_ns_ + options_.step_ns, 0, options_.compute_ms + options_.comm_ms,
               options_.steps_per_request, host.span_rng, &host.finished);
}

}  // namespace fabricsim
