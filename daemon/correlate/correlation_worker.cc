#include "daemon/correlate/correlation_worker.h"

#include <chrono>

namespace fabricscope {
namespace {

const MetricSpec& kMissed = DefineMetric(
    {.name = "fabricscope_correlation_spans_missed_total",
     .type = MetricType::kCounter,
     .help = "Spans evicted from the span store before the correlation worker read them (not in "
             "the span aggregates).",
     .labels = {},
     .component = "correlate"});
const MetricSpec& kDuration =
    DefineMetric({.name = "fabricscope_correlation_duration_seconds",
                  .type = MetricType::kHistogram,
                  .help = "Time to correlate one span with the series in its scope.",
                  .labels = {},
                  .component = "correlate"});
const MetricSpec& kPending =
    DefineMetric({.name = "fabricscope_correlation_pending_spans",
                  .type = MetricType::kGauge,
                  .help = "Spans read from the span store and waiting until their window has "
                          "been polled (end + settle delay).",
                  .labels = {},
                  .component = "correlate"});

}  // namespace

CorrelationWorker::CorrelationWorker(const SpanStore* spans, const Correlator* correlator,
                                     SpanAggregates* aggregates, Clock* clock,
                                     MetricsRegistry* metrics, CorrelationWorkerOptions options)
    : spans_(spans),
      correlator_(correlator),
      aggregates_(aggregates),
      clock_(clock),
      options_(options) {
  if (metrics != nullptr) {
    missed_ = &metrics->Counter(kMissed).Add({});
    duration_ = &metrics->Histogram(kDuration).Add(
        {},
        prometheus::Histogram::BucketBoundaries{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
                                                0.001, 0.0025, 0.005, 0.01, 0.025, 0.1});
    pending_gauge_ = &metrics->Gauge(kPending).Add({});
  }
  // Start with the spans added from now on plus (unless told otherwise) those
  // still held.
  const SpanStoreStats held = spans_->Stats();
  next_seq_ = options_.skip_held_spans ? held.next_seq : held.first_seq;
}

CorrelationWorker::~CorrelationWorker() { Stop(); }

void CorrelationWorker::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    const auto period = absl::ToChronoNanoseconds(options_.poll_period);
    while (!stop_.Notified()) {
      RunOnce();
      clock_->SleepUntil(clock_->SteadyNow() + period, &stop_);
    }
  });
}

void CorrelationWorker::Stop() {
  if (!stop_.Notified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

size_t CorrelationWorker::RunOnce() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t settle_ns = absl::ToInt64Nanoseconds(options_.settle_delay);
  // Tail the span store while there is room.
  while (queue_.size() < options_.queue_limit) {
    const size_t room = std::min(options_.read_batch, options_.queue_limit - queue_.size());
    SpanStore::ReadResult r = spans_->ReadFrom(next_seq_, room);
    if (r.missed > 0 && missed_ != nullptr) missed_->Increment(static_cast<double>(r.missed));
    uint64_t seq = r.next_seq - r.spans.size();
    for (SpanRef& s : r.spans) {
      const int64_t end = std::max(s->end_unix_nano, s->start_unix_nano);
      queue_.push(Pending{end + settle_ns, seq++, std::move(s)});
    }
    next_seq_ = r.next_seq;
    if (r.spans.size() < room) break;
  }
  const int64_t now = clock_->RealtimeNs();
  size_t done = 0;
  // Checks the stop signal per span: a backlog must not hold up SIGTERM.
  while (!queue_.empty() && queue_.top().due_ns <= now && !stop_.Notified()) {
    SpanRef span = queue_.top().span;
    queue_.pop();
    const auto t0 = std::chrono::steady_clock::now();
    SpanCorrelation c = correlator_->Correlate(*span);
    if (duration_ != nullptr) {
      duration_->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (aggregates_ != nullptr) aggregates_->Record(*span, c);
    ++done;
  }
  correlated_ += done;
  if (pending_gauge_ != nullptr) pending_gauge_->Set(static_cast<double>(queue_.size()));
  return done;
}

size_t CorrelationWorker::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

uint64_t CorrelationWorker::correlated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return correlated_;
}

}  // namespace fabricscope
