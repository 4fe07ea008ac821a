// NCCL Inspector ingest throughput (issue #33 item 3: sustain 10k records/s
// with bounded CPU): the tailer reading a dump file that grows by RATE
// records a second, for SECONDS, through the daemon's whole span path
// (parse, validation, the stall learner, the span store). Plain C++; prints
// records read, wall time, CPU time of the process, and CPU per record.
//
//   nccl_inspector_bench [RATE] [SECONDS]     (default 10000 and 10)
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/ingest/nccl_inspector.h"

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::string Record(uint64_t sn, int64_t now_us) {
  return absl::StrCat(
      R"({"header": {"id": "0x7f8c496ae9f661", "comm_name": "tp0", "rank": 2, "n_ranks": 8, )",
      R"("nnodes": 1}, "metadata": {"inspector_output_format_version": "v4.0", )",
      R"("dump_timestamp_us": )", now_us, R"(, "hostname": "node", "pid": 4242}, )",
      R"("coll_perf": {"coll": "AllReduce", "coll_sn": )", sn, R"(, "coll_msg_size_bytes": )",
      1u << (20 + sn % 4), R"(, "coll_exec_time_us": 250, "coll_timing_source": "kernel_gpu", )",
      R"("coll_algobw_gbs": 16.7, "coll_busbw_gbs": 29.3, "event_trace_ts": {"kernel_events": )",
      R"([{"channel_id": 0, "kernel_start_ts": )", now_us - 300, R"(, "kernel_stop_ts": )",
      now_us - 50, "}]}}}\n");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fabricscope;
  const int rate = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int seconds = argc > 2 ? std::atoi(argv[2]) : 10;
  const std::string dir = absl::StrCat("/tmp/nccl_inspector_bench.", getpid());
  std::filesystem::create_directories(dir);
  RealClock* clock = RealClock::Get();
  MetricsRegistry metrics;
  SpanStore store(SpanStoreOptions{}, clock, &metrics);
  StallLearner learner(StallLearnerOptions{}, &metrics);
  auto classifier = SpanKindClassifier::Create({});
  SpanIngester ingester(IngestLimits{}, *std::move(classifier), &store, clock, &metrics);
  ingester.SetStallLearner(&learner);
  NcclInspectorOptions options;
  options.dir = dir;
  NcclInspectorTailer tailer(options, &ingester, clock, &metrics);
  tailer.Start();

  // The writer: RATE records a second in 10 ms slices, as the plugin's dump
  // thread appends them.
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sn = 0;
  {
    std::ofstream out(dir + "/node-pid4242.log", std::ios::app);
    for (int slice = 0; slice < seconds * 100; ++slice) {
      const int64_t now_us = clock->RealtimeNs() / 1000;
      std::string batch;
      for (int i = 0; i < rate / 100; ++i) batch += Record(++sn, now_us);
      out << batch << std::flush;
      std::this_thread::sleep_until(t0 + std::chrono::milliseconds(10 * (slice + 1)));
    }
  }
  // Until everything written was read.
  for (int i = 0; i < 500 && tailer.stats().spans + tailer.stats().rejected < sn; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tailer.Stop();
  const double cpu = CpuSeconds() - cpu0;
  const NcclInspectorStats st = tailer.stats();
  std::printf(
      "written %llu records in %.1f s (%d/s); read %llu spans, %llu rejected, %llu "
      "malformed, %.1f MiB\n",
      static_cast<unsigned long long>(sn), wall, rate, static_cast<unsigned long long>(st.spans),
      static_cast<unsigned long long>(st.rejected), static_cast<unsigned long long>(st.malformed),
      st.bytes / 1048576.0);
  std::printf(
      "process CPU %.2f s over %.1f s: %.1f %% of a core, %.1f us per record (writer "
      "included)\n",
      cpu, wall, 100 * cpu / wall, 1e6 * cpu / static_cast<double>(sn));
  std::filesystem::remove_all(dir);
  return st.spans == sn ? 0 : 1;
}
