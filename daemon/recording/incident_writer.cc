#include "daemon/recording/incident_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <queue>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/correlate/correlator.h"

namespace fabricscope {
namespace {

const MetricSpec& kWritten = DefineMetric(
    {.name = "fabricscope_incidents_written_total",
     .type = MetricType::kCounter,
     .help = "Incident recordings (--incident-dir) written: one per detector episode, or per "
             "group of overlapping episodes on one port.",
     .labels = {},
     .component = "incidents"});
const MetricSpec& kWrittenBytes =
    DefineMetric({.name = "fabricscope_incident_written_bytes_total",
                  .type = MetricType::kCounter,
                  .help = "Bytes of the incident recordings written to --incident-dir.",
                  .labels = {},
                  .component = "incidents"});
const MetricSpec& kDeleted = DefineMetric(
    {.name = "fabricscope_incidents_deleted_total",
     .type = MetricType::kCounter,
     .help = "Incident recordings deleted (oldest first) to keep --incident-dir within "
             "--incident-dir-max.",
     .labels = {},
     .component = "incidents"});
const MetricSpec& kDropped = DefineMetric(
    {.name = "fabricscope_incidents_dropped_total",
     .type = MetricType::kCounter,
     .help = "Detector episodes not recorded to --incident-dir: the most recordings allowed "
             "to wait for their window to close (64) were waiting, or the daemon stopped before "
             "it had time to write them (1 s at SIGTERM).",
     .labels = {},
     .component = "incidents"});
const MetricSpec& kWriteErrors = DefineMetric(
    {.name = "fabricscope_incident_write_errors_total",
     .type = MetricType::kCounter,
     .help = "Incident recordings lost, by reason: io (the directory cannot be created or "
             "written, disk full, rename failed), too_large (one recording alone exceeds "
             "--incident-dir-max).",
     .labels = {"reason"},
     .component = "incidents"});
const MetricSpec& kDirBytes =
    DefineMetric({.name = "fabricscope_incident_dir_bytes",
                  .type = MetricType::kGauge,
                  .help = "Bytes of the incident recordings in --incident-dir (after the last "
                          "write and deletion).",
                  .labels = {},
                  .component = "incidents"});

constexpr absl::string_view kPrefix = "incident-";
constexpr absl::string_view kSuffix = ".jsonl";
constexpr absl::string_view kTmpPrefix = ".incident-";
constexpr absl::string_view kTmpSuffix = ".tmp";

// Whether a group (its port) and an event name the same port: by device and
// port where both know the device, else by netdev; two events without any
// port are host-wide and share one recording.
bool SamePort(const std::string& device, uint32_t port, const std::string& netdev,
              const DetectorEvent& e) {
  if (!device.empty() && !e.device.empty()) return device == e.device && port == e.port;
  if (!netdev.empty() && !e.netdev.empty()) return netdev == e.netdev;
  return device.empty() && netdev.empty() && e.device.empty() && e.netdev.empty();
}

// A series of the recorded port (every series when no port is known).
bool InPort(const SeriesKey& k, const IncidentHeader& h) {
  if (h.device.empty() && h.netdev.empty()) return true;
  if (!h.device.empty() && k.device == h.device &&
      (h.port == 0 || k.port == 0 || k.port == h.port)) {
    return true;
  }
  return !h.netdev.empty() && k.netdev == h.netdev;
}

// Keeps [A-Za-z0-9_.] of a name part; the rest becomes '_'.
std::string FilePart(absl::string_view s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.';
    out.push_back(ok ? c : '_');
  }
  return out.empty() ? "_" : out;
}

// incident-20261201T214204.123Z-pfc_storm-storm-mlx5_0.1-eth2: the first
// start, then the headline episode (IncidentHeader::Headline) and the port.
std::string BaseName(const IncidentHeader& h) {
  const DetectorEvent* headline = h.Headline();
  // Episodes are in start order (MakeJob).
  const int64_t first_start =
      h.episodes.empty() ? h.from_unix_nano : h.episodes.front().start_unix_nano;
  std::string port;
  if (!h.device.empty()) port = absl::StrCat(FilePart(h.device), ".", h.port);
  if (!h.netdev.empty()) absl::StrAppend(&port, port.empty() ? "" : "-", FilePart(h.netdev));
  if (port.empty()) port = "host";
  return absl::StrCat(
      kPrefix,
      absl::FormatTime("%Y%m%dT%H%M%E3SZ", absl::FromUnixNanos(first_start), absl::UTCTimeZone()),
      "-", FilePart(headline != nullptr ? headline->detector : "unknown"), "-",
      FilePart(headline != nullptr ? headline->kind : "unknown"), "-", port);
}

v1::Span ToRecordSpan(const Span& span) {
  v1::Span out;
  out.set_trace_id(std::string(span.trace_id.begin(), span.trace_id.end()));
  out.set_span_id(std::string(span.span_id.begin(), span.span_id.end()));
  if (span.parent_span_id != SpanId{}) {
    out.set_parent_span_id(std::string(span.parent_span_id.begin(), span.parent_span_id.end()));
  }
  out.set_name(span.name);
  // SpanKind's values are the proto's (fabricscope/v1/span.proto).
  out.set_kind(static_cast<v1::SpanKind>(static_cast<int>(span.kind)));
  out.set_start_unix_nano(static_cast<uint64_t>(span.start_unix_nano));
  out.set_end_unix_nano(static_cast<uint64_t>(span.end_unix_nano));
  for (const auto& [k, v] : span.attributes) {
    v1::Attribute* a = out.add_attributes();
    a->set_key(k);
    a->set_value(v);
  }
  return out;
}

// Writes lines to a FILE, counting bytes, stopping at the first error or
// when the limit is passed.
class LineWriter {
 public:
  LineWriter(FILE* f, uint64_t limit) : f_(f), limit_(limit) {}
  bool Put(const std::string& line) {
    if (!ok()) return false;
    if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() ||
        std::fputc('\n', f_) == EOF) {
      errno_ = errno;
      return false;
    }
    bytes_ += line.size() + 1;
    return !too_large();
  }
  bool ok() const { return errno_ == 0 && !too_large(); }
  bool too_large() const { return bytes_ > limit_; }
  int error() const { return errno_; }
  uint64_t bytes() const { return bytes_; }

 private:
  FILE* const f_;
  const uint64_t limit_;
  uint64_t bytes_ = 0;
  int errno_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<IncidentFile>> ListIncidentFiles(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) {
    return absl::UnavailableError(absl::StrCat("cannot read ", dir, ": ", std::strerror(errno)));
  }
  std::vector<IncidentFile> out;
  while (const dirent* ent = readdir(d.get())) {
    const absl::string_view name = ent->d_name;
    if (!absl::StartsWith(name, kPrefix) || !absl::EndsWith(name, kSuffix)) continue;
    struct stat st {};
    if (fstatat(dirfd(d.get()), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    out.push_back({std::string(name), static_cast<uint64_t>(st.st_size)});
  }
  std::sort(out.begin(), out.end(),
            [](const IncidentFile& a, const IncidentFile& b) { return a.name < b.name; });
  return out;
}

IncidentWriter::IncidentWriter(IncidentOptions options, const Store* store, const SpanStore* spans,
                               const PortInventory* ports, Clock* clock, MetricsRegistry* metrics)
    : options_(std::move(options)), store_(store), spans_(spans), ports_(ports), clock_(clock) {
  if (metrics != nullptr) {
    written_metric_ = &metrics->Counter(kWritten).Add({});
    bytes_metric_ = &metrics->Counter(kWrittenBytes).Add({});
    deleted_metric_ = &metrics->Counter(kDeleted).Add({});
    dropped_metric_ = &metrics->Counter(kDropped).Add({});
    io_errors_metric_ = &metrics->Counter(kWriteErrors).Add({{"reason", "io"}});
    too_large_metric_ = &metrics->Counter(kWriteErrors).Add({{"reason", "too_large"}});
    dir_bytes_metric_ = &metrics->Gauge(kDirBytes).Add({});
  }
}

IncidentWriter::~IncidentWriter() { Stop(); }

// --- the table of waiting recordings (detector threads) -------------------------------

void IncidentWriter::OnEventOpened(const DetectorEvent& e) {
  std::lock_guard lock(mu_);
  Group* g = nullptr;
  for (Group& candidate : groups_) {
    if (SamePort(candidate.device, candidate.port, candidate.netdev, e)) {
      g = &candidate;
      break;
    }
  }
  if (g == nullptr) {
    if (groups_.size() >= options_.max_pending) {
      ++stats_.dropped;
      if (dropped_metric_ != nullptr) dropped_metric_->Increment();
      return;
    }
    g = &groups_.emplace_back();
    g->uid = next_uid_++;
  }
  if (g->device.empty() && !e.device.empty()) {
    g->device = e.device;
    g->port = e.port;
  }
  if (g->netdev.empty()) g->netdev = e.netdev;
  g->first_start = std::min(g->first_start, e.start_unix_nano);
  ++g->open;
  open_[e.id] = g->uid;
  if (g->episodes.size() < options_.max_episodes) {
    g->episodes.push_back(e);
  } else {
    ++g->omitted;
  }
}

void IncidentWriter::OnEventClosed(const DetectorEvent& e) {
  std::lock_guard lock(mu_);
  auto it = open_.find(e.id);
  if (it == open_.end()) return;  // dropped, or its recording was capped
  const uint64_t uid = it->second;
  open_.erase(it);
  for (Group& g : groups_) {
    if (g.uid != uid) continue;
    g.open = g.open > 0 ? g.open - 1 : 0;
    g.last_end = std::max(g.last_end, e.end_unix_nano);
    for (DetectorEvent& listed : g.episodes) {
      if (listed.id != e.id) continue;
      listed.end_unix_nano = e.end_unix_nano;
      listed.peak = e.peak;
      listed.summary = e.summary;
    }
    return;
  }
}

IncidentWriter::Job IncidentWriter::MakeJob(Group g, int64_t to_unix_nano,
                                            std::string closed) const {
  Job job;
  IncidentHeader& h = job.header;
  h.from_unix_nano = g.first_start - absl::ToInt64Nanoseconds(options_.before);
  h.to_unix_nano = std::max(to_unix_nano, g.first_start);
  h.device = std::move(g.device);
  h.port = g.port;
  h.netdev = std::move(g.netdev);
  h.closed = std::move(closed);
  h.episodes = std::move(g.episodes);
  h.episodes_omitted = g.omitted;
  std::stable_sort(h.episodes.begin(), h.episodes.end(),
                   [](const DetectorEvent& a, const DetectorEvent& b) {
                     return a.start_unix_nano < b.start_unix_nano;
                   });
  return job;
}

std::vector<IncidentWriter::Job> IncidentWriter::TakeDue(bool flush) {
  const int64_t now = clock_->RealtimeNs();
  const int64_t after = absl::ToInt64Nanoseconds(options_.after);
  const int64_t max_duration = absl::ToInt64Nanoseconds(options_.max_duration);
  std::vector<Job> jobs;
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < groups_.size();) {
    Group& g = groups_[i];
    const int64_t cap_end = g.first_start + max_duration;
    int64_t to = 0;
    std::string closed;
    if (g.open > 0) {
      // Still active: due at the cap.
      to = cap_end;
      closed = "capped";
    } else {
      to = std::min(g.last_end, cap_end) + after;
      closed = g.last_end > cap_end ? "capped" : "ended";
    }
    if (now < to) {
      if (!flush) {
        ++i;
        continue;
      }
      to = now;
      closed = "stopped";
    }
    for (auto it = open_.begin(); it != open_.end();) {
      if (it->second == g.uid) {
        open_.erase(it++);
      } else {
        ++it;
      }
    }
    jobs.push_back(MakeJob(std::move(g), to, std::move(closed)));
    groups_.erase(groups_.begin() + static_cast<ptrdiff_t>(i));
  }
  return jobs;
}

// --- the writer thread ------------------------------------------------------------------

void IncidentWriter::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard wlock(write_mu_);
    if (EnsureDir()) {
      // Temporary files of a write that a crash interrupted.
      if (std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(options_.dir.c_str()), closedir); d) {
        while (const dirent* ent = readdir(d.get())) {
          const absl::string_view name = ent->d_name;
          if (absl::StartsWith(name, kTmpPrefix) && absl::EndsWith(name, kTmpSuffix)) {
            unlinkat(dirfd(d.get()), ent->d_name, 0);
          }
        }
      }
      Prune();
    }
  }
  thread_ = std::thread([this] {
    const auto period = absl::ToChronoNanoseconds(options_.poll_period);
    while (!stop_.Notified()) {
      RunOnce();
      clock_->SleepUntil(clock_->SteadyNow() + period, &stop_);
    }
  });
}

void IncidentWriter::Stop() {
  if (!stop_.Notified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

size_t IncidentWriter::RunOnce() {
  std::lock_guard wlock(write_mu_);
  size_t n = 0;
  for (const Job& job : TakeDue(/*flush=*/false)) n += Write(job) ? 1 : 0;
  return n;
}

size_t IncidentWriter::Flush(absl::Duration budget) {
  std::lock_guard wlock(write_mu_);
  const SteadyTime deadline =
      budget == absl::InfiniteDuration()
          ? SteadyTime::max()
          : clock_->SteadyNow() +
                std::chrono::duration_cast<SteadyDuration>(absl::ToChronoNanoseconds(budget));
  size_t n = 0;
  uint64_t late = 0;
  for (const Job& job : TakeDue(/*flush=*/true)) {
    if (clock_->SteadyNow() >= deadline) {
      late += job.header.episodes.size() + job.header.episodes_omitted;
      continue;
    }
    n += Write(job) ? 1 : 0;
  }
  if (late > 0) {
    {
      std::lock_guard lock(mu_);
      stats_.dropped += late;
    }
    if (dropped_metric_ != nullptr) dropped_metric_->Increment(static_cast<double>(late));
    Log(LogLevel::kWarn, "incidents", "stopping: no time left to record these episodes",
        {{"episodes", absl::StrCat(late)}, {"budget", absl::FormatDuration(budget)}});
  }
  return n;
}

IncidentStats IncidentWriter::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t IncidentWriter::pending() const {
  std::lock_guard lock(mu_);
  return groups_.size();
}

void IncidentWriter::Error(const std::string& reason, const std::string& what) {
  {
    std::lock_guard lock(mu_);
    ++stats_.write_errors;
  }
  prometheus::Counter* c = reason == "io" ? io_errors_metric_ : too_large_metric_;
  if (c != nullptr) c->Increment();
  uint64_t suppressed = 0;
  if (log_limiter_.Allow(reason, &suppressed)) {
    Log(LogLevel::kWarn, "incidents", "incident recording lost",
        {{"dir", options_.dir},
         {"reason", reason},
         {"error", what},
         {"suppressed", absl::StrCat(suppressed)}});
  }
}

bool IncidentWriter::EnsureDir() {
  struct stat st {};
  if (stat(options_.dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    Error("io", absl::StrCat(options_.dir, " is not a directory"));
    return false;
  }
  if (errno != ENOENT) {
    Error("io", absl::StrCat("cannot stat ", options_.dir, ": ", std::strerror(errno)));
    return false;
  }
  // Like --state-dir: created for the user the daemon runs as, 0700 (the
  // recordings hold span attributes).
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (!ec) {
    std::filesystem::permissions(options_.dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
  }
  if (ec) {
    Error("io", absl::StrCat("cannot create ", options_.dir, ": ", ec.message()));
    return false;
  }
  Log(LogLevel::kInfo, "incidents", "created the incident directory",
      {{"dir", options_.dir}, {"mode", "0700"}});
  return true;
}

bool IncidentWriter::Write(const Job& job) {
  if (!EnsureDir()) return false;
  IncidentHeader h = job.header;
  // Complete the port from the inventory (an event may name only one side).
  if (h.device.empty() != h.netdev.empty()) {
    for (const PortInfo& p : ports_->List()) {
      if (h.device.empty() && p.netdev == h.netdev && !p.device.empty()) {
        h.device = p.device;
        h.port = p.port;
        break;
      }
      if (h.netdev.empty() && p.device == h.device && p.port == h.port && !p.netdev.empty()) {
        h.netdev = p.netdev;
        break;
      }
    }
  }

  // The port's series in the window.
  struct SeriesData {
    const SeriesKey* key;
    std::vector<Sample> samples;
  };
  std::vector<SeriesData> series;
  for (const SeriesSnapshot& s : store_->Snapshot()) {
    if (s.key == nullptr || s.signal == nullptr || !InPort(*s.key, h)) continue;
    std::vector<Sample> samples = store_->ReadRange(s.id, h.from_unix_nano, h.to_unix_nano);
    if (!samples.empty()) series.push_back({s.key, std::move(samples)});
  }
  // The spans in the port's scope, by end.
  std::vector<SpanRef> spans;
  if (spans_ != nullptr) {
    const std::vector<PortInfo> ports = ports_->List();
    std::optional<HostTopology> topology;
    const SeriesKey port_key{"", "", h.device, h.port, h.netdev};
    for (SpanRef& s :
         spans_->FindOverlapping(h.from_unix_nano, h.to_unix_nano, {}, options_.max_spans)) {
      if (SpanScope::UsesGpuHint(*s) && !topology) topology = ports_->Topology();
      if (SpanScope(*s, ports, topology ? &*topology : nullptr).Contains(port_key)) {
        spans.push_back(std::move(s));
      }
    }
    std::stable_sort(spans.begin(), spans.end(), [](const SpanRef& a, const SpanRef& b) {
      return a->end_unix_nano < b->end_unix_nano;
    });
  }

  std::string name = BaseName(h);
  std::string final_path = absl::StrCat(options_.dir, "/", name, kSuffix);
  struct stat st {};
  for (int i = 2; stat(final_path.c_str(), &st) == 0 && i < 1000; ++i) {
    final_path = absl::StrCat(options_.dir, "/", name, "-", i, kSuffix);
  }
  const std::string tmp_path = absl::StrCat(options_.dir, "/.", name, kTmpSuffix);
  const int fd = open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    Error("io", absl::StrCat("cannot create ", tmp_path, ": ", std::strerror(errno)));
    return false;
  }
  FILE* f = fdopen(fd, "w");
  if (f == nullptr) {
    close(fd);
    unlink(tmp_path.c_str());
    Error("io", absl::StrCat("fdopen ", tmp_path, ": ", std::strerror(errno)));
    return false;
  }
  LineWriter out(f, options_.dir_max_bytes);
  out.Put(FormatIncidentLine(h));
  // Samples in time order (a merge of the series), each span at its end
  // (after the samples of the same instant), as `fabricscope record` writes.
  using Cursor = std::pair<int64_t, size_t>;  // (ts, series index)
  std::priority_queue<Cursor, std::vector<Cursor>, std::greater<Cursor>> heap;
  std::vector<size_t> pos(series.size(), 0);
  for (size_t i = 0; i < series.size(); ++i) heap.emplace(series[i].samples[0].ts_ns, i);
  size_t next_span = 0;
  while (out.ok() && (!heap.empty() || next_span < spans.size())) {
    if (next_span < spans.size() &&
        (heap.empty() || spans[next_span]->end_unix_nano < heap.top().first)) {
      out.Put(FormatSpanLine(ToRecordSpan(*spans[next_span++])));
      continue;
    }
    const auto [ts, i] = heap.top();
    heap.pop();
    const Sample& s = series[i].samples[pos[i]];
    out.Put(FormatSampleLine(s.ts_ns, *series[i].key, s.value));
    if (++pos[i] < series[i].samples.size()) heap.emplace(series[i].samples[pos[i]].ts_ns, i);
  }
  const bool flushed = std::fflush(f) == 0 && !std::ferror(f);
  const int flush_errno = flushed ? 0 : errno;
  const bool closed = std::fclose(f) == 0;
  if (out.too_large()) {
    unlink(tmp_path.c_str());
    Error("too_large", absl::StrCat(name, " exceeds --incident-dir-max (", options_.dir_max_bytes,
                                    " bytes) on its own"));
    return false;
  }
  if (out.error() != 0 || !flushed || !closed) {
    const int e = out.error() != 0 ? out.error() : flush_errno != 0 ? flush_errno : errno;
    unlink(tmp_path.c_str());
    Error("io", absl::StrCat("writing ", tmp_path, ": ", std::strerror(e)));
    return false;
  }
  if (std::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp_path.c_str());
    Error("io", absl::StrCat("rename to ", final_path, ": ", std::strerror(e)));
    return false;
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.written;
    stats_.bytes += out.bytes();
  }
  if (written_metric_ != nullptr) written_metric_->Increment();
  if (bytes_metric_ != nullptr) bytes_metric_->Increment(static_cast<double>(out.bytes()));
  Log(LogLevel::kInfo, "incidents", "incident recorded",
      {{"file", final_path},
       {"detector", h.Headline() != nullptr ? h.Headline()->detector : ""},
       {"kind", h.Headline() != nullptr ? h.Headline()->kind : ""},
       {"episodes", absl::StrCat(h.episodes.size() + h.episodes_omitted)},
       {"series", absl::StrCat(series.size())},
       {"spans", absl::StrCat(spans.size())},
       {"bytes", absl::StrCat(out.bytes())}});
  Prune();
  return true;
}

void IncidentWriter::Prune() {
  absl::StatusOr<std::vector<IncidentFile>> files = ListIncidentFiles(options_.dir);
  if (!files.ok()) {
    Error("io", std::string(files.status().message()));
    return;
  }
  uint64_t total = 0;
  for (const IncidentFile& f : *files) total += f.size;
  // Oldest first; the newest is never larger than the bound on its own.
  for (size_t i = 0; total > options_.dir_max_bytes && i + 1 < files->size(); ++i) {
    const IncidentFile& f = (*files)[i];
    const std::string path = absl::StrCat(options_.dir, "/", f.name);
    if (unlink(path.c_str()) != 0) {
      Error("io", absl::StrCat("cannot delete ", path, ": ", std::strerror(errno)));
      break;
    }
    total -= f.size;
    {
      std::lock_guard lock(mu_);
      ++stats_.deleted;
    }
    if (deleted_metric_ != nullptr) deleted_metric_->Increment();
  }
  if (dir_bytes_metric_ != nullptr) dir_bytes_metric_->Set(static_cast<double>(total));
}

}  // namespace fabricscope
