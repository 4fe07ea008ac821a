// NCCL Inspector ingest (--nccl-inspector-dir): collectives as spans, from
// the dump files NCCL's Inspector profiler plugin writes (NCCL >= 2.28,
// NCCL_PROFILER_PLUGIN=.../libnccl-profiler-inspector.so,
// NCCL_INSPECTOR_ENABLE=1, NCCL_INSPECTOR_DUMP_DIR=DIR).
//
// The files. One per process, DIR/<hostname>-pid<pid>.log, growing: a JSON
// object per collective per communicator, written one a line or
// pretty-printed over several (both are read: objects are delimited by their
// braces, not by newlines):
//   {"header":   {"id": "0x7f8c496ae9f661", "comm_name": ..., "rank": 2,
//                 "n_ranks": 8, "nnodes": 1},
//    "metadata": {"inspector_output_format_version": "v4.0",
//                 "dump_timestamp_us": 1748030377748202, "hostname": ...,
//                 "pid": 1639453},
//    "coll_perf": {"coll": "AllReduce", "coll_sn": 1407,
//                  "coll_msg_size_bytes": 17179869184,
//                  "coll_exec_time_us": 61974, "coll_timing_source": ...,
//                  "coll_algobw_gbs": 277.2, "coll_busbw_gbs": 485.1,
//                  "event_trace_ts": {"kernel_events": [{"kernel_start_ts":
//                  ..., "kernel_stop_ts": ...}, ...]}}}   (verbose only)
// or "p2p_perf" in place of "coll_perf" (the same fields, and the peer).
//
// Each record becomes a span: kind collective, name the collective ("p2p_perf"
// records: their op, else "p2p"), start and end from the kernel timestamps
// (the earliest kernel start, the latest kernel stop; unix microseconds) when
// the dump is verbose, otherwise estimated as [dump time - exec time, dump
// time] and marked fabricscope.estimated=true (a dump interval of -1 writes
// only at communicator teardown: such estimates are far off; the docs say so).
// Attributes: nccl.communicator (comm_name, else the id), nccl.comm_id,
// nccl.rank, nccl.n_ranks, nccl.nnodes, nccl.bytes, nccl.busbw_gbs,
// nccl.algbw_gbs, nccl.coll_sn, nccl.timing_source, nccl.peer (p2p),
// process.pid, host.name and service.name=nccl. Span::pid is the record's pid
// (the per-process QP scope applies), and Span::gpu the PCI bus id of the GPU
// the process has open when it can be known without NVML: its open
// /dev/nvidiaN (under PROC/<pid>/fd) whose minor N is the "Device Minor" of a
// PROC/driver/nvidia/gpus/<bus id>/information (the GPU scope then applies).
// The trace and span ids are derived from (communicator id, rank, coll_sn,
// pid): stable, so a record read twice is the same span.
//
// Tailing, every poll_period: the directory's regular files (at most
// max_files, the rest counted), each read from its offset (at most
// max_read_per_file bytes a poll, max_read_per_poll over all files, so a
// large backlog is consumed over several polls); a file whose inode changed
// (rotated) or that shrank below its offset (truncated) is read again from
// its start (counted); a deleted file is forgotten; the bytes after the last
// complete object wait for the next poll (a partial last line); an object
// longer than max_object_bytes, or one that does not parse or lacks the
// fields above, is counted as malformed and skipped (the reader resyncs at the
// next line that starts with '{'). The offsets are saved to `offsets_file`
// (--state-dir) every poll that moved one and read at start, so a restart
// neither re-reads nor loses records.
//
// Spans go through SpanIngester::IngestOwn (validation, the stall learner,
// the span store) as protocol="nccl_inspector".
//
// Metrics: fabricscope_nccl_inspector_records_total{result} (span, malformed,
// rejected), fabricscope_nccl_inspector_bytes_read_total,
// fabricscope_nccl_inspector_files (files tailed now),
// fabricscope_nccl_inspector_restarts_total{reason} (rotated, truncated),
// fabricscope_nccl_inspector_files_skipped_total (beyond max_files).
//
// Threads: Start() runs one thread; PollOnce() does one poll on the calling
// thread (tests). Not thread-safe otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "daemon/ingest/span_ingester.h"

namespace fabricscope {

struct NcclInspectorOptions {
  std::string dir;           // --nccl-inspector-dir
  std::string offsets_file;  // "" : offsets not kept across restarts
  std::string proc_root = "/proc";
  absl::Duration poll_period = absl::Milliseconds(200);
  size_t max_files = 1024;
  uint64_t max_read_per_file = 4ull << 20;
  uint64_t max_read_per_poll = 16ull << 20;
  size_t max_object_bytes = 64 << 10;
};

struct NcclInspectorStats {
  uint64_t spans = 0;      // records that became spans (accepted or rejected)
  uint64_t malformed = 0;  // objects skipped
  uint64_t rejected = 0;   // spans the ingest validation rejected
  uint64_t bytes = 0;
  uint64_t restarts = 0;  // rotations and truncations
};

class NcclInspectorTailer {
 public:
  // `ingester` and `metrics` are borrowed and must outlive the tailer.
  NcclInspectorTailer(NcclInspectorOptions options, SpanIngester* ingester, Clock* clock,
                      MetricsRegistry* metrics);
  ~NcclInspectorTailer();

  void Start();
  void Stop();
  // One poll; returns the spans it produced.
  size_t PollOnce();
  NcclInspectorStats stats() const { return stats_; }

  // Parses one record object into a span (exposed for tests and the fuzz
  // target); false when it is malformed, with the reason.
  static bool ParseRecord(absl::string_view object, Span* span, std::string* why);

 private:
  struct File {
    uint64_t inode = 0;
    uint64_t offset = 0;
    std::string pending;  // bytes read after the last complete object
    bool seen = false;    // in the current listing
  };
  // Reads `file`'s new bytes (bounded by `budget`), appending spans.
  void ReadFile(const std::string& name, File* file, uint64_t* budget, std::vector<Span>* spans);
  // Splits `file->pending` into objects, parsing each into `spans`.
  void TakeObjects(File* file, std::vector<Span>* spans);
  void LoadOffsets();
  void SaveOffsets() const;
  // The GPU bus id of a process, from its open /dev/nvidiaN ("" if unknown).
  std::string GpuOf(uint32_t pid);

  const NcclInspectorOptions options_;
  SpanIngester* const ingester_;
  Clock* const clock_;
  std::map<std::string, File> files_;                              // by file name
  std::map<uint32_t, std::pair<int64_t, std::string>> gpu_cache_;  // pid -> (when, bus id)
  NcclInspectorStats stats_;
  prometheus::Counter* spans_ = nullptr;
  prometheus::Counter* malformed_ = nullptr;
  prometheus::Counter* rejected_ = nullptr;
  prometheus::Counter* bytes_ = nullptr;
  prometheus::Counter* rotated_ = nullptr;
  prometheus::Counter* truncated_ = nullptr;
  prometheus::Counter* skipped_ = nullptr;
  prometheus::Gauge* files_gauge_ = nullptr;
  LogRateLimiter log_limiter_{absl::Minutes(1)};
  StopSignal stop_;
  std::thread thread_;
};

}  // namespace fabricscope
