// Scrape render time of the store's families (raw counter families, the
// sub-second aggregate families, store self-metrics) for 10k and 50k series.
// One scrape per iteration, one core.
//   BM_Scrape/N              WriteStoreFamilies into the exposition writer,
//                            text 0.0.4 (what /metrics serves by default)
//   BM_ScrapeOpenMetrics/N   the same in OpenMetrics 1.0.0
//   BM_ScrapeGzip/N          text + gzip (zlib level 1; Prometheus sends
//                            Accept-Encoding: gzip)
//   BM_ScrapeViaFamilies/N   RenderStoreFamilies (a prometheus-cpp
//                            ClientMetric per sample) + the writer, text: the
//                            scrape path before WriteStoreFamilies
//   BM_ScrapePrometheusCpp/N RenderStoreFamilies + prometheus-cpp's
//                            TextSerializer (the scrape path before the writer)
//   BM_RenderOnly/N          RenderStoreFamilies alone
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "exporters/exposition.h"
#include "exporters/metrics_profile.h"
#include "exporters/prometheus_exporter.h"
#include "prometheus/text_serializer.h"
#include "store/store.h"

namespace fabricscope {
namespace {

// Raw names that the signal table maps (both sources of an RDMA port).
constexpr const char* kCounters[] = {"port_rcv_data",
                                     "port_xmit_data",
                                     "port_rcv_packets",
                                     "port_xmit_packets",
                                     "unicast_rcv_packets",
                                     "unicast_xmit_packets",
                                     "multicast_rcv_packets",
                                     "multicast_xmit_packets",
                                     "port_rcv_errors",
                                     "port_xmit_discards",
                                     "symbol_error",
                                     "link_downed",
                                     "port_xmit_wait",
                                     "link_error_recovery",
                                     "port_rcv_remote_physical_errors",
                                     "excessive_buffer_overrun_errors"};
constexpr const char* kHwCounters[] = {"np_ecn_marked_roce_packets",
                                       "np_cnp_sent",
                                       "rp_cnp_handled",
                                       "rp_cnp_ignored",
                                       "out_of_sequence",
                                       "packet_seq_err",
                                       "local_ack_timeout_err",
                                       "duplicate_request",
                                       "roce_adp_retrans",
                                       "rx_read_requests",
                                       "rx_write_requests",
                                       "out_of_buffer",
                                       "req_cqe_error",
                                       "resp_cqe_error",
                                       "roce_slow_restart",
                                       "rnr_nak_retry_err"};

struct Built {
  std::unique_ptr<Store> store;
  size_t series = 0;
};

Built Build(size_t target) {
  Built b;
  b.store = std::make_unique<Store>();
  std::vector<std::pair<SeriesKey, Signal>> port;
  for (const char* n : kCounters) {
    SeriesKey k{"counters", n, "", 1, ""};
    if (auto s = MapCounter(k)) port.emplace_back(k, *s);
  }
  for (const char* n : kHwCounters) {
    SeriesKey k{"hw_counters", n, "", 1, ""};
    if (auto s = MapCounter(k)) port.emplace_back(k, *s);
  }
  std::vector<SeriesId> ids;
  for (int dev = 0; ids.size() < target; ++dev) {
    for (const auto& [key, sig] : port) {
      if (ids.size() >= target) break;
      SeriesKey k = key;
      k.device = "mlx5_" + std::to_string(dev);
      Signal s = *MapCounter(k);  // label values follow the device
      ids.push_back(b.store->Register(k, s));
    }
  }
  // A few samples each, at the current time, so that peaks are fresh.
  const int64_t now = absl::ToUnixNanos(absl::Now());
  for (int t = 0; t < 3; ++t) {
    for (SeriesId id : ids) b.store->Append(id, now - (3 - t) * 10'000'000, 1000 * t + id);
  }
  b.series = ids.size();
  return b;
}

enum class Out { kText, kOpenMetrics, kGzip, kViaFamilies, kPrometheusCpp };

void RunScrape(benchmark::State& state, Out mode) {
  Built b = Build(static_cast<size_t>(state.range(0)));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text;
    if (mode == Out::kPrometheusCpp) {
      text = prometheus::TextSerializer().Serialize(RenderStoreFamilies(*b.store, nullptr));
    } else if (mode == Out::kViaFamilies) {
      WriteExposition(RenderStoreFamilies(*b.store, nullptr), {}, ExpositionFormat::kText, &text);
    } else {
      ExpositionWriter writer(
          mode == Out::kOpenMetrics ? ExpositionFormat::kOpenMetrics : ExpositionFormat::kText, {},
          &text);
      WriteStoreFamilies(*b.store, nullptr, absl::ToUnixNanos(absl::Now()), MetricsProfile::kFull,
                         &writer);
      writer.Finish();
      if (mode == Out::kGzip) text = Gzip(text);
    }
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  size_t lines = 0;
  for (const auto& fam : RenderStoreFamilies(*b.store, nullptr)) lines += fam.metric.size();
  state.counters["series"] = static_cast<double>(b.series);
  state.counters["samples_out"] = static_cast<double>(lines);
  state.counters["bytes_out"] = static_cast<double>(bytes);
}

void BM_Scrape(benchmark::State& state) { RunScrape(state, Out::kText); }
void BM_ScrapeOpenMetrics(benchmark::State& state) { RunScrape(state, Out::kOpenMetrics); }
void BM_ScrapeGzip(benchmark::State& state) { RunScrape(state, Out::kGzip); }
void BM_ScrapeViaFamilies(benchmark::State& state) { RunScrape(state, Out::kViaFamilies); }
void BM_ScrapePrometheusCpp(benchmark::State& state) { RunScrape(state, Out::kPrometheusCpp); }
BENCHMARK(BM_Scrape)->Arg(10'000)->Arg(50'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScrapeOpenMetrics)->Arg(10'000)->Arg(50'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScrapeGzip)->Arg(10'000)->Arg(50'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScrapeViaFamilies)->Arg(10'000)->Arg(50'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ScrapePrometheusCpp)->Arg(10'000)->Arg(50'000)->Unit(benchmark::kMillisecond);

// The render alone (no text serialisation), to see where the time goes.
void BM_RenderOnly(benchmark::State& state) {
  Built b = Build(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    std::vector<prometheus::MetricFamily> f = RenderStoreFamilies(*b.store, nullptr);
    benchmark::DoNotOptimize(f.data());
  }
}
BENCHMARK(BM_RenderOnly)->Arg(10'000)->Arg(50'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fabricscope

BENCHMARK_MAIN();
