// The recording header (daemon/recording/recording_header.h), the daemon's
// stall judgement on span lines, the options a header carries as the offline
// analysis applies them, and the feeder that takes ports and topology from a
// header and judgements from span lines.
#include "daemon/recording/recording_header.h"

#include <string>
#include <utility>
#include <vector>

#include "daemon/recording/recording.h"
#include "daemon/recording/replay.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace {

RecordingHeader SampleHeader() {
  RecordingHeader h;
  h.version = "0.1.0 (abc1234)";
  h.from_unix_nano = 1'796'355'931'306'587'163;
  h.to_unix_nano = 1'796'355'971'306'587'163;
  h.ports.push_back({"mlx5_0", 1, "eth2", "Ethernet", "ACTIVE", "200 Gb/sec (4X HDR)", true, "mlx5",
                     "28.39.1002"});
  h.topology.partners.push_back(
      {"mlx5_0", 1, "eth2", "file", "02:00:00:00:01:00", "leaf01", "Ethernet1/1", ""});
  h.topology.ports.push_back({"mlx5_0", 1, "eth2", "0000:04:00.0", 1});
  h.topology.gpus.push_back({"0000:03:00.0", 0, "nvidia", "H100 \"SXM\"", 0});
  h.topology.affinity.push_back({"0000:03:00.0", 0, "mlx5_0", PciRelation::kPix});
  const PodRef vllm{"llm", "vllm-0", "engine", "8f2c1d90-3e5a-4b17-9c2e-5da9abb51763"};
  h.pods.devices.push_back({vllm, "nvidia.com/cx7_vf", "0000:04:00.2", PodDeviceKind::kRdma,
                            "mlx5_2", "mlx5_0", "0000:04:00.2"});
  h.pods.devices.push_back({{"llm", "sglang-0", "worker", ""},
                            "rdma/hca_shared_devices_a",
                            "ib-shared-7",
                            PodDeviceKind::kUnresolved,
                            "",
                            "",
                            ""});
  h.pods.processes.push_back({4242, 1, vllm, "devices"});
  h.options = {{"correlate-rate-factor", "4"}, {"stall-thresholds", "decode_step=200ms"}};
  LearnedBound b;
  b.key = "fabricsim decode_step";
  b.kind = SpanKind::kDecodeStep;
  b.cost = StallCost::kDuration;
  b.samples = 1453;
  b.p50 = 29.4e6;
  b.p75 = 30e6;
  b.p99 = 30.6e6;
  b.bound = 58.9e6;
  h.stall_bounds.push_back(b);
  return h;
}

TEST(RecordingHeaderTest, WrittenAndReadBackWhole) {
  const RecordingHeader h = SampleHeader();
  const std::string line = FormatRecordingHeaderLine(h);
  auto parsed = ParseRecordingLine(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << line;
  ASSERT_EQ(parsed->type, RecordingLine::kHeader);
  const RecordingHeader& r = parsed->header;
  EXPECT_EQ(r.version, h.version);
  EXPECT_EQ(r.from_unix_nano, h.from_unix_nano);
  EXPECT_EQ(r.to_unix_nano, h.to_unix_nano);
  ASSERT_EQ(r.ports.size(), 1u);
  EXPECT_EQ(r.ports[0].rate, "200 Gb/sec (4X HDR)");
  EXPECT_EQ(r.ports[0].fw_ver, "28.39.1002");
  EXPECT_EQ(r.topology, h.topology);  // partners, PCI places, GPUs, affinity
  EXPECT_EQ(r.pods, h.pods);          // devices and processes
  EXPECT_EQ(r.options, h.options);
  ASSERT_EQ(r.stall_bounds.size(), 1u);
  EXPECT_EQ(r.stall_bounds[0].key, "fabricsim decode_step");
  EXPECT_EQ(r.stall_bounds[0].kind, SpanKind::kDecodeStep);
  EXPECT_EQ(r.stall_bounds[0].samples, 1453u);
  EXPECT_DOUBLE_EQ(r.stall_bounds[0].bound, 58.9e6);
  EXPECT_EQ(FormatRecordingHeaderLine(r), line);
}

TEST(RecordingHeaderTest, BadFieldsAreErrorsNotGuesses) {
  for (const char* bad : {
           R"({"recording":[]})",
           R"({"recording":{"ports":{}}})",
           R"({"recording":{"from_unix_nano":"soon"}})",
           R"({"recording":{"affinity":[{"gpu_bus_id":"x","device":"mlx5_0","relation":"NEAR"}]}})",
           R"({"recording":{"options":{"correlate-rate-factor":3}}})",
           R"({"recording":{"pod_devices":[{"pod":"vllm-0","kind":"nic"}]}})",
           R"({"recording":{"pod_processes":[{"pod":"vllm-0","pid":"4242"}]}})",
       }) {
    EXPECT_FALSE(ParseRecordingLine(bad).ok()) << bad;
  }
}

// A 629.6 ms decode step and the daemon's learned stall judgement of it.
v1::Span DecodeStep() {
  v1::Span span;
  span.set_trace_id(std::string(16, '\x01'));
  span.set_span_id(std::string(8, '\x02'));
  span.set_name("decode_step");
  span.set_start_unix_nano(1'000'000'000);
  span.set_end_unix_nano(1'629'600'000);
  return span;
}

StallJudgement LearnedStall() {
  StallJudgement j;
  j.judged = true;
  j.stall = true;
  j.source = StallSource::kLearned;
  j.cost_kind = StallCost::kDuration;
  j.cost = 629.6e6;
  j.bound = 58.9e6;
  j.median = 29.4e6;
  j.p99 = 30.6e6;
  j.samples = 1453;
  j.key = "fabricsim decode_step";
  return j;
}

TEST(RecordingHeaderTest, SpanLinesCarryTheDaemonsJudgement) {
  const v1::Span span = DecodeStep();
  const StallJudgement j = LearnedStall();
  const std::string line = FormatSpanLine(span, &j);
  auto parsed = ParseRecordingLine(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << line;
  ASSERT_EQ(parsed->type, RecordingLine::kSpan);
  const StallJudgement& r = parsed->judgement;
  EXPECT_TRUE(r.judged);
  EXPECT_TRUE(r.stall);
  EXPECT_EQ(r.source, StallSource::kLearned);
  EXPECT_DOUBLE_EQ(r.bound, 58.9e6);
  EXPECT_EQ(r.samples, 1453u);
  EXPECT_EQ(r.key, "fabricsim decode_step");
  // Without one (push lines, fabricsim): not judged, and not written.
  EXPECT_EQ(FormatSpanLine(span).find("judgement"), std::string::npos);
  EXPECT_FALSE(ParseRecordingLine(FormatSpanLine(span))->judgement.judged);
  // A judgement that names an unknown source is an error.
  std::string bad = line;
  bad.replace(bad.find("\"learned\""), 9, "\"guessed\"");
  EXPECT_FALSE(ParseRecordingLine(bad).ok()) << bad;
}

TEST(RecordingHeaderTest, RecordedOptionsSetWhatTheVerdictsDependOn) {
  AnalysisSettings s;
  ASSERT_TRUE(ApplyRecordedOptions({{"baseline-window", "20s"},
                                    {"correlate-rate-factor", "4"},
                                    {"correlate-pause-fraction", "0.1"},
                                    {"correlate-floors", "ecn=500"},
                                    {"correlate-min-coverage", "0.8"},
                                    {"hot-interval", "10ms"},
                                    {"medium-interval", "100ms"},
                                    {"slow-interval", "2s"},
                                    {"stall-thresholds", "decode_step=200ms"},
                                    {"stall-warmup", "50"},
                                    {"stall-learning", "false"},
                                    {"pfc-storm-fraction", "0.5"},
                                    {"metrics-listen", "0.0.0.0:9478"},  // not the analysis's
                                    {"sysfs-root", "/sys"}},
                                   &s)
                  .ok());
  EXPECT_EQ(s.correlation.baseline_window, absl::Seconds(20));
  EXPECT_DOUBLE_EQ(s.correlation.rate_factor, 4);
  EXPECT_DOUBLE_EQ(s.correlation.pause_fraction_threshold, 0.1);
  EXPECT_DOUBLE_EQ(s.correlation.floors[static_cast<size_t>(SignalClass::kEcn)], 500);
  EXPECT_DOUBLE_EQ(s.correlation.min_coverage, 0.8);
  EXPECT_EQ(s.correlation.max_sample_gap, absl::Seconds(5));  // 2 x slowest + 1 s, as the daemon
  ASSERT_EQ(s.learn.thresholds.size(), 1u);
  EXPECT_EQ(s.learn.thresholds[0].second, absl::Milliseconds(200));
  EXPECT_EQ(s.learn.warmup, 50u);
  EXPECT_FALSE(s.learn.enabled);
  DetectorOptions want;
  ASSERT_TRUE(want.Set("pfc-storm-fraction", "0.5").ok());
  EXPECT_EQ(s.detect.values, want.values);
  EXPECT_FALSE(s.detect.values == DetectorOptions{}.values);

  // A value that does not parse: an error naming it, nothing applied.
  AnalysisSettings before;
  AnalysisSettings t;
  absl::Status bad = ApplyRecordedOptions(
      {{"correlate-rate-factor", "5"}, {"correlate-pause-fraction", "lots"}}, &t);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("correlate-pause-fraction"), absl::string_view::npos) << bad;
  EXPECT_DOUBLE_EQ(t.correlation.rate_factor, before.correlation.rate_factor);
  EXPECT_FALSE(ApplyRecordedOptions({{"detectors", "pfc_storm,nosuch"}}, &t).ok());
}

// The feeder takes the header's ports (with link rates) and topology before
// any sample, keeps them when samples name the same port, and gives a span
// the judgement its line carries, not the cold learner's.
TEST(RecordingHeaderTest, FeederUsesTheHeaderAndTheRecordedJudgement) {
  Store store(StoreOptions{});
  PortInventory ports;
  RecordingFeeder feeder(&store, &ports);
  StallLearner learner(StallLearnerOptions{}, nullptr);
  feeder.SetStallLearner(&learner);
  std::vector<Span> spans;
  feeder.Feed(1, FormatRecordingHeaderLine(SampleHeader()), &spans);
  SeriesKey key{"hw_counters", "np_cnp_sent", "mlx5_0", 1, "eth2"};
  feeder.Feed(2, FormatSampleLine(1'000'000'000, key, 5), &spans);
  const v1::Span span = DecodeStep();
  const StallJudgement j = LearnedStall();
  feeder.Feed(3, FormatSpanLine(span, &j), &spans);
  feeder.Feed(4, FormatSpanLine(span), &spans);  // no judgement: the learner's (cold: none)
  ASSERT_TRUE(feeder.header().has_value());
  EXPECT_EQ(feeder.stats().malformed, 0u);
  EXPECT_EQ(feeder.stats().recorded_judgements, 1u);
  const std::vector<PortInfo> listed = ports.List();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].rate, "200 Gb/sec (4X HDR)");
  ASSERT_NE(ports.Topology().FindPartner("mlx5_0", 1, "eth2"), nullptr);
  EXPECT_EQ(ports.Topology().FindPartner("mlx5_0", 1, "eth2")->system_name, "leaf01");
  // The pods: a span of vllm-0 is judged offline on its VF and PF, as live.
  ASSERT_NE(ports.Pods()->FindProcess(4242), nullptr);
  Span pod_span;
  pod_span.attributes = {{"k8s.namespace.name", "llm"}, {"k8s.pod.name", "vllm-0"}};
  EXPECT_EQ(ResolveSpanPod(pod_span, *ports.Pods()).rdma_devices,
            (std::vector<std::string>{"mlx5_2", "mlx5_0"}));
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_TRUE(spans[0].judgement.stall);
  EXPECT_EQ(spans[0].judgement.source, StallSource::kLearned);
  EXPECT_EQ(spans[0].judgement.key, "fabricsim decode_step");
  EXPECT_FALSE(spans[1].judgement.stall);
  EXPECT_NE(spans[1].judgement.source, StallSource::kLearned);
}

}  // namespace
}  // namespace fabricscope
