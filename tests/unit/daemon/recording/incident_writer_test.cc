// IncidentWriter (--incident-dir): the window of a recording (before/after,
// the port's series only, the spans in scope, in time order, readable by the
// recording feeder as `analyze` reads it), overlapping episodes sharing one
// recording, the cap of an endless episode, the size bound (oldest deleted
// first, counted), the bounded table of waiting recordings (dropped and
// counted), an unusable directory (counted, not fatal), the flush at stop
// and the directory's preparation at Start. Episodes come in through the
// EventLog's observer, as from the detectors.
#include "daemon/recording/incident_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/signals.h"
#include "daemon/config.h"
#include "daemon/detect/event_log.h"
#include "daemon/recording/recording.h"
#include "daemon/recording/replay.h"
#include "daemon/spans/span_store.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace incident_writer_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT = 1'700'000'000 * kSec;

Span MakeSpan(uint8_t id, int64_t t0, int64_t t1, const std::string& netdev) {
  Span s;
  s.trace_id[15] = 1;
  s.span_id[7] = id;
  s.name = "decode_step";
  s.kind = SpanKind::kDecodeStep;
  s.start_unix_nano = t0;
  s.end_unix_nano = t1;
  s.netdev = netdev;
  if (!netdev.empty()) s.attributes.emplace_back("network.interface.name", netdev);
  return s;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class IncidentWriterTest : public ::testing::Test {
 protected:
  IncidentWriterTest() : clock_(kT), events_(1000, nullptr), spans_({}, &clock_, nullptr) {
    dir_ = std::filesystem::temp_directory_path() /
           ("incident_writer_test." + std::to_string(getpid()) + "." +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ports_.Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "100 Gb/sec", true});
    ports_.Upsert({"mlx5_1", 1, "eth1", "Ethernet", "ACTIVE", "100 Gb/sec", true});
    // Two ports, each with an RDMA counter (device, port and netdev) and an
    // ethtool counter (netdev only), polled every 100 ms over [0, 120 s].
    for (const auto& [device, netdev] :
         {std::pair{"mlx5_0", "eth0"}, std::pair{"mlx5_1", "eth1"}}) {
      const SeriesKey hw{"hw_counters", "np_cnp_sent", device, 1, netdev};
      const SeriesKey eth{"ethtool", "rx_prio3_pause_duration", "", 0, netdev};
      for (const SeriesKey& k : {hw, eth}) {
        const SeriesId id = store_.Register(k, *MapCounter(k));
        for (int64_t ts = kT; ts <= kT + 120 * kSec; ts += 100 * kMs) {
          store_.Append(id, ts, static_cast<uint64_t>((ts - kT) / kMs));
        }
      }
    }
    spans_.Add(MakeSpan(1, kT + 20 * kSec, kT + 20 * kSec + 30 * kMs, "eth0"));  // in scope
    spans_.Add(MakeSpan(2, kT + 21 * kSec, kT + 21 * kSec + 30 * kMs, "eth1"));  // other port
    spans_.Add(MakeSpan(3, kT + 22 * kSec, kT + 22 * kSec + 30 * kMs, ""));      // every port
    spans_.Add(MakeSpan(4, kT + 90 * kSec, kT + 90 * kSec + 30 * kMs, "eth0"));  // outside
  }
  ~IncidentWriterTest() override { std::filesystem::remove_all(dir_); }

  IncidentOptions Options() {
    IncidentOptions o;
    o.dir = dir_.string();
    o.before = absl::Seconds(5);
    o.after = absl::Seconds(3);
    o.max_duration = absl::Seconds(30);
    return o;
  }
  std::unique_ptr<IncidentWriter> MakeWriter(const IncidentOptions& o) {
    auto w = std::make_unique<IncidentWriter>(o, &store_, &spans_, &ports_, &clock_, &metrics_);
    events_.SetObserver(w.get());
    return w;
  }
  // Opens an episode the way a detector does (through the event log).
  uint64_t Open(const std::string& detector, const std::string& kind, const std::string& device,
                const std::string& netdev, int64_t start) {
    DetectorEvent e;
    e.detector = detector;
    e.kind = kind;
    e.device = device;
    e.port = device.empty() ? 0 : 1;
    e.netdev = netdev;
    e.priority = "3";
    e.direction = "rx";
    e.start_unix_nano = start;
    e.detected_unix_nano = start + 100 * kMs;
    return events_.Open(e);
  }
  void Close(uint64_t id, int64_t end) { events_.Close(id, end, 0.9, "paused 90%"); }
  void At(int64_t t) { clock_.SetRealtimeNs(t); }
  std::vector<IncidentFile> Files() {
    auto files = ListIncidentFiles(dir_.string());
    return files.ok() ? *files : std::vector<IncidentFile>{};
  }
  std::string Path(const IncidentFile& f) { return (dir_ / f.name).string(); }

  FakeClock clock_;
  MetricsRegistry metrics_;
  Store store_;
  PortInventory ports_;
  EventLog events_;
  SpanStore spans_;
  std::filesystem::path dir_;
};

TEST_F(IncidentWriterTest, RecordsThePortFromBeforeTheStartToAfterTheEnd) {
  auto w = MakeWriter(Options());
  const uint64_t id = Open("pfc_storm", "storm", "mlx5_0", "eth0", kT + 20 * kSec);
  At(kT + 21 * kSec);
  EXPECT_EQ(w->RunOnce(), 0u);  // still active
  Close(id, kT + 22 * kSec);
  At(kT + 24 * kSec + 900 * kMs);  // end + after not reached yet
  EXPECT_EQ(w->RunOnce(), 0u);
  EXPECT_EQ(w->pending(), 1u);
  At(kT + 25 * kSec);
  ASSERT_EQ(w->RunOnce(), 1u);
  EXPECT_EQ(w->pending(), 0u);
  EXPECT_EQ(w->RunOnce(), 0u);  // once

  const std::vector<IncidentFile> files = Files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].name, "incident-20231114T221340.000Z-pfc_storm-storm-mlx5_0.1-eth0.jsonl");
  const std::vector<std::string> lines = ReadLines(Path(files[0]));
  ASSERT_GT(lines.size(), 2u);
  auto header = ParseRecordingLine(lines[0]);
  ASSERT_TRUE(header.ok()) << header.status();
  ASSERT_EQ(header->type, RecordingLine::kIncident);
  const IncidentHeader& h = header->incident;
  EXPECT_EQ(h.from_unix_nano, kT + 15 * kSec);
  EXPECT_EQ(h.to_unix_nano, kT + 25 * kSec);
  EXPECT_EQ(h.closed, "ended");
  EXPECT_EQ(h.device, "mlx5_0");
  EXPECT_EQ(h.netdev, "eth0");
  ASSERT_EQ(h.episodes.size(), 1u);
  EXPECT_EQ(h.episodes[0].id, id);
  EXPECT_EQ(h.episodes[0].end_unix_nano, kT + 22 * kSec);
  EXPECT_EQ(h.episodes[0].summary, "paused 90%");

  int64_t first = INT64_MAX, last = INT64_MIN, prev = INT64_MIN;
  size_t samples = 0;
  std::vector<uint8_t> span_ids;
  for (size_t i = 1; i < lines.size(); ++i) {
    auto l = ParseRecordingLine(lines[i]);
    ASSERT_TRUE(l.ok()) << "line " << i + 1 << ": " << l.status();
    const int64_t ts = l->type == RecordingLine::kSample
                           ? l->ts_ns
                           : static_cast<int64_t>(l->span.end_unix_nano());
    EXPECT_GE(ts, prev) << "line " << i + 1 << " out of time order";
    prev = ts;
    if (l->type == RecordingLine::kSpan) {
      span_ids.push_back(static_cast<uint8_t>(l->span.span_id().back()));
      continue;
    }
    ASSERT_EQ(l->type, RecordingLine::kSample);
    EXPECT_EQ(l->key.netdev, "eth0") << lines[i];  // the episode's port only
    first = std::min(first, l->ts_ns);
    last = std::max(last, l->ts_ns);
    ++samples;
  }
  EXPECT_EQ(first, kT + 15 * kSec);
  EXPECT_EQ(last, kT + 25 * kSec);
  EXPECT_EQ(samples, 2u * 101u);  // two series, 10 s at 100 ms, both ends
  // The eth0 span and the unscoped one; not eth1's, not the one after.
  EXPECT_EQ(span_ids, (std::vector<uint8_t>{1, 3}));

  // `analyze` and replay read it as any recording.
  Store offline;
  PortInventory offline_ports;
  RecordingFeeder feeder(&offline, &offline_ports);
  std::vector<Span> spans;
  for (size_t i = 0; i < lines.size(); ++i) feeder.Feed(i + 1, lines[i], &spans);
  EXPECT_EQ(feeder.stats().malformed, 0u);
  EXPECT_EQ(feeder.stats().samples, samples);
  EXPECT_EQ(spans.size(), 2u);

  const IncidentStats st = w->stats();
  EXPECT_EQ(st.written, 1u);
  EXPECT_EQ(st.bytes, files[0].size);
  EXPECT_EQ(st.write_errors, 0u);
}

TEST_F(IncidentWriterTest, OverlappingEpisodesOnOnePortShareARecording) {
  auto w = MakeWriter(Options());
  const uint64_t a = Open("microburst", "burst", "mlx5_0", "eth0", kT + 20 * kSec);
  Close(a, kT + 20 * kSec + 10 * kMs);
  // Before a's window closed (20.01 + 3 s), a longer one on the same port
  // (named by netdev only) and one on the other port.
  At(kT + 22 * kSec);
  const uint64_t b = Open("pfc_storm", "storm", "", "eth0", kT + 21 * kSec);
  const uint64_t c = Open("pfc_storm", "storm", "mlx5_1", "eth1", kT + 21 * kSec);
  At(kT + 23 * kSec + 500 * kMs);
  EXPECT_EQ(w->RunOnce(), 0u);  // b is still active
  Close(b, kT + 24 * kSec);
  Close(c, kT + 22 * kSec);
  At(kT + 25 * kSec);
  EXPECT_EQ(w->RunOnce(), 1u);  // c's (22 + 3 s)
  At(kT + 27 * kSec);
  EXPECT_EQ(w->RunOnce(), 1u);  // a and b (24 + 3 s)
  const std::vector<IncidentFile> files = Files();
  ASSERT_EQ(files.size(), 2u);
  // Named after the first start and the longest episode.
  EXPECT_EQ(files[0].name, "incident-20231114T221340.000Z-pfc_storm-storm-mlx5_0.1-eth0.jsonl");
  EXPECT_EQ(files[1].name, "incident-20231114T221341.000Z-pfc_storm-storm-mlx5_1.1-eth1.jsonl");
  auto header = ParseRecordingLine(ReadLines(Path(files[0]))[0]);
  ASSERT_TRUE(header.ok());
  const IncidentHeader& h = header->incident;
  EXPECT_EQ(h.from_unix_nano, kT + 15 * kSec);
  EXPECT_EQ(h.to_unix_nano, kT + 27 * kSec);
  ASSERT_EQ(h.episodes.size(), 2u);
  EXPECT_EQ(h.episodes[0].detector, "microburst");
  EXPECT_EQ(h.episodes[1].detector, "pfc_storm");
  EXPECT_EQ(h.Headline(), &h.episodes[1]);
}

TEST_F(IncidentWriterTest, AnEndlessEpisodeIsRecordedOnceAtTheCap) {
  IncidentOptions o = Options();
  o.max_duration = absl::Seconds(10);
  auto w = MakeWriter(o);
  const uint64_t id = Open("pfc_storm", "storm", "mlx5_0", "eth0", kT + 20 * kSec);
  At(kT + 29 * kSec + 900 * kMs);
  EXPECT_EQ(w->RunOnce(), 0u);
  At(kT + 30 * kSec);
  ASSERT_EQ(w->RunOnce(), 1u);
  ASSERT_EQ(Files().size(), 1u);
  auto header = ParseRecordingLine(ReadLines(Path(Files()[0]))[0]);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->incident.closed, "capped");
  EXPECT_EQ(header->incident.from_unix_nano, kT + 15 * kSec);
  EXPECT_EQ(header->incident.to_unix_nano, kT + 30 * kSec);
  ASSERT_EQ(header->incident.episodes.size(), 1u);
  EXPECT_TRUE(header->incident.episodes[0].active());
  // Its end, much later, writes nothing more.
  Close(id, kT + 50 * kSec);
  At(kT + 60 * kSec);
  EXPECT_EQ(w->RunOnce(), 0u);
  EXPECT_EQ(w->pending(), 0u);
  EXPECT_EQ(Files().size(), 1u);
}

TEST_F(IncidentWriterTest, SizeBoundDeletesTheOldestFirstAndCounts) {
  // Three equal episodes (same window length over the same kind of data).
  auto record = [&](IncidentWriter& w, int64_t start) {
    const uint64_t id = Open("pfc_storm", "storm", "mlx5_0", "eth0", start);
    Close(id, start + kSec);
    At(start + 4 * kSec);
    return w.RunOnce();
  };
  uint64_t one = 0;
  {
    auto probe = MakeWriter(Options());
    ASSERT_EQ(record(*probe, kT + 10 * kSec), 1u);
    one = Files().at(0).size;
    std::filesystem::remove_all(dir_);
  }
  IncidentOptions o = Options();
  o.dir_max_bytes = one * 5 / 2;  // room for two
  auto w = MakeWriter(o);
  ASSERT_EQ(record(*w, kT + 10 * kSec), 1u);
  ASSERT_EQ(record(*w, kT + 30 * kSec), 1u);
  EXPECT_EQ(Files().size(), 2u);
  EXPECT_EQ(w->stats().deleted, 0u);
  ASSERT_EQ(record(*w, kT + 50 * kSec), 1u);
  const std::vector<IncidentFile> files = Files();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(w->stats().deleted, 1u);
  EXPECT_NE(files[0].name.find("T221350.000Z"), std::string::npos) << files[0].name;  // 30 s
  EXPECT_NE(files[1].name.find("T221410.000Z"), std::string::npos) << files[1].name;  // 50 s

  // A recording that alone exceeds the bound is not kept (nor its temporary file).
  o.dir_max_bytes = one / 2;
  auto small = MakeWriter(o);
  ASSERT_EQ(record(*small, kT + 70 * kSec), 0u);
  EXPECT_EQ(small->stats().write_errors, 1u);
  EXPECT_EQ(Files().size(), 2u);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 2u);
}

TEST_F(IncidentWriterTest, TooManyWaitingRecordingsDropAndCount) {
  IncidentOptions o = Options();
  o.max_pending = 2;
  auto w = MakeWriter(o);
  Open("pfc_storm", "storm", "mlx5_0", "eth0", kT + 20 * kSec);
  Open("pfc_storm", "storm", "mlx5_1", "eth1", kT + 20 * kSec);
  // A third port: no room. Another episode on a waiting port still joins.
  const uint64_t dropped =
      Open("link_degradation", "link_downed", "mlx5_2", "eth2", kT + 20 * kSec);
  Open("microburst", "burst", "mlx5_0", "eth0", kT + 21 * kSec);
  EXPECT_EQ(w->pending(), 2u);
  EXPECT_EQ(w->stats().dropped, 1u);
  Close(dropped, kT + 21 * kSec);  // unknown to the writer: ignored
  EXPECT_EQ(w->pending(), 2u);
}

TEST_F(IncidentWriterTest, AnUnusableDirectoryIsCountedNotFatal) {
  // A path below a regular file can be neither created nor written (even as root).
  std::filesystem::create_directories(dir_);
  const std::string file = (dir_ / "plain-file").string();
  std::ofstream(file) << "x";
  IncidentOptions o = Options();
  o.dir = file + "/incidents";
  auto w = MakeWriter(o);
  for (int i = 0; i < 2; ++i) {
    const int64_t start = kT + (20 + 10 * i) * kSec;
    const uint64_t id = Open("pfc_storm", "storm", "mlx5_0", "eth0", start);
    Close(id, start + kSec);
    At(start + 5 * kSec);
    EXPECT_EQ(w->RunOnce(), 0u);
  }
  EXPECT_EQ(w->stats().write_errors, 2u);
  EXPECT_EQ(w->stats().written, 0u);
  EXPECT_EQ(w->pending(), 0u);  // each recording lost once, not retried forever
}

TEST_F(IncidentWriterTest, FlushWritesWhatWaitsCutAtNow) {
  auto w = MakeWriter(Options());
  Open("pfc_storm", "storm", "mlx5_0", "eth0", kT + 20 * kSec);
  At(kT + 22 * kSec);
  EXPECT_EQ(w->RunOnce(), 0u);
  EXPECT_EQ(w->Flush(), 1u);
  ASSERT_EQ(Files().size(), 1u);
  auto header = ParseRecordingLine(ReadLines(Path(Files()[0]))[0]);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->incident.closed, "stopped");
  EXPECT_EQ(header->incident.to_unix_nano, kT + 22 * kSec);
}

TEST_F(IncidentWriterTest, FlushWithoutTimeLeftDropsAndCounts) {
  auto w = MakeWriter(Options());
  Open("pfc_storm", "storm", "mlx5_0", "eth0", kT + 20 * kSec);
  Open("microburst", "burst", "mlx5_0", "eth0", kT + 20 * kSec);
  Open("pfc_storm", "storm", "mlx5_1", "eth1", kT + 20 * kSec);
  At(kT + 22 * kSec);
  EXPECT_EQ(w->Flush(absl::ZeroDuration()), 0u);  // (the fake clock does not move)
  EXPECT_EQ(w->stats().dropped, 3u);
  EXPECT_EQ(w->pending(), 0u);
  EXPECT_TRUE(Files().empty());
}

TEST_F(IncidentWriterTest, StartCreatesTheDirectoryPrivateAndRemovesLeftovers) {
  IncidentOptions o = Options();
  o.dir = (dir_ / "a" / "b").string();
  {
    auto w = MakeWriter(o);
    w->Start();
    w->Stop();
  }
  struct stat st {};
  ASSERT_EQ(stat(o.dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string leftover = o.dir + "/.incident-x.tmp";
  std::ofstream(leftover) << "torn";
  auto w = MakeWriter(o);
  w->Start();
  w->Stop();
  EXPECT_FALSE(std::filesystem::exists(leftover));
}

// The incident line: its text (docs/recording.md; the same line is the fuzz
// seed fuzz/corpus/fuzz_recording/gen_incident) and its round trip.
TEST(IncidentLineTest, FormatsAndParsesBack) {
  IncidentHeader h;
  h.from_unix_nano = 1760000001000000000;
  h.to_unix_nano = 1760000003600000000;
  h.device = "mlx5_0";
  h.port = 1;
  h.netdev = "eth2";
  h.closed = "capped";
  DetectorEvent e;
  e.id = 7;
  e.detector = "pfc_storm";
  e.kind = "storm";
  e.device = "mlx5_0";
  e.port = 1;
  e.netdev = "eth2";
  e.priority = "3";
  e.direction = "rx";
  e.start_unix_nano = 1760000001000000000;
  e.detected_unix_nano = 1760000001200000000;
  e.peak = 0.93;
  e.summary = "eth2 priority 3 rx: paused \"93%\"";
  h.episodes.push_back(e);
  h.episodes_omitted = 2;
  const std::string line = FormatIncidentLine(h);
  EXPECT_EQ(
      line,
      R"({"incident":{"from_unix_nano":1760000001000000000,"to_unix_nano":1760000003600000000,)"
      R"("device":"mlx5_0","port":1,"netdev":"eth2","closed":"capped","episodes":[{"id":7,)"
      R"("detector":"pfc_storm","kind":"storm","device":"mlx5_0","port":1,"netdev":"eth2",)"
      R"("priority":"3","direction":"rx","start_unix_nano":1760000001000000000,)"
      R"("end_unix_nano":null,"detected_unix_nano":1760000001200000000,"peak":0.93,)"
      R"("summary":"eth2 priority 3 rx: paused \"93%\""}],"episodes_omitted":2}})");
  auto back = ParseRecordingLine(line);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->type, RecordingLine::kIncident);
  EXPECT_EQ(FormatIncidentLine(back->incident), line);
  EXPECT_EQ(back->incident.episodes.at(0).summary, e.summary);
  EXPECT_TRUE(back->incident.episodes.at(0).active());
  // A malformed header is an error like any malformed line.
  EXPECT_FALSE(ParseRecordingLine(R"({"incident":{"to_unix_nano":1}})").ok());
  EXPECT_FALSE(ParseRecordingLine(R"({"incident":{"from_unix_nano":1,"to_unix_nano":2,)"
                                  R"("episodes":[{"peak":"x","start_unix_nano":1}]}})")
                   .ok());
}

TEST(IncidentConfigTest, FlagsAndDefaults) {
  auto parse = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return ParseCommandLine(static_cast<int>(argv.size()), argv.data());
  };
  auto defaults = parse({"fabricscoped"});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->config.incident_dir, "");
  EXPECT_EQ(defaults->config.incident_before, absl::Seconds(30));
  EXPECT_EQ(defaults->config.incident_after, absl::Seconds(30));
  EXPECT_EQ(defaults->config.incident_max_duration, absl::Minutes(5));
  EXPECT_EQ(defaults->config.incident_dir_max_bytes, 1ull << 30);
  auto set = parse({"fabricscoped", "--incident-dir=/var/lib/fabricscope/incidents",
                    "--incident-before=5s", "--incident-after=2s", "--incident-max-duration=1m",
                    "--incident-dir-max=256MiB"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->config.incident_dir, "/var/lib/fabricscope/incidents");
  EXPECT_EQ(set->config.incident_before, absl::Seconds(5));
  EXPECT_EQ(set->config.incident_after, absl::Seconds(2));
  EXPECT_EQ(set->config.incident_max_duration, absl::Minutes(1));
  EXPECT_EQ(set->config.incident_dir_max_bytes, 256ull << 20);
  auto small = parse({"fabricscoped", "--incident-dir-max=10KiB"});
  ASSERT_FALSE(small.ok());
  EXPECT_NE(std::string(small.status().message()).find("--incident-dir-max"), std::string::npos)
      << small.status();
  EXPECT_FALSE(parse({"fabricscoped", "--incident-after=0s"}).ok());
  EXPECT_NE(HelpText().find("--incident-dir=DIR"), std::string::npos);
}

}  // namespace
}  // namespace incident_writer_test
}  // namespace fabricscope
