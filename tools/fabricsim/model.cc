#include "tools/fabricsim/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fabricsim {
namespace {

// Gb/s x ns = bits.
constexpr double kBytesPerGbpsNs = 1.0 / 8.0;
// RS(544,514) codeword: 5440 bits.
constexpr double kFecCodewordBits = 5440;
// Remote QPs that time out when a link goes down.
constexpr double kQpsPerPort = 16;
// The NIC's PFC storm prevention (pfc-prevention-tout): a warning after this
// much continuous pausing, an error (it stops pausing) after the second.
constexpr int64_t kStormWarningNs = 100'000'000;
constexpr int64_t kStormErrorNs = 500'000'000;
// Background (non-RDMA) Ethernet traffic on each port, each way.
constexpr double kBackgroundGbps = 0.5;
// Share of one step's arrivals that a packet finds queued ahead of it.
constexpr double kBurstOccupancy = 0.05;

}  // namespace

void DcqcnUpdate(int64_t now_ns, double handled_cnps, const DcqcnParams& dcqcn,
                 double line_rate_gbps, Sender* sender) {
  Sender& s = *sender;
  s.cnp_accum = std::min(1.0, s.cnp_accum + handled_cnps);
  if (s.cnp_accum >= 1.0 && now_ns - s.last_decrease_ns >= dcqcn.rate_reduce_period_ns) {
    s.cnp_accum = 0;
    s.rt_gbps = s.rc_gbps;
    s.rc_gbps = std::max(dcqcn.min_rate_gbps, s.rc_gbps * (1 - s.alpha / 2));
    s.alpha = (1 - dcqcn.g) * s.alpha + dcqcn.g;
    s.last_decrease_ns = s.last_alpha_ns = s.last_increase_ns = now_ns;
    s.stage = 0;
    return;
  }
  if (now_ns - s.last_alpha_ns >= dcqcn.alpha_period_ns) {
    s.alpha *= (1 - dcqcn.g);
    s.last_alpha_ns = now_ns;
  }
  if (now_ns - s.last_increase_ns >= dcqcn.increase_period_ns) {
    s.last_increase_ns = now_ns;
    ++s.stage;
    if (s.stage > 2 * dcqcn.fast_recovery_stages) {
      s.rt_gbps += dcqcn.hai_gbps;
    } else if (s.stage > dcqcn.fast_recovery_stages) {
      s.rt_gbps += dcqcn.ai_gbps;
    }
    s.rt_gbps = std::min(s.rt_gbps, line_rate_gbps);
    s.rc_gbps = std::min(line_rate_gbps, (s.rt_gbps + s.rc_gbps) / 2);
  }
}

void InitPortCounters(Rng& init, double mtu_bytes, int pfc_priority, PortCounters* counters) {
  PortCounters& c = *counters;
  const int prio = pfc_priority;
  // A host that has been up for a while: plausible, seed-dependent start values.
  double traffic = 1e11 + init.Uniform() * 1e12;
  c.rdma_tx_bytes = traffic;
  c.rdma_rx_bytes = traffic * (0.9 + 0.2 * init.Uniform());
  c.rdma_tx_packets = c.rdma_tx_bytes / mtu_bytes;
  c.rdma_rx_packets = c.rdma_rx_bytes / mtu_bytes;
  c.port_xmit_data = c.rdma_tx_bytes / 4;
  c.port_rcv_data = c.rdma_rx_bytes / 4;
  c.port_xmit_packets = c.rdma_tx_packets;
  c.port_rcv_packets = c.rdma_rx_packets;
  c.eth_tx_bytes = traffic * 0.01;
  c.eth_rx_bytes = traffic * 0.012;
  c.eth_tx_packets = c.eth_tx_bytes / 900;
  c.eth_rx_packets = c.eth_rx_bytes / 900;
  c.rx_write_requests = c.rdma_rx_packets / 16;
  c.rx_read_requests = c.rdma_rx_packets / 256;
  c.np_ecn_marked_roce_packets = std::floor(init.Uniform() * 2e6);
  c.np_cnp_sent = std::floor(c.np_ecn_marked_roce_packets * 0.05);
  c.rp_cnp_handled = std::floor(init.Uniform() * 1e5);
  c.rx_prio_pause[prio] = std::floor(init.Uniform() * 5000);
  c.rx_prio_pause_duration[prio] = c.rx_prio_pause[prio] * 80;
  c.rx_prio_pause_transition[prio] = std::floor(c.rx_prio_pause[prio] / 4);
  c.tx_prio_pause[prio] = std::floor(init.Uniform() * 500);
  c.tx_prio_pause_duration[prio] = c.tx_prio_pause[prio] * 80;
  c.out_of_sequence = std::floor(init.Uniform() * 50);
  c.packet_seq_err = std::floor(init.Uniform() * 5);
  c.local_ack_timeout_err = std::floor(init.Uniform() * 40);
  c.req_cqe_flush_error = c.resp_cqe_flush_error = std::floor(init.Uniform() * 2000);
  c.rx_bits_phy = traffic * 8 * 1.3;
  c.rx_corrected_bits_phy = std::floor(init.Uniform() * 100);
  c.fec_corrected_blocks = c.rx_corrected_bits_phy;
  c.port_xmit_wait = std::floor(init.Uniform() * 1e8);
  c.link_downed = 0;
}

void AddLinkStep(Rng& rng, double line_gbps, double dt_ns, double ber, PortCounters* counters) {
  PortCounters& c = *counters;
  double bg = kBackgroundGbps * dt_ns * kBytesPerGbpsNs;
  c.eth_tx_bytes += bg;
  c.eth_rx_bytes += bg;
  c.eth_tx_packets += bg / 900;
  c.eth_rx_packets += bg / 900;
  double bits = line_gbps * dt_ns;
  c.rx_bits_phy += bits;
  double errors = bits * ber * (0.5 + rng.Uniform());
  c.rx_corrected_bits_phy += errors;
  double codewords = bits / kFecCodewordBits;
  c.fec_corrected_blocks += std::min(codewords, errors / 1.2);
  double uncorrectable = codewords * 1e-3 * std::pow(ber / 1e-4, 6);
  c.fec_uncorrectable_blocks += uncorrectable;
  c.rx_pcs_symbol_err_phy += uncorrectable * 2;
  c.rx_crc_errors_phy += uncorrectable;
  c.rx_symbol_err_phy += uncorrectable;
  c.symbol_error += uncorrectable;
  c.port_rcv_errors += uncorrectable;
  c.out_of_sequence += uncorrectable;
}

void UpdatePhyTotals(PortCounters* counters) {
  PortCounters& c = *counters;
  c.tx_bytes_phy = c.rdma_tx_bytes + c.eth_tx_bytes;
  c.rx_bytes_phy = c.rdma_rx_bytes + c.eth_rx_bytes;
  c.tx_packets_phy = c.rdma_tx_packets + c.eth_tx_packets;
  c.rx_packets_phy = c.rdma_rx_packets + c.eth_rx_packets;
}

Queue::Queue(int senders, double line_rate_gbps, double mtu_bytes)
    : line_rate_gbps_(line_rate_gbps), mtu_bytes_(mtu_bytes), senders_(senders) {
  for (Sender& s : senders_) s.rc_gbps = s.rt_gbps = line_rate_gbps;
  handled_.assign(senders, 0);
  ignored_.assign(senders, 0);
  step_.sent_bytes.assign(senders, 0);
  step_.marked_pkts.assign(senders, 0);
  step_.cnps.assign(senders, 0);
  step_.lost_pkts.assign(senders, 0);
}

const QueueStep& Queue::Step(int64_t now_ns, int64_t dt_ns, const QueueParams& params,
                             const DcqcnParams& dcqcn, const std::vector<double>& demand_gbps,
                             bool send_allowed) {
  const int n = static_cast<int>(senders_.size());
  const double dt = static_cast<double>(dt_ns);
  if (!params.pfc) paused_ = false;
  step_.paused = paused_;
  step_.pause_onset = step_.pause_release = step_.passed_85pct = false;

  double arrivals = 0;
  for (int i = 0; i < n; ++i) {
    double rate = std::min(senders_[i].rc_gbps, demand_gbps[i]);
    double sent = (send_allowed && !paused_) ? std::max(0.0, rate) * dt * kBytesPerGbpsNs : 0;
    step_.sent_bytes[i] = sent;
    arrivals += sent;
  }
  // Packets arrive in bursts within a step: the queue a packet sees is the
  // standing queue plus a share of this step's arrivals.
  const double seen = length_ + kBurstOccupancy * arrivals;
  double p_mark = 0;
  if (params.ecn && seen > params.kmin_bytes) {
    p_mark = seen >= params.kmax_bytes ? 1.0
                                       : params.pmax * (seen - params.kmin_bytes) /
                                             std::max(1.0, params.kmax_bytes - params.kmin_bytes);
  }
  const double cnp_cap = dt / static_cast<double>(dcqcn.min_time_between_cnps_ns);
  for (int i = 0; i < n; ++i) {
    double pkts = step_.sent_bytes[i] / mtu_bytes_;
    step_.marked_pkts[i] = pkts * p_mark;
    step_.cnps[i] = std::min(step_.marked_pkts[i], cnp_cap);
    step_.lost_pkts[i] = pkts * params.loss_probability;
  }

  const double before = length_;
  double drain = std::max(0.0, params.drain_gbps) * dt * kBytesPerGbpsNs;
  step_.delivered_bytes = std::min(length_ + arrivals, drain);
  length_ = length_ + arrivals - step_.delivered_bytes;
  step_.dropped_pkts = 0;
  if (length_ > params.buffer_bytes) {
    double dropped = length_ - params.buffer_bytes;
    length_ = params.buffer_bytes;
    step_.dropped_pkts = dropped / mtu_bytes_;
    for (int i = 0; i < n; ++i) {
      if (arrivals > 0) step_.lost_pkts[i] += step_.dropped_pkts * step_.sent_bytes[i] / arrivals;
    }
  }
  if (before < 0.85 * params.buffer_bytes && length_ >= 0.85 * params.buffer_bytes) {
    step_.passed_85pct = true;
  }
  if (params.pfc) {
    if (!paused_ && length_ > params.xoff_bytes) {
      paused_ = true;
      step_.pause_onset = true;
    } else if (paused_ && length_ < params.xon_bytes) {
      paused_ = false;
      step_.pause_release = true;
    }
  }

  // DCQCN reaction points.
  for (int i = 0; i < n; ++i) {
    const double cnps = step_.cnps[i];
    handled_[i] = params.cc_enabled ? cnps : 0;
    ignored_[i] = params.cc_enabled ? 0 : cnps;
    DcqcnUpdate(now_ns, params.cc_enabled ? cnps : 0, dcqcn, line_rate_gbps_, &senders_[i]);
  }
  return step_;
}

Fabric::Fabric(const FabricOptions& options, const ParamSource* params)
    : options_(options),
      params_(params),
      rng_(options.seed),
      span_rng_(options.seed ^ 0x5eed5a17ull) {
  Rng init(options.seed * 7919 + 17);
  for (int p = 0; p < options_.ports; ++p) {
    info_.push_back({"mlx5_" + std::to_string(p), 1, "eth" + std::to_string(p + 2)});
    ports_.emplace_back(options_.senders, options_.line_rate_gbps, options_.mtu_bytes);
    InitPortCounters(init, options_.mtu_bytes, options_.pfc_priority, &ports_.back().counters);
  }
  demand_.assign(options_.senders, 0);
}

std::string RandomHex(Rng& rng, int bytes) {
  std::string out;
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    if (i % 8 == 0) v = rng.Next();
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(v & 0xff));
    v >>= 8;
    out += buf;
  }
  return out;
}

void Fabric::AdvanceTo(int64_t t_ns) {
  while (now_ns_ + options_.step_ns <= t_ns) {
    for (int p = 0; p < options_.ports; ++p) StepPort(p);
    now_ns_ += options_.step_ns;
  }
}

void RequestTracker::StepDone(SpanRecord step, int steps_per_request, std::string span_id,
                              std::vector<SpanRecord>* out) {
  if (steps == 0) {
    start_ns = step.start_ns;
    first_token_ns = step.end_ns;
    paused_ms = 0;
  }
  paused_ms += step.paused_ms;
  ++steps;
  SpanRecord request;
  if (steps >= steps_per_request) {
    request.trace_id = step.trace_id;
    request.span_id = std::move(span_id);
    request.name = "llm_request";
    request.request = true;
    request.start_ns = start_ns;
    request.end_ns = step.end_ns;
    request.first_token_ns = first_token_ns;
    request.tokens = steps;
    request.port_index = step.port_index;
    request.paused_ms = paused_ms;
    request.nominal_ms = step.nominal_ms * steps;
    steps = 0;
  }
  out->push_back(std::move(step));
  if (request.request) out->push_back(std::move(request));
}

std::vector<SpanRecord> Fabric::TakeSpans() {
  std::vector<SpanRecord> out;
  out.swap(finished_);
  return out;
}

void Fabric::StepPort(int p) {
  Port& port = ports_[p];
  PortCounters& c = port.counters;
  PortStatus& st = port.status;
  PortParams pp;
  params_->Params(p, now_ns_, &pp);

  const int n = options_.senders;
  const int prio = options_.pfc_priority;
  const double line = options_.line_rate_gbps;
  const double dt = static_cast<double>(options_.step_ns);
  const double mtu = options_.mtu_bytes;
  const double dt_us = dt / 1000.0;

  // Link state transitions.
  if (st.link_up && !pp.link_up) {
    c.link_down_events_phy += 1;
    c.link_downed += 1;
  } else if (!st.link_up && pp.link_up) {
    c.link_error_recovery += 1;
    c.local_ack_timeout_err += kQpsPerPort;
    c.roce_adp_retrans_to += kQpsPerPort;
    c.req_cqe_error += 2;
    c.req_cqe_flush_error += kQpsPerPort;
  }
  st.link_up = pp.link_up;
  st.ber = pp.ber;

  // Start a decode step's communication phase when its compute phase is over.
  Worker& w = port.worker;
  if (w.trace_id.empty() || w.step_in_request >= options_.steps_per_request) {
    w.trace_id = RandomHex(span_rng_, 16);
    w.step_in_request = 0;
  }
  if (!w.in_comm && w.compute_ns == 0) {
    w.compute_ns = options_.compute_ms * 1e6 * (0.95 + 0.1 * span_rng_.Uniform());
  }
  if (!w.in_comm && static_cast<double>(now_ns_ - w.phase_start_ns) >= w.compute_ns) {
    w.in_comm = true;
    w.phase_start_ns = now_ns_;
    w.bytes_left = options_.comm_fraction * line * options_.comm_ms * 1e6 * kBytesPerGbpsNs;
    w.comm_bytes = w.bytes_left;
  }

  // --- S_p: the local sender (index 0) and the remote senders.
  demand_[0] = w.in_comm ? options_.comm_fraction * line : 0.01 * line;
  for (int i = 1; i < n; ++i) {
    double noise = 0.5 + rng_.Uniform();
    demand_[i] = pp.send_incast ? line : pp.remote_load * line / (n - 1) * noise;
  }
  const QueueStep& s =
      port.send.Step(now_ns_, options_.step_ns, pp.send, dcqcn_, demand_, pp.link_up);
  double sent0 = s.sent_bytes[0];
  double lost0 = s.lost_pkts[0];
  c.rdma_tx_bytes += sent0;
  c.rdma_tx_packets += sent0 / mtu;
  c.port_xmit_data += sent0 / 4;
  c.port_xmit_packets += sent0 / mtu;
  if (s.paused) {
    c.rx_prio_pause_duration[prio] += dt_us;
    // The switch refreshes XOFF every half pause quantum (65535 x 512 bit times).
    double refresh_ns = 65535.0 * 512 / line / 2;
    c.rx_prio_pause[prio] += dt / refresh_ns;
    c.port_xmit_wait += dt / 4;  // 4 ns ticks
  }
  if (s.pause_onset) c.rx_prio_pause[prio] += 1;
  if (s.pause_release) {
    c.rx_prio_pause[prio] += 1;  // the XON frame
    c.rx_prio_pause_transition[prio] += 1;
  }
  c.rp_cnp_handled += port.send.handled_cnps(0);
  c.rp_cnp_ignored += port.send.ignored_cnps(0);
  c.packet_seq_err += lost0 * 0.9;
  c.implied_nak_seq_err += lost0 * 0.1;
  c.local_ack_timeout_err += lost0 * 0.05;
  c.roce_adp_retrans += lost0;
  c.roce_adp_retrans_to += lost0 * 0.05;

  // --- R_p: remote senders into the local port.
  for (int i = 0; i < n; ++i) {
    double noise = 0.5 + rng_.Uniform();
    demand_[i] = pp.recv_incast ? pp.recv_incast_load * line : pp.remote_load * line / n * noise;
  }
  QueueParams rq = pp.recv;
  if (pp.local_rx_stuck) rq.drain_gbps = 0;
  // The NIC's storm prevention gives up pausing after kStormErrorNs: the
  // buffer then overflows instead.
  if (port.storm_errored) rq.pfc = false;
  const QueueStep& r = port.recv.Step(now_ns_, options_.step_ns, rq, dcqcn_, demand_, pp.link_up);
  double marked = 0, cnps = 0, lost = 0;
  for (int i = 0; i < n; ++i) {
    marked += r.marked_pkts[i];
    cnps += r.cnps[i];
    lost += r.lost_pkts[i];
  }
  c.rdma_rx_bytes += r.delivered_bytes;
  c.rdma_rx_packets += r.delivered_bytes / mtu;
  c.port_rcv_data += r.delivered_bytes / 4;
  c.port_rcv_packets += r.delivered_bytes / mtu;
  c.rx_write_requests += r.delivered_bytes / mtu / 16;
  c.rx_read_requests += r.delivered_bytes / mtu / 256;
  c.np_ecn_marked_roce_packets += marked;
  c.np_cnp_sent += cnps;
  if (r.paused) {
    c.tx_prio_pause_duration[prio] += dt_us;
    c.tx_prio_pause[prio] += dt / (65535.0 * 512 / line / 2);
    port.tx_pause_run_ns += options_.step_ns;
  } else {
    port.tx_pause_run_ns = 0;
    port.storm_warned = port.storm_errored = false;
  }
  if (r.pause_onset) c.tx_prio_pause[prio] += 1;
  if (r.pause_release) c.tx_prio_pause[prio] += 1;
  if (port.tx_pause_run_ns >= kStormWarningNs && !port.storm_warned) {
    port.storm_warned = true;
    c.tx_pause_storm_warning_events += 1;
  }
  if (port.tx_pause_run_ns >= kStormErrorNs && !port.storm_errored) {
    port.storm_errored = true;
    c.tx_pause_storm_error_events += 1;
  }
  c.rx_discards_phy += r.dropped_pkts;
  c.rx_prio_discards[prio] += r.dropped_pkts;
  c.out_of_buffer += r.dropped_pkts * 0.25;
  c.rx_out_of_buffer += r.dropped_pkts * 0.25;
  c.out_of_sequence += lost;
  c.duplicate_request += lost * 0.1;
  if (r.passed_85pct) c.rx_buffer_passed_thres_phy += 1;

  // --- Background Ethernet traffic and the physical layer.
  if (pp.link_up) AddLinkStep(rng_, line, dt, pp.ber, &c);
  UpdatePhyTotals(&c);

  st.rate_gbps = port.send.sender(0).rc_gbps;
  st.send_queue_bytes = port.send.length_bytes();
  st.recv_queue_bytes = port.recv.length_bytes();
  st.rx_paused = port.send.paused();
  st.tx_pausing = port.recv.paused();

  StepWorker(p, sent0, lost0 * mtu, s.paused, pp.link_up);
}

void Fabric::StepWorker(int p, double sent_bytes, double lost_bytes, bool paused, bool link_up) {
  Worker& w = ports_[p].worker;
  if (!w.in_comm) return;
  // Go-back-N: a lost packet costs itself and a few behind it.
  w.bytes_left -= std::max(0.0, sent_bytes - 4 * lost_bytes);
  if (paused || !link_up) w.paused_ns += static_cast<double>(options_.step_ns);
  if (w.bytes_left > 0) return;
  w.FinishStep(now_ns_ + options_.step_ns, p, options_.compute_ms + options_.comm_ms,
               options_.steps_per_request, span_rng_, &finished_);
}

void DecodeWorker::FinishStep(int64_t end_ns, int port_index, double nominal_ms,
                              int steps_per_request, Rng& rng, std::vector<SpanRecord>* out) {
  SpanRecord span;
  span.trace_id = trace_id;
  span.span_id = RandomHex(rng, 8);
  span.start_ns = span_start_ns;
  span.end_ns = end_ns;
  span.port_index = port_index;
  span.paused_ms = paused_ns / 1e6;
  span.nominal_ms = nominal_ms;
  span.comm_start_ns = phase_start_ns;
  span.comm_bytes = comm_bytes;
  request.StepDone(std::move(span), steps_per_request, RandomHex(rng, 8), out);
  in_comm = false;
  compute_ns = 0;
  paused_ns = 0;
  span_start_ns = phase_start_ns = end_ns;
  ++step_in_request;
}

}  // namespace fabricsim
