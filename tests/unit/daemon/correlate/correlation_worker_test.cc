#include "daemon/correlate/correlation_worker.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "daemon/correlate/span_aggregates.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace correlation_worker_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

// label-set string -> value for one family in the self-metrics registry.
std::map<std::string, double> Values(MetricsRegistry& m, const std::string& family) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& f : m.registry()->Collect()) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& cm : f.metric) {
      std::string key;
      for (const auto& l : cm.label) {
        // The workload labels of the span aggregates, empty for these spans.
        if ((l.name == "service" || l.name == "model") && l.value.empty()) continue;
        absl::StrAppend(&key, l.name, "=", l.value, ",");
      }
      out[key] = f.type == prometheus::MetricType::Histogram
                     ? static_cast<double>(cm.histogram.sample_count)
                     : cm.counter.value;
    }
  }
  return out;
}

class WorkerTest : public ::testing::Test {
 protected:
  WorkerTest() : clock_(t0_ + 60 * kSec) {  // well after the spans below end
    SeriesKey k{"ethtool", "rx_prio3_pause_duration", "", 0, "eth0"};
    pause_ = store_.Register(k, *MapCounter(k));
    // Paused for [t0+10s, t0+10.2s); 100 ms polls over [t0, t0+30s].
    for (int64_t ts = t0_; ts <= t0_ + 30 * kSec; ts += 100 * kMs) {
      const int64_t from = t0_ + 10 * kSec, to = from + 200 * kMs;
      store_.Append(pause_, ts, static_cast<uint64_t>((std::clamp(ts, from, to) - from) / 1000));
    }
  }

  Span MakeSpan(const std::string& name, int64_t start, int64_t end, uint8_t id) {
    Span s;
    s.trace_id[0] = 1;
    s.span_id[0] = id;
    s.name = name;
    s.start_unix_nano = start;
    s.end_unix_nano = end;
    return s;
  }

  const int64_t t0_ = 1'700'000'000 * kSec;
  FakeClock clock_;
  Store store_;
  PortInventory ports_;
  SeriesId pause_;
  MetricsRegistry metrics_;
};

TEST_F(WorkerTest, CorrelatesDueSpansOnceAndRecordsAggregates) {
  SpanStore spans({}, &clock_, nullptr);
  Correlator correlator(&store_, &ports_, {},
                        StallPolicy({{"decode_step", absl::Milliseconds(150)}}));
  SpanAggregates aggregates(&metrics_, 100);
  CorrelationWorkerOptions o;
  o.settle_delay = absl::Seconds(2);
  CorrelationWorker worker(&spans, &correlator, &aggregates, &clock_, &metrics_, o);

  // A stalled decode step over the pause burst, a quiet one, and one that
  // ends after "now" (not due yet).
  spans.Add(MakeSpan("decode_step", t0_ + 10 * kSec, t0_ + 10200 * kMs, 1));
  spans.Add(MakeSpan("decode_step", t0_ + 20 * kSec, t0_ + 20100 * kMs, 2));
  spans.Add(MakeSpan("decode_step", t0_ + 59 * kSec, t0_ + 59500 * kMs, 3));
  EXPECT_EQ(worker.RunOnce(), 2u);
  EXPECT_EQ(worker.pending(), 1u);
  EXPECT_EQ(worker.RunOnce(), 0u);  // nothing new, nothing due

  auto spans_total = Values(metrics_, "fabricscope_spans_total");
  EXPECT_EQ(spans_total["name=decode_step,verdict=fabric,"], 1);
  EXPECT_EQ(spans_total["name=decode_step,verdict=clean,"], 1);
  auto stalls = Values(metrics_, "fabricscope_stalls_total");
  EXPECT_EQ(stalls["name=decode_step,verdict=fabric,"], 1);
  EXPECT_EQ(stalls["name=decode_step,verdict=clean,"], 0);  // present, never stalled
  auto signals = Values(metrics_, "fabricscope_stall_signals_total");
  EXPECT_EQ(signals["name=decode_step,signal=pfc_pause_seconds,"], 1);
  auto hist = Values(metrics_, "fabricscope_stall_duration_seconds");
  EXPECT_EQ(hist["name=decode_step,verdict=fabric,"], 1);

  // The third span becomes due 2 s after its end.
  clock_.SetRealtimeNs(t0_ + 61 * kSec);
  EXPECT_EQ(worker.RunOnce(), 0u);
  clock_.SetRealtimeNs(t0_ + 61500 * kMs);
  EXPECT_EQ(worker.RunOnce(), 1u);
  EXPECT_EQ(worker.correlated(), 3u);
  EXPECT_EQ(Values(metrics_, "fabricscope_correlation_duration_seconds")[""], 3);
}

// The span aggregates follow the blind rule: a stall during which only a
// saturated PMA port_xmit_wait is odd counts as clean, one during the pause
// burst as fabric (attributed to the pause, not to the blind counter).
TEST_F(WorkerTest, ASpanWhoseOnlyOddSeriesIsBlindCountsAsClean) {
  ports_.Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "100 Gb/sec", true});
  SeriesKey k{"counters", "port_xmit_wait", "mlx5_0", 1, ""};
  const SeriesId xmit = store_.Register(k, *MapCounter(k));
  for (int64_t ts = t0_; ts <= t0_ + 30 * kSec; ts += 200 * kMs) {
    store_.Append(xmit, ts, 4294967295u);
  }
  SpanStore spans({}, &clock_, nullptr);
  Correlator correlator(&store_, &ports_, {},
                        StallPolicy({{"decode_step", absl::Milliseconds(150)}}));
  SpanAggregates aggregates(&metrics_, 100);
  CorrelationWorkerOptions o;
  o.settle_delay = absl::Seconds(2);
  CorrelationWorker worker(&spans, &correlator, &aggregates, &clock_, &metrics_, o);
  spans.Add(MakeSpan("decode_step", t0_ + 10 * kSec, t0_ + 10200 * kMs, 1));
  spans.Add(MakeSpan("decode_step", t0_ + 20 * kSec, t0_ + 20200 * kMs, 2));
  EXPECT_EQ(worker.RunOnce(), 2u);
  auto stalls = Values(metrics_, "fabricscope_stalls_total");
  EXPECT_EQ(stalls["name=decode_step,verdict=clean,"], 1);
  EXPECT_EQ(stalls["name=decode_step,verdict=fabric,"], 1);
  // Present, zero: every stall series of a name exists from its first span.
  ASSERT_EQ(stalls.count("name=decode_step,verdict=unknown,"), 1u);
  EXPECT_EQ(stalls["name=decode_step,verdict=unknown,"], 0);
  auto signals = Values(metrics_, "fabricscope_stall_signals_total");
  EXPECT_EQ(signals["name=decode_step,signal=pfc_pause_seconds,"], 1);
  EXPECT_EQ(signals.count("name=decode_step,signal=ib_port_xmit_wait_ticks,"), 0u);
}

TEST_F(WorkerTest, QueueIsBoundedAndNothingReadIsDropped) {
  SpanStore spans({}, &clock_, nullptr);
  Correlator correlator(&store_, &ports_, {}, {});
  SpanAggregates aggregates(&metrics_, 100);
  CorrelationWorkerOptions o;
  o.queue_limit = 3;
  o.settle_delay = absl::Seconds(1);
  CorrelationWorker worker(&spans, &correlator, &aggregates, &clock_, &metrics_, o);
  // Ten spans that are not due yet.
  for (uint8_t i = 0; i < 10; ++i) {
    spans.Add(MakeSpan("kv_transfer", t0_ + 59 * kSec, t0_ + 59500 * kMs + i * kMs, i));
  }
  EXPECT_EQ(worker.RunOnce(), 0u);
  EXPECT_EQ(worker.pending(), 3u);
  clock_.SetRealtimeNs(t0_ + 70 * kSec);
  size_t total = 0;
  for (int i = 0; i < 10 && total < 10; ++i) total += worker.RunOnce();
  EXPECT_EQ(total, 10u);
  EXPECT_EQ(Values(metrics_, "fabricscope_spans_total")["name=kv_transfer,verdict=unknown,"], 10);
}

TEST_F(WorkerTest, SpanNameCardinalityIsBounded) {
  SpanAggregates aggregates(&metrics_, 2);
  EXPECT_EQ(aggregates.NameLabel("a"), "a");
  EXPECT_EQ(aggregates.NameLabel("b"), "b");
  EXPECT_EQ(aggregates.NameLabel("c"), "other");
  EXPECT_EQ(aggregates.NameLabel("a"), "a");
  SpanCorrelation c;
  c.verdict = Verdict::kClean;
  Span s;
  for (const char* n : {"x", "y", "a", "z"}) {
    s.name = n;
    aggregates.Record(s, c);
  }
  auto v = Values(metrics_, "fabricscope_spans_total");
  EXPECT_EQ(v["name=other,verdict=clean,"], 3);
  EXPECT_EQ(v["name=a,verdict=clean,"], 1);
  EXPECT_EQ(v.size(), 2u);
}

TEST_F(WorkerTest, ThreadRunsAndStops) {
  SpanStore spans({}, &clock_, nullptr);
  Correlator correlator(&store_, &ports_, {}, {});
  SpanAggregates aggregates(&metrics_, 100);
  CorrelationWorkerOptions o;
  o.settle_delay = absl::ZeroDuration();
  o.poll_period = absl::Milliseconds(5);
  CorrelationWorker worker(&spans, &correlator, &aggregates, RealClock::Get(), &metrics_, o);
  worker.Start();
  spans.Add(MakeSpan("decode_step", t0_ + 10 * kSec, t0_ + 10200 * kMs, 1));
  for (int i = 0; i < 2000 && worker.correlated() < 1; ++i) absl::SleepFor(absl::Milliseconds(5));
  worker.Stop();
  EXPECT_EQ(worker.correlated(), 1u);
}

}  // namespace
}  // namespace correlation_worker_test
}  // namespace fabricscope
