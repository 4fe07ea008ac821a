// Fuzz target: NCCL Inspector dump files (daemon/ingest/nccl_inspector.h),
// written by another process into a directory the daemon tails. The input is
// a dump file's bytes, written in two parts (a partial object between polls),
// read by a tailer through the whole span path (object splitting, the record
// parser, validation, the stall learner, the span store). Invariants: every
// byte written is read, every object is a span or counted malformed, and
// every span stored is a collective inside what validation allows.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/metrics.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/ingest/nccl_inspector.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = absl::StrCat("/tmp/fuzz_nccl_inspector.", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/host-pid1.log";
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // A clock at the end of 2026: records of a plausible time are accepted.
  fabricscope::FakeClock clock(1'798'000'000'000'000'000);
  fabricscope::MetricsRegistry metrics;
  fabricscope::SpanStore store({}, &clock, nullptr);
  fabricscope::StallLearner learner(fabricscope::StallLearnerOptions{}, nullptr);
  auto classifier = fabricscope::SpanKindClassifier::Create({});
  FUZZ_CHECK(classifier.ok());
  fabricscope::SpanIngester ingester(fabricscope::IngestLimits{}, *std::move(classifier), &store,
                                     &clock, &metrics);
  ingester.SetStallLearner(&learner);
  fabricscope::NcclInspectorOptions options;
  options.dir = dir;
  options.proc_root = dir + "/no-proc";
  fabricscope::NcclInspectorTailer tailer(options, &ingester, &clock, &metrics);
  const size_t half = size / 2;
  std::ofstream(file, std::ios::binary) << bytes.substr(0, half);
  tailer.PollOnce();
  std::ofstream(file, std::ios::binary | std::ios::app) << bytes.substr(half);
  tailer.PollOnce();
  const fabricscope::NcclInspectorStats st = tailer.stats();
  FUZZ_CHECK(st.bytes == size);
  FUZZ_CHECK(st.spans == store.Stats().added_total);
  for (const auto& s : store.ReadFrom(0, 1 << 20).spans) {
    FUZZ_CHECK(s->kind == fabricscope::SpanKind::kCollective);
    FUZZ_CHECK(!s->name.empty());
    FUZZ_CHECK(s->end_unix_nano >= s->start_unix_nano);
    FUZZ_CHECK(s->judgement.judged);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
