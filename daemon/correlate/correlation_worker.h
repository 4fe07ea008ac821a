// The correlation worker: correlates every ingested span once, when its window
// has been polled, and records the result in the span aggregates.
//
// It tails the span store (SpanStore::ReadFrom, arrival order) and keeps the
// spans it has read in a pending queue ordered by due time
// (end_unix_nano + settle_delay). A span is correlated when realtime passes
// its due time: by then every counter tier has polled at least once after the
// span ended (the daemon sets settle_delay to the slowest counter tier's
// interval plus one hot interval plus 100 ms), so the window is covered
// unless data is really missing.
//
// Bounds: the pending queue holds at most queue_limit spans. When it is full
// the worker stops reading the span store until spans become due (it never
// drops a span it has read); spans the span store evicts before the worker
// reads them are counted in
// fabricscope_correlation_spans_missed_total (the Query service can still
// correlate any span still held on demand; only the aggregates miss them).
//
// Threads: Start() runs one thread that wakes every poll_period; RunOnce()
// does one step on the calling thread (tests drive it with a FakeClock and
// never call Start). Stop() joins the thread; it returns within one step.
//
// Ownership: every pointer is borrowed and must outlive the worker.
#pragma once

#include <cstdint>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/correlate/correlator.h"
#include "daemon/correlate/span_aggregates.h"
#include "daemon/spans/span_store.h"

namespace fabricscope {

struct CorrelationWorkerOptions {
  absl::Duration settle_delay = absl::Milliseconds(1200);
  size_t queue_limit = 65536;
  absl::Duration poll_period = absl::Milliseconds(100);
  size_t read_batch = 4096;  // spans read from the store per step
  // Start after the spans the store already holds (restored from a state
  // snapshot: they were aggregated before the restart) instead of with them.
  bool skip_held_spans = false;
};

class CorrelationWorker {
 public:
  CorrelationWorker(const SpanStore* spans, const Correlator* correlator,
                    SpanAggregates* aggregates, Clock* clock, MetricsRegistry* metrics,
                    CorrelationWorkerOptions options);
  ~CorrelationWorker();
  CorrelationWorker(const CorrelationWorker&) = delete;
  CorrelationWorker& operator=(const CorrelationWorker&) = delete;

  void Start();
  void Stop();

  // One step: reads newly added spans, correlates the due ones. Returns the
  // number correlated.
  size_t RunOnce();

  size_t pending() const;
  uint64_t correlated() const;

 private:
  struct Pending {
    int64_t due_ns;
    uint64_t seq;
    SpanRef span;
    bool operator>(const Pending& o) const {
      return due_ns != o.due_ns ? due_ns > o.due_ns : seq > o.seq;
    }
  };

  const SpanStore* const spans_;
  const Correlator* const correlator_;
  SpanAggregates* const aggregates_;
  Clock* const clock_;
  const CorrelationWorkerOptions options_;
  prometheus::Counter* missed_ = nullptr;
  prometheus::Histogram* duration_ = nullptr;
  prometheus::Gauge* pending_gauge_ = nullptr;

  // Guards the fields below (RunOnce may run on the thread and in tests).
  mutable std::mutex mu_;
  uint64_t next_seq_ = 0;
  uint64_t correlated_ = 0;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> queue_;

  StopSignal stop_;
  std::thread thread_;
};

}  // namespace fabricscope
