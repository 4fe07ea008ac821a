// The correlator: was it the fabric, and where? (DESIGN.md section 5)
//
// For one span [t0, t1] and every counter series in its scope, the correlator
// reads the raw samples of the store around the span and computes
//
//   delta           counter movement inside [t0, t1], in the family's unit
//   rate            delta / covered seconds of the window
//   baseline_rate   the same over [t0 - baseline_window, t0]
//   peak_rate       highest per-poll-interval rate of an interval that
//                   overlaps the window
//   pause_fraction  for pause-duration series (fabricscope_pfc_pause_seconds):
//                   pause seconds / covered span seconds
//   coverage        fraction of the window covered by valid intervals
//
// How samples map to a window. Between two consecutive samples a, b the
// counter moved by d (counter semantics of counter_semantics.h: wraps are
// unwrapped; an interval that contains a reset or a saturated reading has no
// delta and is "not covered"; an interval longer than max_sample_gap is a gap,
// also not covered). The part of d attributed to the window is proportional
// to the overlap of [a, b] with the window. So a span shorter than one poll
// interval gets the rate of the interval(s) around it, and its pause fraction
// is the fraction of that interval spent paused: the best the samples can say.
//
// Judgement, per series (thresholds in CorrelationOptions, all config):
//  - pause class: anomalous when pause_fraction >= pause_fraction_threshold;
//    score = pause_fraction / threshold. An absolute rule: a port that was
//    paused for a large part of the span stalled it whatever the baseline.
//  - other congestion classes: anomalous when delta > 0 and
//    rate >= floor[class] and rate >= rate_factor x baseline_rate;
//    score = rate / max(floor[class], rate_factor x baseline_rate).
//  - context (bytes, packets, other counters): reported with score 0, never
//    anomalous. Gauges are not correlated at all.
// A series is anomalous exactly when its score >= 1.
//
// Blind series. A congestion series that cannot give a trustworthy delta
// over the window is "blind" for the span: it covers less than min_coverage
// of the window and shows no anomaly in the part it does cover. Its `why`
// names the largest uncovered part:
//   saturated          a saturating IB PMA counter sat at its maximum
//   reset              an interval contained a reset the semantics cannot
//                      bridge (driver reload, PMA clear)
//   gap                an interval longer than max_sample_gap (missed polls),
//                      or no sample since a poll long before the window while
//                      other series were polled past it (an unreadable file)
//   vanished           no sample since, and the series is absent (its file
//                      or device is gone)
//   not polled         no sample since a recent poll (the tier has not polled
//                      it yet, or nothing in the store is newer than the
//                      span), or none before (the series appeared after the
//                      span began)
//   outside retention  no sample before: the store evicted that old data
// A series with partial coverage whose covered part is anomalous is sighted
// (evidence is evidence): blindness never hides an anomaly.
//
// The same signal from two sources. Series of the same signal (family and
// every label value) at the same port (the inventory maps a netdev to its
// RDMA port) are one signal: the correlator judges the best of them, sighted
// before blind, then the wider counter (64-bit, then 32-bit wrapping, then
// saturating by width), e.g. a 64-bit extended counter over the 32-bit PMA
// port_xmit_wait that sits saturated. The others are "superseded": listed
// with the series (with their own blind why, for display), never judged,
// never counted, never in SpanCorrelation::blind.
//
// Verdict of the span (sighted = a congestion series in scope, not
// superseded, not blind):
//  - fabric:  at least one congestion series is anomalous (the ranked list of
//             anomalous series says which, where and how much: pause
//             fractions first, then rates judged against their baseline,
//             then rates judged against the floor alone, each by score; see
//             Correlate's ranking for why);
//  - unknown: no congestion series in scope; or none is sighted (the window
//             is outside retention, not polled yet, ...); or a whole
//             congestion group of a port in scope is blind (every series of
//             it on that port), where the groups are
//               pause        pause, pause_frames, pause_storm, xmit_wait (IB
//                            credit wait is the IB form of backpressure)
//               ecn          ecn, cnp
//               drops        discards, drops
//               retransmits  retransmits
//               port_errors  port_errors, fec
//             (BlindGroupName in signal_class.h);
//  - clean:   otherwise: every sighted congestion series covers at least
//             min_coverage of the window and none is anomalous. The blind
//             series are a caveat: SpanCorrelation::blind lists them and the
//             reason names them ("mlx5_0/1 port_xmit_wait saturated: blind").
//
// Scope: the span's hints (rdma.device, rdma.port, network.interface.name)
// resolved through the store's port inventory (a device/port hint also covers
// the port's netdev, a netdev hint also covers the RDMA port on it); without
// hints, every port in the inventory (every series when the inventory is
// empty).
//
// GPU scope: a span with a fabricscope.gpu hint (PCI bus id in any of the
// forms HostTopology::FindGpu accepts, or a decimal GPU index) and no
// rdma.device or network.interface.name hint is scoped to the RDMA devices
// whose PCI relation to that GPU is the closest class present in the host
// topology's affinity map (PIX, then PXB, PHB, NODE, SYS: every device with
// the minimum relation), i.e. their ports in the inventory and those ports'
// netdevs; an rdma.port hint narrows that to the port with that number. An
// explicit rdma.device or netdev hint wins over the GPU hint. A GPU the
// topology does not know, or one without affinity entries, falls back to
// every port, and SpanCorrelation::scope says so. The topology is copied
// from the inventory once per GPU-scoped span (only for those).
//
// Pod scope: a span with no hint of its own (no rdma.device, netdev or GPU)
// that belongs to a Kubernetes pod (its k8s.namespace.name/k8s.pod.name or
// k8s.pod.uid resource attributes, else its process's pod) is scoped to the
// RDMA devices the kubelet allocated to that pod (its container's, when the
// span names a container that holds any): SR-IOV VFs and, after them, each
// VF's PF (the physical port the VF rides, whose PFC and port counters only
// the PF has); a pod with no RDMA device is scoped to the NICs nearest its
// GPUs (as a GPU hint, over all of them). A pod with neither falls back to
// every port. SpanCorrelation::pod names the pod, ::scope the devices
// (store/pod_table.h, daemon/kubernetes/kubernetes_source.h).
//
// Thread-safety: Correlate() is const and thread-safe (it only reads the
// store). The store must outlive the correlator.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "daemon/correlate/correlation.h"
#include "daemon/correlate/window_stats.h"
#include "daemon/spans/span.h"

namespace fabricscope {

class PortInventory;
class Store;
struct ProcessScopeResult;

class Correlator {
 public:
  // `store` holds the samples, `ports` the port inventory that scopes a span
  // by device/port/netdev (may be null: no inventory, as if empty). Both
  // outlive the correlator.
  Correlator(const Store* store, const PortInventory* ports, CorrelationOptions options,
             StallPolicy stalls);

  // The span's port-level correlation, led by its process's own QP counters
  // when it names its process (Span::pid; daemon/correlate/process_scope.h).
  SpanCorrelation Correlate(const Span& span) const;

  const CorrelationOptions& options() const { return options_; }
  const StallPolicy& stall_policy() const { return stalls_; }

 private:
  // The port-level correlation described above; also judges the span's
  // process series (into `process`) from the same store snapshot.
  SpanCorrelation CorrelatePorts(const Span& span, ProcessScopeResult* process) const;

  const Store* const store_;
  const PortInventory* const ports_;
  const CorrelationOptions options_;
  const StallPolicy stalls_;
  // ClassifySignal of each series met so far, by id (0: not yet, else the
  // class + 1): a series' signal never changes and the store never reuses an
  // id, so a class is computed once per series instead of once per span.
  mutable std::mutex classes_mu_;
  mutable std::vector<uint8_t> classes_;  // guarded by classes_mu_
};

}  // namespace fabricscope
