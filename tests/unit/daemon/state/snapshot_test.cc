#include "daemon/state/snapshot.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace snapshot_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT = 1'700'000'000 * kSec;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/fabricscope-snapshot-test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const SeriesKey kBytes{"counters", "port_xmit_data", "mlx5_0", 1, ""};
const SeriesKey kPause{"ethtool", "rx_prio3_pause_duration", "", 0, "eth0"};
const SeriesKey kPfcEnabled{"dcb_config", "pfc_enabled_prio3", "", 0, "eth0"};

Span MakeSpan(uint8_t trace, uint8_t id, int64_t t0, int64_t t1) {
  Span s;
  s.trace_id[15] = trace;
  s.span_id[7] = id;
  s.parent_span_id[0] = 9;
  s.name = "decode_step";
  s.kind = SpanKind::kDecodeStep;
  s.start_unix_nano = t0;
  s.end_unix_nano = t1;
  s.attributes = {{"service.name", "vllm"}, {"gen_ai.request.model", "llama"}};
  if (id % 3 == 0) {  // a GPU hint: restored from its attribute
    s.attributes.emplace_back("fabricscope.gpu", "1b:00.0");
    s.gpu = "1b:00.0";
  }
  if (id % 2 == 1) {  // a process: restored from its attribute
    s.attributes.emplace_back("process.pid", "4242");
    s.pid = 4242;
  }
  s.rdma_device = "mlx5_0";
  s.rdma_port = 1;
  s.netdev = "eth0";
  s.stall_flag = id % 2 == 0;
  s.protocol = "otlp";
  return s;
}

// A store with three series (two counters over many chunks, a gauge), spans
// and events, as a daemon holds them at SIGTERM.
class SnapshotTest : public ::testing::Test {
 protected:
  SnapshotTest() : clock_(kT + 100 * kSec), spans_({}, &clock_, nullptr), events_(100, nullptr) {
    bytes_ = store_.Register(kBytes, *MapCounter(kBytes));
    pause_ = store_.Register(kPause, *MapCounter(kPause));
    // Several sealed chunks on three time blocks plus a head; the first
    // samples carry their own timestamps (appended outside a tick).
    TickColumn* column = store_.AddTickColumn(absl::Milliseconds(5));
    for (int64_t i = 0; i < 20000; ++i) {
      const int64_t ts = kT + i * 5 * kMs + (i % 7) * 1000;
      if (i < 1000) {
        store_.Append(bytes_, ts, static_cast<uint64_t>(i * i));
        store_.Append(pause_, ts, static_cast<uint64_t>(i / 100));
        continue;
      }
      const TickRef tick = store_.Tick(column, ts);
      store_.Append(bytes_, tick, static_cast<uint64_t>(i * i));
      store_.Append(pause_, tick, static_cast<uint64_t>(i / 100));
    }
    store_.Append(bytes_, kT + 100 * kSec, 5);  // a reset: resets == 1
    gauge_ = store_.Register(kPfcEnabled, *MapCounter(kPfcEnabled));
    store_.Append(gauge_, kT, 1);
    store_.Append(gauge_, kT + kSec, 0);
    for (uint8_t i = 1; i <= 50; ++i) {
      spans_.Add(MakeSpan(i % 5, i, kT + i * kSec, kT + i * kSec + 30 * kMs));
    }
    DetectorEvent closed;
    closed.detector = "pfc_storm";
    closed.kind = "storm";
    closed.netdev = "eth0";
    closed.priority = "3";
    closed.direction = "rx";
    closed.start_unix_nano = kT + 10 * kSec;
    closed.detected_unix_nano = kT + 10 * kSec + 200 * kMs;
    closed.signals = {"pfc_pause_frames rx prio 3", "pfc_pause_seconds rx prio 3"};
    const uint64_t storm = events_.Open(closed);
    events_.Close(storm, kT + 11 * kSec, 0.97, "PFC storm on eth0 prio 3 rx");
    DetectorEvent open = closed;
    open.signals = {"ecn_marked_packets"};
    open.merged_into = storm;  // part of the storm's episode
    open.detector = "microburst";
    open.kind = "burst";
    open.start_unix_nano = kT + 90 * kSec;
    events_.Update(events_.Open(open), 12.5, "burst on eth0");
  }

  // Writes the snapshot to dir_/snapshot and returns its bytes.
  std::string Save() {
    SnapshotCounts counts;
    absl::Status s = WriteSnapshot(path(), store_, spans_, events_, kT + 100 * kSec,
                                   absl::InfiniteFuture(), &counts);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(counts.series, 3u);
    EXPECT_EQ(counts.spans, 50u);
    EXPECT_EQ(counts.events, 2u);
    EXPECT_EQ(counts.samples, store_.Stats().samples);
    return Slurp(path());
  }
  std::string path() const { return dir_.path() + "/snapshot"; }

  TempDir dir_;
  FakeClock clock_;
  Store store_;
  SpanStore spans_;
  EventLog events_;
  SeriesId bytes_ = kInvalidSeries;
  SeriesId pause_ = kInvalidSeries;
  SeriesId gauge_ = kInvalidSeries;
};

TEST_F(SnapshotTest, RoundTripRestoresSamplesStateSpansAndEvents) {
  const std::string data = Save();
  SnapshotCounts counts;
  SnapshotStatus v = ValidateSnapshot(data, 1ull << 30, &counts);
  ASSERT_TRUE(v.ok()) << v.detail;
  EXPECT_EQ(counts.samples, store_.Stats().samples);
  EXPECT_GT(counts.chunks, 3u);

  Store store;
  SpanStore spans({}, &clock_, nullptr);
  EventLog events(100, nullptr);
  SnapshotStatus r = RestoreSnapshot(data, &store, &spans, &events, &counts);
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(counts.series_unmapped, 0u);
  EXPECT_EQ(counts.chunks_dropped, 0u);

  for (const SeriesKey& k : {kBytes, kPause, kPfcEnabled}) {
    const SeriesId before = *store_.Find(k);
    const std::optional<SeriesId> after = store.Find(k);
    ASSERT_TRUE(after.has_value()) << k.name;
    EXPECT_EQ(store.ReadRange(*after, INT64_MIN, INT64_MAX),
              store_.ReadRange(before, INT64_MIN, INT64_MAX))
        << k.name;
    const SeriesState a = store_.Get(before)->state;
    const SeriesState b = store.Get(*after)->state;
    EXPECT_EQ(b.total, a.total);
    EXPECT_EQ(b.resets, a.resets);
    EXPECT_EQ(b.samples, a.samples);
    EXPECT_EQ(b.microbursts, a.microbursts);
    EXPECT_EQ(b.last_raw, a.last_raw);
    EXPECT_EQ(b.last_ts_ns, a.last_ts_ns);
    EXPECT_FALSE(b.present) << "absent until a collector registers it again";
    EXPECT_FALSE(b.rate_valid);
  }
  EXPECT_EQ(store.Get(*store.Find(kBytes))->state.resets, 1u);
  // Deltas over restored history work as before.
  auto d0 = store_.Delta(bytes_, kT + 10 * kSec, kT + 20 * kSec);
  auto d1 = store.Delta(*store.Find(kBytes), kT + 10 * kSec, kT + 20 * kSec);
  ASSERT_TRUE(d0.ok() && d1.ok());
  EXPECT_EQ(d1->raw_delta, d0->raw_delta);

  EXPECT_EQ(spans.Stats().spans, 50u);
  TraceId t{};
  t[15] = 2;
  auto a = spans_.FindByTraceId(t);
  auto b = spans.FindByTraceId(t);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i]->span_id, a[i]->span_id);
    EXPECT_EQ(b[i]->parent_span_id, a[i]->parent_span_id);
    EXPECT_EQ(b[i]->name, a[i]->name);
    EXPECT_EQ(b[i]->kind, a[i]->kind);
    EXPECT_EQ(b[i]->start_unix_nano, a[i]->start_unix_nano);
    EXPECT_EQ(b[i]->end_unix_nano, a[i]->end_unix_nano);
    EXPECT_EQ(b[i]->attributes, a[i]->attributes);
    EXPECT_EQ(b[i]->rdma_device, a[i]->rdma_device);
    EXPECT_EQ(b[i]->rdma_port, a[i]->rdma_port);
    EXPECT_EQ(b[i]->netdev, a[i]->netdev);
    EXPECT_EQ(b[i]->gpu, a[i]->gpu);
    EXPECT_EQ(b[i]->pid, a[i]->pid);
    EXPECT_EQ(b[i]->stall_flag, a[i]->stall_flag);
    EXPECT_EQ(b[i]->protocol, a[i]->protocol);
  }

  std::vector<DetectorEvent> ev = events.All();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].detector, "pfc_storm");
  EXPECT_EQ(ev[0].end_unix_nano, kT + 11 * kSec);
  EXPECT_EQ(ev[0].peak, 0.97);
  EXPECT_EQ(ev[0].detected_unix_nano, kT + 10 * kSec + 200 * kMs);
  EXPECT_EQ(ev[0].summary, "PFC storm on eth0 prio 3 rx");
  EXPECT_EQ(ev[0].signals, (std::vector<std::string>{"pfc_pause_frames rx prio 3",
                                                     "pfc_pause_seconds rx prio 3"}));
  EXPECT_EQ(ev[1].signals, std::vector<std::string>{"ecn_marked_packets"});
  EXPECT_EQ(ev[1].merged_into, ev[0].id);
  // Active at the snapshot: closed at the save time, and said so.
  EXPECT_EQ(ev[1].detector, "microburst");
  EXPECT_FALSE(ev[1].active());
  EXPECT_EQ(ev[1].end_unix_nano, kT + 100 * kSec);
  EXPECT_NE(ev[1].summary.find("still active when the daemon stopped"), std::string::npos);
  // New events continue the id sequence.
  EXPECT_EQ(events.Open(DetectorEvent{}), ev[1].id + 1);
}

// Version 3: each span's judged window, phase and stall judgement, and the
// stall learner's sketches, come back; a learner restored judges as the one
// saved.
TEST_F(SnapshotTest, StallJudgementsAndTheLearnerSurviveARestart) {
  StallLearnerOptions lo;
  lo.warmup = 10;
  StallLearner learner(lo, nullptr);
  SpanStore judged({}, &clock_, nullptr);
  for (uint8_t i = 1; i <= 30; ++i) {
    Span s = MakeSpan(1, i, kT + i * kSec, kT + i * kSec + (i == 30 ? 300 : 30) * kMs);
    s.kind = SpanKind::kDecodeStep;
    s.stall_flag = false;
    s.window_start_unix_nano = s.start_unix_nano + kMs;
    s.window_end_unix_nano = s.end_unix_nano;
    s.phase = "decode";
    learner.Judge(&s);
    judged.Add(std::move(s));
  }
  SnapshotCounts counts;
  ASSERT_TRUE(WriteSnapshot(path(), store_, judged, events_, kT + 100 * kSec,
                            absl::InfiniteFuture(), &counts, &learner)
                  .ok());
  const std::string data = Slurp(path());
  Store store;
  SpanStore spans({}, &clock_, nullptr);
  EventLog events(100, nullptr);
  StallLearner restored(lo, nullptr);
  ASSERT_TRUE(RestoreSnapshot(data, &store, &spans, &events, &counts, 0, &restored).ok());
  const auto before = judged.ReadFrom(0, 100).spans;
  const auto after = spans.ReadFrom(0, 100).spans;
  ASSERT_EQ(after.size(), 30u);
  for (size_t i = 0; i < after.size(); ++i) {
    const StallJudgement& a = before[i]->judgement;
    const StallJudgement& b = after[i]->judgement;
    EXPECT_TRUE(b.judged);
    EXPECT_EQ(a.stall, b.stall) << i;
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.cost_kind, b.cost_kind);
    EXPECT_EQ(a.cost, b.cost);
    EXPECT_EQ(a.bound, b.bound);
    EXPECT_EQ(a.samples, b.samples);
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(after[i]->phase, "decode");
    EXPECT_EQ(after[i]->window_start_unix_nano, before[i]->window_start_unix_nano);
  }
  EXPECT_TRUE(after.back()->judgement.stall);  // the 300 ms one
  ASSERT_EQ(restored.keys(), learner.keys());
  EXPECT_EQ(restored.Bounds()[0].bound, learner.Bounds()[0].bound);
  EXPECT_EQ(restored.Bounds()[0].samples, 29u);  // the stall learned at 1 in 8: not yet
}

// A version 2 file (before the learner; here one without spans, whose
// records are the same in both versions) is still read.
TEST_F(SnapshotTest, AVersionTwoFileIsStillRead) {
  SpanStore no_spans({}, &clock_, nullptr);
  SnapshotCounts counts;
  ASSERT_TRUE(WriteSnapshot(path(), store_, no_spans, events_, kT + 100 * kSec,
                            absl::InfiniteFuture(), &counts)
                  .ok());
  std::string v2 = Slurp(path());
  v2[8] = 2;
  v2 = ResealSnapshotForFuzzing(v2);
  Store store;
  SpanStore spans({}, &clock_, nullptr);
  EventLog events(100, nullptr);
  StallLearner learner(StallLearnerOptions{}, nullptr);
  const SnapshotStatus r = RestoreSnapshot(v2, &store, &spans, &events, &counts, 0, &learner);
  EXPECT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(counts.series, 3u);
  EXPECT_EQ(learner.keys(), 0u);
}

TEST_F(SnapshotTest, RestoredSeriesContinueAcrossTheRestart) {
  const std::string data = Save();
  Store store;
  SpanStore spans({}, &clock_, nullptr);
  EventLog events(100, nullptr);
  SnapshotCounts counts;
  ASSERT_TRUE(RestoreSnapshot(data, &store, &spans, &events, &counts).ok());
  const SeriesState before = store.Get(*store.Find(kBytes))->state;
  // The collector finds its series again (same id, present again) and the
  // first delta after the restart spans the downtime.
  const SeriesId id = store.Register(kBytes, *MapCounter(kBytes));
  EXPECT_EQ(id, *store.Find(kBytes));
  EXPECT_TRUE(store.Get(id)->state.present);
  store.Append(id, kT + 105 * kSec, before.last_raw + 1000);
  const SeriesState after = store.Get(id)->state;
  EXPECT_DOUBLE_EQ(after.total, before.total + 1000 * MapCounter(kBytes)->scale);
  EXPECT_TRUE(after.rate_valid);
  EXPECT_DOUBLE_EQ(after.last_rate, 1000 * MapCounter(kBytes)->scale / 5.0);
  EXPECT_EQ(after.samples, before.samples + 1);
}

TEST_F(SnapshotTest, EveryCorruptionOrTruncationIsRejected) {
  const std::string data = Save();
  SnapshotCounts counts;
  // Cut short anywhere: refused (never a partial restore).
  for (size_t len = 0; len < data.size(); len += 1 + len / 7) {
    SnapshotStatus s = ValidateSnapshot(data.substr(0, len), 1ull << 30, &counts);
    EXPECT_FALSE(s.ok()) << "accepted a snapshot cut to " << len << " of " << data.size();
  }
  // One flipped bit anywhere: refused.
  for (size_t pos = 0; pos < data.size(); pos += 1 + pos / 5) {
    std::string bad = data;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    SnapshotStatus s = ValidateSnapshot(bad, 1ull << 30, &counts);
    EXPECT_FALSE(s.ok()) << "accepted a snapshot with byte " << pos << " flipped";
  }
  // Reasons.
  std::string bad = data;
  bad[data.size() / 2] ^= 1;
  EXPECT_EQ(ValidateSnapshot(bad, 1ull << 30, &counts).error, SnapshotError::kChecksum);
  EXPECT_EQ(ValidateSnapshot(data.substr(0, data.size() - 3), 1ull << 30, &counts).error,
            SnapshotError::kTruncated);
  EXPECT_EQ(ValidateSnapshot("not a snapshot at all", 1ull << 30, &counts).error,
            SnapshotError::kFormat);
  bad = data;
  bad[8] = 9;  // format version 9
  EXPECT_EQ(ValidateSnapshot(bad, 1ull << 30, &counts).error, SnapshotError::kVersion);
  // A version 1 file (chunks with their own timestamps, before time columns)
  // with a valid header checksum: refused for its version, never misread.
  bad = data.substr(0, 28);
  bad[8] = 1;
  bad[9] = bad[10] = bad[11] = 0;
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(bad.data()), 24);
  for (int i = 0; i < 4; ++i) bad[24 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  bad += data.substr(28);
  SnapshotStatus v1 = ValidateSnapshot(bad, 1ull << 30, &counts);
  EXPECT_EQ(v1.error, SnapshotError::kVersion);
  EXPECT_NE(v1.detail.find("format version 1"), std::string::npos) << v1.detail;
  Store untouched;
  SpanStore no_spans({}, &clock_, nullptr);
  EventLog no_events(10, nullptr);
  EXPECT_EQ(RestoreSnapshot(bad, &untouched, &no_spans, &no_events, &counts).error,
            SnapshotError::kVersion);
  EXPECT_EQ(untouched.Stats().series, 0u);
  EXPECT_EQ(ValidateSnapshot(data, 100, &counts).error, SnapshotError::kTooLarge);
  EXPECT_EQ(ValidateSnapshot(data + "x", 1ull << 30, &counts).error, SnapshotError::kFormat);
}

TEST_F(SnapshotTest, ASmallerStoreKeepsTheNewestSamples) {
  const std::string data = Save();
  StoreOptions small;
  small.memory_bytes = 48 << 10;
  Store store(small);
  SpanStore spans({}, &clock_, nullptr);
  EventLog events(1, nullptr);  // and a smaller event ring: the newest event
  SnapshotCounts counts;
  ASSERT_TRUE(RestoreSnapshot(data, &store, &spans, &events, &counts).ok());
  const StoreStats st = store.Stats();
  EXPECT_LE(st.bytes, small.memory_bytes);
  EXPECT_GT(st.evicted_samples, 0u);
  EXPECT_GT(st.samples, 0u);
  const std::vector<Sample> all = store_.ReadRange(bytes_, INT64_MIN, INT64_MAX);
  const std::vector<Sample> kept = store.ReadRange(*store.Find(kBytes), INT64_MIN, INT64_MAX);
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.back(), all.back());
  ASSERT_EQ(events.All().size(), 1u);
  EXPECT_EQ(events.All()[0].detector, "microburst");
}

TEST_F(SnapshotTest, AMissedDeadlineLeavesThePreviousSnapshot) {
  const std::string first = Save();
  SnapshotCounts counts;
  absl::Status s =
      WriteSnapshot(path(), store_, spans_, events_, kT, absl::InfinitePast(), &counts);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(Slurp(path()), first);
  EXPECT_NE(access((path() + ".tmp").c_str(), F_OK), 0) << "temporary file left behind";
  // An unwritable place fails with a message naming it.
  s = WriteSnapshot("/nonexistent-dir/snapshot", store_, spans_, events_, kT,
                    absl::InfiniteFuture(), &counts);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("/nonexistent-dir/snapshot.tmp"), std::string::npos);
}

TEST_F(SnapshotTest, MappedSnapshotReportsMissingAndTooLarge) {
  bool missing = false;
  {
    MappedSnapshot file;
    SnapshotStatus s = file.Open(path(), 1ull << 30, &missing);
    EXPECT_EQ(s.error, SnapshotError::kIo);
    EXPECT_TRUE(missing);
  }
  const std::string saved = Save();
  MappedSnapshot file;
  SnapshotStatus s = file.Open(path(), 1ull << 30, &missing);
  ASSERT_TRUE(s.ok()) << s.detail;
  EXPECT_EQ(file.data(), saved);
  MappedSnapshot small;
  s = small.Open(path(), 1000, &missing);
  EXPECT_EQ(s.error, SnapshotError::kTooLarge);
  EXPECT_FALSE(missing);
  // An empty file maps to nothing and is refused by the reader.
  std::FILE* f = std::fopen(path().c_str(), "w");
  std::fclose(f);
  MappedSnapshot empty;
  ASSERT_TRUE(empty.Open(path(), 1000, &missing).ok());
  SnapshotCounts counts;
  EXPECT_EQ(ValidateSnapshot(empty.data(), 1000, &counts).error, SnapshotError::kFormat);
}

// Reading on several threads changes nothing in what is restored or refused.
TEST_F(SnapshotTest, ThreadsChangeNothingInWhatIsRestoredOrRefused) {
  const std::string data = Save();
  Store one;
  SpanStore one_spans({}, &clock_, nullptr);
  EventLog one_events(100, nullptr);
  SnapshotCounts one_counts;
  ASSERT_TRUE(RestoreSnapshot(data, &one, &one_spans, &one_events, &one_counts, 1).ok());
  for (int threads : {2, 4}) {
    Store store;
    SpanStore spans({}, &clock_, nullptr);
    EventLog events(100, nullptr);
    SnapshotCounts counts;
    SnapshotStatus r = RestoreSnapshot(data, &store, &spans, &events, &counts, threads);
    ASSERT_TRUE(r.ok()) << r.detail;
    EXPECT_EQ(counts.series, one_counts.series);
    EXPECT_EQ(counts.chunks, one_counts.chunks);
    EXPECT_EQ(counts.samples, one_counts.samples);
    EXPECT_EQ(counts.chunks_dropped, 0u);
    EXPECT_EQ(store.Stats().bytes, one.Stats().bytes) << threads;
    EXPECT_EQ(store.Stats().samples, store_.Stats().samples);
    for (const SeriesKey& k : {kBytes, kPause, kPfcEnabled}) {
      ASSERT_EQ(store.Find(k), one.Find(k)) << k.name << ": ids follow the file";
      EXPECT_EQ(store.ReadRange(*store.Find(k), INT64_MIN, INT64_MAX),
                store_.ReadRange(*store_.Find(k), INT64_MIN, INT64_MAX))
          << k.name;
    }
    EXPECT_EQ(spans.Stats().spans, 50u);
    EXPECT_EQ(events.All().size(), 2u);
  }
  // The same reason and record as one thread reports, for every corruption;
  // and nothing restored from a file that fails.
  for (size_t pos = 0; pos < data.size(); pos += 1 + pos / 2) {
    std::string bad = data;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x21);
    for (const std::string& in : {bad, ResealSnapshotForFuzzing(bad), data.substr(0, pos)}) {
      SnapshotCounts counts;
      const SnapshotStatus a = ValidateSnapshot(in, 1ull << 30, &counts, 1);
      const SnapshotStatus b = ValidateSnapshot(in, 1ull << 30, &counts, 4);
      EXPECT_EQ(a.error, b.error) << pos;
      EXPECT_EQ(a.detail, b.detail) << pos;
      if (a.ok() || pos % 7 != 0) continue;
      Store untouched;
      SpanStore no_spans({}, &clock_, nullptr);
      EventLog no_events(10, nullptr);
      EXPECT_EQ(RestoreSnapshot(in, &untouched, &no_spans, &no_events, &counts, 4).error, a.error);
      EXPECT_EQ(untouched.Stats().series, 0u);
      EXPECT_EQ(no_spans.Stats().spans, 0u);
      EXPECT_TRUE(no_events.All().empty());
    }
  }
}

// A chunk whose stream the file's CRC vouches for but that does not decode
// to its header (restored on several threads): dropped when first read,
// counted, never served.
TEST_F(SnapshotTest, ARestoredChunkThatDoesNotDecodeIsDroppedAndCounted) {
  std::string data = Save();
  std::string stream;
  int64_t first_ts = 0;
  store_.Dump([&](const SeriesDump& d) {
    if (*d.key != kBytes) return true;
    for (const SeriesDump::ChunkRef& c : d.chunks) {
      if (ChunkWriter::ByteSize(c.header) >= 64 && c.block != nullptr) {
        stream.assign(reinterpret_cast<const char*>(c.data), ChunkWriter::ByteSize(c.header));
        first_ts = c.header.first_ts;
        break;
      }
    }
    return false;
  });
  ASSERT_FALSE(stream.empty());
  const size_t at = data.find(stream);
  ASSERT_NE(at, std::string::npos);
  data[at + stream.size() / 2] ^= 0x5a;
  data = ResealSnapshotForFuzzing(data);
  Store store;
  SpanStore spans({}, &clock_, nullptr);
  EventLog events(100, nullptr);
  SnapshotCounts counts;
  SnapshotStatus r = RestoreSnapshot(data, &store, &spans, &events, &counts, 2);
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(store.Stats().corrupt_chunks, 0u);
  const std::vector<Sample> all = store_.ReadRange(bytes_, INT64_MIN, INT64_MAX);
  const std::vector<Sample> read = store.ReadRange(*store.Find(kBytes), INT64_MIN, INT64_MAX);
  EXPECT_EQ(store.Stats().corrupt_chunks, 1u);
  EXPECT_LT(read.size(), all.size());
  for (const Sample& s : read) EXPECT_NE(s.ts_ns, first_ts);
  EXPECT_EQ(read.back(), all.back());
  store.ReadRange(*store.Find(kBytes), INT64_MIN, INT64_MAX);
  EXPECT_EQ(store.Stats().corrupt_chunks, 1u);  // counted once
}

}  // namespace
}  // namespace snapshot_test
}  // namespace fabricscope
