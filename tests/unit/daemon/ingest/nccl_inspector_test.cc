// NCCL Inspector ingest (daemon/ingest/nccl_inspector.h): records to spans,
// and tailing a dump directory as the plugin writes it. The test files are
// written from the format as NCCL's Inspector README describes it (one JSON
// object per collective per communicator: header, metadata, coll_perf).
#include "daemon/ingest/nccl_inspector.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace nccl_inspector_test {
namespace {

constexpr int64_t kNowUs = 1'780'000'000'000'000;  // unix microseconds

std::string Record(int sn, int64_t dump_us, int pid = 4242, bool verbose = false,
                   const char* coll = "AllReduce") {
  std::string perf = absl::StrCat(
      R"("coll_perf": {"coll": ")", coll, R"(", "coll_sn": )", sn,
      R"(, "coll_msg_size_bytes": 4194304, "coll_exec_time_us": 250, "coll_timing_source": ")",
      verbose ? "kernel_gpu" : "kernel_cpu",
      R"(", "coll_algobw_gbs": 16.77, "coll_busbw_gbs": 29.36)");
  if (verbose) {
    absl::StrAppend(&perf, R"(, "event_trace_ts": {"coll_start_ts": )", dump_us - 400,
                    R"(, "coll_stop_ts": )", dump_us - 390,
                    R"(, "kernel_events": [{"channel_id": 0, "kernel_start_ts": )", dump_us - 380,
                    R"(, "kernel_stop_ts": )", dump_us - 130, R"(, "kernel_record_ts": )",
                    dump_us - 130, R"(}, {"channel_id": 1, "kernel_start_ts": )", dump_us - 370,
                    R"(, "kernel_stop_ts": )", dump_us - 120, R"(}]})");
  }
  return absl::StrCat(
      R"({"header": {"id": "0x7f8c496ae9f661", "rank": 2, "n_ranks": 8, "nnodes": 1}, )",
      R"("metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", )",
      R"("rec_mechanism": "profiler_plugin", "dump_timestamp_us": )", dump_us,
      R"(, "hostname": "gpu-node-07", "pid": )", pid, "}, ", perf, "}}");
}

std::string Attr(const Span& s, const std::string& key) {
  for (const auto& [k, v] : s.attributes) {
    if (k == key) return v;
  }
  return "<absent>";
}

TEST(NcclInspectorRecord, EstimatedFromTheDumpTime) {
  Span s;
  std::string why;
  ASSERT_TRUE(NcclInspectorTailer::ParseRecord(Record(1407, kNowUs), &s, &why)) << why;
  EXPECT_EQ(s.kind, SpanKind::kCollective);
  EXPECT_EQ(s.name, "AllReduce");
  EXPECT_EQ(s.end_unix_nano, kNowUs * 1000);
  EXPECT_EQ(s.start_unix_nano, (kNowUs - 250) * 1000);
  EXPECT_EQ(s.pid, 4242u);
  EXPECT_EQ(Attr(s, "fabricscope.estimated"), "true");
  EXPECT_EQ(Attr(s, "nccl.bytes"), "4194304");
  EXPECT_EQ(Attr(s, "nccl.communicator"), "0x7f8c496ae9f661");
  EXPECT_EQ(Attr(s, "nccl.rank"), "2");
  EXPECT_EQ(Attr(s, "nccl.n_ranks"), "8");
  EXPECT_EQ(Attr(s, "nccl.busbw_gbs"), "29.36");
  EXPECT_EQ(Attr(s, "nccl.algbw_gbs"), "16.77");
  EXPECT_EQ(Attr(s, "process.pid"), "4242");
  EXPECT_EQ(Attr(s, "host.name"), "gpu-node-07");
  // Another rank's record of the same collective: the same trace, its own span.
  Span other;
  std::string r = Record(1407, kNowUs, 4343);
  r.replace(r.find(R"("rank": 2)"), 9, R"("rank": 3)");
  ASSERT_TRUE(NcclInspectorTailer::ParseRecord(r, &other, &why));
  EXPECT_EQ(other.trace_id, s.trace_id);
  EXPECT_NE(other.span_id, s.span_id);
}

TEST(NcclInspectorRecord, VerboseKernelTimestamps) {
  Span s;
  std::string why;
  ASSERT_TRUE(NcclInspectorTailer::ParseRecord(Record(7, kNowUs, 1, true), &s, &why)) << why;
  EXPECT_EQ(s.start_unix_nano, (kNowUs - 380) * 1000);  // the earliest kernel start
  EXPECT_EQ(s.end_unix_nano, (kNowUs - 120) * 1000);    // the latest kernel stop
  EXPECT_EQ(Attr(s, "fabricscope.estimated"), "<absent>");
  EXPECT_EQ(Attr(s, "nccl.timing_source"), "kernel_gpu");
}

TEST(NcclInspectorRecord, MalformedRecordsSayWhy) {
  Span s;
  std::string why;
  for (const std::string& bad :
       {std::string("{"), std::string(R"({"header": {}})"),
        Record(1, kNowUs).replace(Record(1, kNowUs).find("coll_exec_time_us"), 17, "x"),
        Record(1, 0).replace(Record(1, 0).find("coll_sn"), 7, "sn")}) {
    EXPECT_FALSE(NcclInspectorTailer::ParseRecord(bad, &s, &why)) << bad;
    EXPECT_FALSE(why.empty());
  }
  for (const char* field : {"coll_exec_time_us\": 250", "coll_sn\": 1,"}) {
    std::string huge = Record(1, kNowUs);
    const std::string f(field);
    huge.replace(huge.find(f), f.size(),
                 f.substr(0, f.find(':') + 1) + " 1e300" + (f.back() == ',' ? "," : ""));
    EXPECT_FALSE(NcclInspectorTailer::ParseRecord(huge, &s, &why)) << huge;
    EXPECT_NE(why.find("out of range"), std::string::npos) << why;
  }
  std::string no_time = Record(1, kNowUs);
  no_time.replace(no_time.find("dump_timestamp_us"), 17, "dump_time");
  EXPECT_FALSE(NcclInspectorTailer::ParseRecord(no_time, &s, &why));
}

class NcclInspectorTailerTest : public ::testing::Test {
 protected:
  NcclInspectorTailerTest() {
    dir_ = absl::StrCat(::testing::TempDir(), "nccl_inspector_test.", getpid(), ".",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/dump");
    store_ = std::make_unique<SpanStore>(SpanStoreOptions{}, &clock_, &metrics_);
    auto c = SpanKindClassifier::Create({});
    ingester_ = std::make_unique<SpanIngester>(IngestLimits{}, *std::move(c), store_.get(), &clock_,
                                               &metrics_);
  }
  ~NcclInspectorTailerTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<NcclInspectorTailer> Tailer() {
    NcclInspectorOptions o;
    o.dir = dir_ + "/dump";
    o.offsets_file = dir_ + "/offsets";
    o.proc_root = dir_ + "/proc";
    return std::make_unique<NcclInspectorTailer>(o, ingester_.get(), &clock_, &metrics_);
  }
  void Append(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/dump/" + name, std::ios::app) << text;
  }
  uint64_t Stored() const { return store_->Stats().added_total; }

  std::string dir_;
  FakeClock clock_{kNowUs * 1000 + 1'000'000'000};
  MetricsRegistry metrics_;
  std::unique_ptr<SpanStore> store_;
  std::unique_ptr<SpanIngester> ingester_;
};

TEST_F(NcclInspectorTailerTest, TailsLinesPrettyObjectsPartialsAndGarbage) {
  auto t = Tailer();
  const std::string a = "gpu-node-07-pid4242.log";
  const std::string r3 = Record(3, kNowUs - 1000);
  Append(a, Record(1, kNowUs - 3000) + "\n" + Record(2, kNowUs - 2000) + "\n" +
                r3.substr(0, r3.size() / 2));
  EXPECT_EQ(t->PollOnce(), 2u);
  EXPECT_EQ(Stored(), 2u);
  Append(a, r3.substr(r3.size() / 2) + "\nnot json at all\n");
  EXPECT_EQ(t->PollOnce(), 1u);  // the partial one, now whole; the garbage line skipped
  EXPECT_EQ(t->stats().malformed, 1u);
  // Pretty-printed over several lines, as the README shows it.
  Append(a,
         "{\n  \"header\": {\n    \"id\": \"0x1\",\n    \"rank\": 0,\n    \"n_ranks\": 2,\n"
         "    \"nnodes\": 1\n  },\n  \"metadata\": {\n    \"dump_timestamp_us\": " +
             absl::StrCat(kNowUs) +
             ",\n    \"pid\": 7\n  },\n  \"coll_perf\": {\n    \"coll\": \"AllGather\",\n"
             "    \"coll_sn\": 1,\n    \"coll_msg_size_bytes\": 1024,\n"
             "    \"coll_exec_time_us\": 10\n  }\n}\n");
  EXPECT_EQ(t->PollOnce(), 1u);
  EXPECT_EQ(Stored(), 4u);
  // A second process, and nothing new in the first.
  Append("gpu-node-07-pid4343.log", Record(1, kNowUs, 4343) + "\n");
  EXPECT_EQ(t->PollOnce(), 1u);
  EXPECT_EQ(t->PollOnce(), 0u);
}

TEST_F(NcclInspectorTailerTest, TruncationRotationDeletionAndRestart) {
  const std::string a = "n-pid1.log";
  {
    auto t = Tailer();
    Append(a, Record(1, kNowUs - 5000, 1) + "\n" + Record(2, kNowUs - 4000, 1) + "\n");
    EXPECT_EQ(t->PollOnce(), 2u);
    // Truncated and written again: read from the start.
    std::ofstream(dir_ + "/dump/" + a, std::ios::trunc) << Record(3, kNowUs - 3000, 1) << "\n";
    EXPECT_EQ(t->PollOnce(), 1u);
    EXPECT_EQ(t->stats().restarts, 1u);
    // Rotated: a new file under the name (bigger than the offset).
    const std::string tmp = dir_ + "/dump/.new";
    std::ofstream(tmp) << Record(4, kNowUs - 2000, 1) << "\n"
                       << Record(5, kNowUs - 1500, 1) << "\n"
                       << Record(6, kNowUs - 1400, 1) << "\n";
    std::rename(tmp.c_str(), (dir_ + "/dump/" + a).c_str());
    EXPECT_EQ(t->PollOnce(), 3u);
    EXPECT_EQ(t->stats().restarts, 2u);
    Append(a, Record(7, kNowUs - 1000, 1).substr(0, 50));  // a partial record at the stop
  }
  // Restarted: the offsets were kept; only what is new is read, the partial
  // record from its start.
  auto t = Tailer();
  EXPECT_EQ(t->PollOnce(), 0u);
  Append(a, Record(7, kNowUs - 1000, 1).substr(50) + "\n");
  EXPECT_EQ(t->PollOnce(), 1u);
  EXPECT_EQ(Stored(), 7u);
  std::filesystem::remove(dir_ + "/dump/" + a);
  EXPECT_EQ(t->PollOnce(), 0u);
  std::ifstream offsets(dir_ + "/offsets");
  std::string rest((std::istreambuf_iterator<char>(offsets)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rest, "");  // the deleted file is forgotten
}

TEST_F(NcclInspectorTailerTest, OversizedObjectIsSkippedAndTheReaderResyncs) {
  auto t = Tailer();
  std::string huge = R"({"header": {"id": ")" + std::string(100 << 10, 'x');
  Append("n-pid9.log", huge + "\n" + Record(1, kNowUs, 9) + "\n");
  EXPECT_EQ(t->PollOnce(), 1u);
  EXPECT_EQ(t->stats().malformed, 1u);
}

TEST_F(NcclInspectorTailerTest, ProcessGpuFromItsOpenDeviceNode) {
  // /proc/4242/fd/7 -> /dev/nvidia2; GPU 0000:1b:00.0 has device minor 2.
  std::filesystem::create_directories(dir_ + "/proc/4242/fd");
  std::filesystem::create_symlink("/dev/nvidia2", dir_ + "/proc/4242/fd/7");
  std::filesystem::create_symlink("/dev/nvidiactl", dir_ + "/proc/4242/fd/8");
  std::filesystem::create_symlink("/dev/infiniband/uverbs0", dir_ + "/proc/4242/fd/9");
  for (const auto& [bus, minor] : {std::pair{"0000:1b:00.0", 2}, std::pair{"0000:43:00.0", 3}}) {
    std::filesystem::create_directories(dir_ + "/proc/driver/nvidia/gpus/" + bus);
    std::ofstream(dir_ + "/proc/driver/nvidia/gpus/" + bus + "/information")
        << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-1234\n"
        << "Video BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
        << "Device Minor: \t " << minor << "\nBus Location: \t " << bus << "\n";
  }
  auto t = Tailer();
  Append("n-pid4242.log", Record(1, kNowUs, 4242) + "\n" + Record(2, kNowUs, 5555) + "\n");
  EXPECT_EQ(t->PollOnce(), 2u);
  const auto spans = store_->ReadFrom(0, 10).spans;
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]->gpu, "0000:1b:00.0");
  EXPECT_EQ(spans[1]->gpu, "");  // a process not under /proc: unknown
}

}  // namespace
}  // namespace nccl_inspector_test
}  // namespace fabricscope
