// Process-scoped correlation: a span that names its process (Span::pid, from
// OpenTelemetry's process.pid) is judged first against that process's own QP
// counters, the per-process series rdma_netlink keeps with --rdma-per-process
// (collectors/rdma_netlink_collector.h: source "rdma_process", family
// fabricscope_rdma_process_qp_counter, labels pid/process/counter).
//
// The series of the span's pid on the ports in the span's scope (SpanScope)
// are read like any counter: the same window arithmetic (ComputeWindowStats)
// with 64-bit counter semantics, because the stored values are sums of
// counter objects that only fall when an object goes away (a reset: that
// interval contributes nothing); and the same judgement as the retransmits
// class: anomalous when delta > 0 and rate >= max(floor[retransmits],
// rate_factor x baseline_rate). The process's `other` share is never
// judged (it is not the process).
//
// When any of them is anomalous the verdict is fabric, those series lead the
// span's series (anomalous prefix) and the reason names them first:
//   "this process's QPs: out_of_sequence +340 (mlx5_0/1, pid 4242 vllm);
//    ports: <the port-level reason>"
// Otherwise (no series for the pid in scope: the opt-in is off, the process
// is not among the top processes of a port, another host's pid; or nothing
// moved anomalously) the span keeps its port-level correlation unchanged.
//
// Pure functions over the store's samples; thread-safe as the store is.
#pragma once

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "daemon/correlate/correlation.h"
#include "daemon/spans/span.h"
#include "store/store.h"

namespace fabricscope {

// The series source rdma_netlink appends per-process counters under.
inline constexpr absl::string_view kProcessSeriesSource = "rdma_process";

struct ProcessScopeResult {
  // Per-process series of the span's pid in scope with samples around the
  // window (read and judged).
  size_t series = 0;
  // The anomalous ones, highest score first.
  std::vector<SeriesCorrelation> anomalous;
  // "this process's QPs: ..." when `anomalous` is not empty, else "".
  std::string reason;
};

// Judges the per-process series of `pid` among `all` (the store's snapshot)
// that `scope` contains. `pid` is the span's process as the host numbers it:
// Span::pid, or the host pid of the container process it names (SpanPod::
// host_pid). Nothing when it is 0.
ProcessScopeResult CorrelateProcess(const Store& store, absl::Span<const SeriesSnapshot> all,
                                    const SpanScope& scope, const Span& span, uint32_t pid,
                                    const CorrelationOptions& options);

// Folds `process` into the port-level correlation `out` (see the file
// comment); a no-op without anomalous series.
void ApplyProcessScope(ProcessScopeResult process, SpanCorrelation* out);

}  // namespace fabricscope
