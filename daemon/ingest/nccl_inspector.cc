#include "daemon/ingest/nccl_inspector.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/kubernetes/host_view.h"
#include "daemon/recording/recording.h"

namespace fabricscope {
namespace {

const MetricSpec& kRecords = DefineMetric(
    {.name = "fabricscope_nccl_inspector_records_total",
     .type = MetricType::kCounter,
     .help = "NCCL Inspector records read from --nccl-inspector-dir: span (became a span and was "
             "stored), rejected (a span the ingest validation refused, e.g. too old), malformed "
             "(not a record: unparsable, missing fields or longer than 64KiB; skipped).",
     .labels = {"result"},
     .component = "ingest"});
const MetricSpec& kBytes = DefineMetric({.name = "fabricscope_nccl_inspector_bytes_read_total",
                                         .type = MetricType::kCounter,
                                         .help = "Bytes read from the NCCL Inspector dump files.",
                                         .labels = {},
                                         .component = "ingest"});
const MetricSpec& kFiles = DefineMetric({.name = "fabricscope_nccl_inspector_files",
                                         .type = MetricType::kGauge,
                                         .help = "NCCL Inspector dump files tailed now.",
                                         .labels = {},
                                         .component = "ingest"});
const MetricSpec& kRestarts = DefineMetric(
    {.name = "fabricscope_nccl_inspector_restarts_total",
     .type = MetricType::kCounter,
     .help = "NCCL Inspector dump files read again from their start: rotated (a new file under "
             "the name) or truncated (shorter than what was read).",
     .labels = {"reason"},
     .component = "ingest"});
const MetricSpec& kSkipped = DefineMetric(
    {.name = "fabricscope_nccl_inspector_files_skipped_total",
     .type = MetricType::kCounter,
     .help = "NCCL Inspector dump files not tailed because 1024 files already were (counted once "
             "per file and poll).",
     .labels = {},
     .component = "ingest"});

uint64_t Fnv(absl::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

template <size_t N>
void FillId(uint64_t a, uint64_t b, std::array<uint8_t, N>* out) {
  for (size_t i = 0; i < N; ++i) {
    const uint64_t w = i < 8 ? a : b;
    (*out)[i] = static_cast<uint8_t>(w >> (8 * (i % 8)));
  }
  if (std::all_of(out->begin(), out->end(), [](uint8_t x) { return x == 0; })) (*out)[0] = 1;
}

// A JSON number or numeric string as double; false when absent or not one.
bool Number(const JsonValue* v, double* out) {
  if (v == nullptr) return false;
  if (v->type == JsonValue::kNumber) return absl::SimpleAtod(v->raw, out);
  if (v->type == JsonValue::kString) return absl::SimpleAtod(v->str, out);
  return false;
}

// A scalar as text (string verbatim, number as written).
std::string Text(const JsonValue* v) {
  if (v == nullptr) return "";
  if (v->type == JsonValue::kString) return v->str;
  if (v->type == JsonValue::kNumber) return std::string(v->raw);
  return "";
}

}  // namespace

NcclInspectorTailer::NcclInspectorTailer(NcclInspectorOptions options, SpanIngester* ingester,
                                         Clock* clock, MetricsRegistry* metrics)
    : options_(std::move(options)), ingester_(ingester), clock_(clock) {
  ingester_->RegisterOwn(IngestProtocol::kNcclInspector);
  auto& records = metrics->Counter(kRecords);
  spans_ = &records.Add({{"result", "span"}});
  malformed_ = &records.Add({{"result", "malformed"}});
  rejected_ = &records.Add({{"result", "rejected"}});
  bytes_ = &metrics->Counter(kBytes).Add({});
  rotated_ = &metrics->Counter(kRestarts).Add({{"reason", "rotated"}});
  truncated_ = &metrics->Counter(kRestarts).Add({{"reason", "truncated"}});
  skipped_ = &metrics->Counter(kSkipped).Add({});
  files_gauge_ = &metrics->Gauge(kFiles).Add({});
  LoadOffsets();
}

NcclInspectorTailer::~NcclInspectorTailer() { Stop(); }

void NcclInspectorTailer::Start() {
  thread_ = std::thread([this] {
    SteadyTime next = clock_->SteadyNow();
    while (!stop_.Notified()) {
      PollOnce();
      next += absl::ToChronoNanoseconds(options_.poll_period);
      const SteadyTime now = clock_->SteadyNow();
      if (next < now) next = now;
      if (!clock_->SleepUntil(next, &stop_)) break;
    }
  });
}

void NcclInspectorTailer::Stop() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

bool NcclInspectorTailer::ParseRecord(absl::string_view object, Span* span, std::string* why) {
  auto parsed = ParseJson(object);
  if (!parsed.ok()) {
    *why = std::string(parsed.status().message());
    return false;
  }
  const JsonValue* header = parsed->Get("header");
  const JsonValue* meta = parsed->Get("metadata");
  const JsonValue* perf = parsed->Get("coll_perf");
  const bool p2p = perf == nullptr;
  if (p2p) perf = parsed->Get("p2p_perf");
  if (header == nullptr || header->type != JsonValue::kObject || meta == nullptr ||
      meta->type != JsonValue::kObject || perf == nullptr || perf->type != JsonValue::kObject) {
    *why = "not a record: wants objects header, metadata and coll_perf or p2p_perf";
    return false;
  }
  const std::string comm_id = Text(header->Get("id"));
  std::string name = Text(perf->Get(p2p ? "p2p_op" : "coll"));
  if (p2p && name.empty()) name = Text(perf->Get("coll"));
  if (p2p && name.empty()) name = "p2p";
  double sn = 0, bytes = 0, exec_us = 0, dump_us = 0, pid = 0;
  if (comm_id.empty() || name.empty() || !Number(perf->Get("coll_sn"), &sn) ||
      !Number(perf->Get("coll_msg_size_bytes"), &bytes) ||
      !Number(perf->Get("coll_exec_time_us"), &exec_us)) {
    *why = "record without id, collective, coll_sn, coll_msg_size_bytes or coll_exec_time_us";
    return false;
  }
  // Every number is converted to an integer below: out of range is malformed.
  if (!(sn >= 0 && sn < 1.8e19) || !(bytes >= 0 && bytes < 1.8e19) ||
      !(exec_us >= 0 && exec_us < 9e15)) {
    *why = "coll_sn, coll_msg_size_bytes or coll_exec_time_us out of range";
    return false;
  }
  // Kernel timestamps (verbose dumps): the earliest start, the latest stop.
  int64_t start_us = 0, stop_us = 0;
  if (const JsonValue* ts = perf->Get("event_trace_ts"); ts != nullptr) {
    if (const JsonValue* ks = ts->Get("kernel_events"); ks != nullptr) {
      for (const JsonValue& k : ks->items) {
        double a = 0, b = 0;
        if (!Number(k.Get("kernel_start_ts"), &a) || !Number(k.Get("kernel_stop_ts"), &b) ||
            a <= 0 || b < a || b > 9e15) {
          continue;
        }
        start_us =
            start_us == 0 ? static_cast<int64_t>(a) : std::min(start_us, static_cast<int64_t>(a));
        stop_us = std::max(stop_us, static_cast<int64_t>(b));
      }
    }
  }
  bool estimated = false;
  if (start_us == 0) {
    if (!Number(meta->Get("dump_timestamp_us"), &dump_us) || dump_us <= 0 || dump_us > 9e15) {
      *why = "record without kernel timestamps or dump_timestamp_us";
      return false;
    }
    stop_us = static_cast<int64_t>(dump_us);
    start_us = std::max<int64_t>(0, stop_us - static_cast<int64_t>(exec_us));
    estimated = true;
  }
  Number(meta->Get("pid"), &pid);
  std::string communicator = Text(header->Get("comm_name"));
  if (communicator.empty()) communicator = comm_id;
  const std::string rank = Text(header->Get("rank"));
  const std::string sn_text = absl::StrCat(static_cast<uint64_t>(sn));

  *span = Span{};
  const uint64_t trace = Fnv(sn_text, Fnv(comm_id));
  FillId(trace, Fnv("trace", trace), &span->trace_id);
  FillId(Fnv(rank, Fnv(absl::StrCat(static_cast<uint64_t>(pid)), trace)), 0, &span->span_id);
  span->name = name;
  span->kind = SpanKind::kCollective;
  span->start_unix_nano = start_us * 1000;
  span->end_unix_nano = stop_us * 1000;
  auto& a = span->attributes;
  a.emplace_back("service.name", "nccl");
  a.emplace_back("nccl.communicator", communicator);
  a.emplace_back("nccl.comm_id", comm_id);
  a.emplace_back("nccl.rank", rank);
  a.emplace_back("nccl.n_ranks", Text(header->Get("n_ranks")));
  a.emplace_back("nccl.nnodes", Text(header->Get("nnodes")));
  a.emplace_back("nccl.bytes", absl::StrCat(static_cast<uint64_t>(bytes)));
  a.emplace_back("nccl.coll_sn", sn_text);
  a.emplace_back("nccl.busbw_gbs", Text(perf->Get("coll_busbw_gbs")));
  a.emplace_back("nccl.algbw_gbs", Text(perf->Get("coll_algobw_gbs")));
  a.emplace_back("nccl.timing_source", Text(perf->Get("coll_timing_source")));
  if (p2p) a.emplace_back("nccl.peer", Text(perf->Get("peer")));
  if (const std::string host = Text(meta->Get("hostname")); !host.empty()) {
    a.emplace_back("host.name", host);
  }
  if (pid >= 1 && pid <= 4294967295.0) {
    span->pid = static_cast<uint32_t>(pid);
    a.emplace_back("process.pid", absl::StrCat(span->pid));
  }
  if (estimated) a.emplace_back("fabricscope.estimated", "true");
  span->protocol = "nccl_inspector";
  return true;
}

void NcclInspectorTailer::TakeObjects(File* file, std::vector<Span>* spans) {
  std::string& p = file->pending;
  size_t pos = 0;
  std::string why;
  auto malformed = [&](absl::string_view reason) {
    ++stats_.malformed;
    malformed_->Increment();
    uint64_t suppressed = 0;
    if (log_limiter_.Allow("malformed", &suppressed)) {
      Log(LogLevel::kWarn, "nccl_inspector", "malformed record skipped",
          {{"dir", options_.dir},
           {"reason", std::string(reason)},
           {"suppressed", absl::StrCat(suppressed)}});
    }
  };
  // Skips to the next line that starts with '{' (or drops everything).
  auto resync = [&](size_t from) {
    const size_t at = p.find("\n{", from);
    return at == std::string::npos ? p.size() : at + 1;
  };
  while (pos < p.size()) {
    while (pos < p.size() && absl::ascii_isspace(static_cast<unsigned char>(p[pos]))) ++pos;
    if (pos >= p.size()) break;
    if (p[pos] != '{') {
      const size_t nl = p.find('\n', pos);
      if (nl == std::string::npos && p.size() - pos <= options_.max_object_bytes) break;
      malformed("text outside a JSON object");
      pos = nl == std::string::npos ? p.size() : nl + 1;
      continue;
    }
    int depth = 0;
    bool in_string = false, escape = false;
    size_t end = std::string::npos;
    const size_t limit = std::min(p.size(), pos + options_.max_object_bytes);
    for (size_t i = pos; i < limit; ++i) {
      const char c = p[i];
      if (in_string) {
        if (escape) {
          escape = false;
        } else if (c == '\\') {
          escape = true;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) {
          end = i;
          break;
        }
      }
    }
    if (end == std::string::npos) {
      if (limit < p.size() || p.size() - pos >= options_.max_object_bytes) {
        malformed("object longer than the limit");
        pos = resync(pos);
        continue;
      }
      break;  // incomplete: wait for the rest
    }
    Span span;
    if (ParseRecord(absl::string_view(p).substr(pos, end + 1 - pos), &span, &why)) {
      spans->push_back(std::move(span));
    } else {
      malformed(why);
    }
    pos = end + 1;
  }
  p.erase(0, pos);
}

void NcclInspectorTailer::ReadFile(const std::string& name, File* file, uint64_t* budget,
                                   std::vector<Span>* spans) {
  const std::string path = absl::StrCat(options_.dir, "/", name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;  // gone between the listing and now
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return;
  }
  const uint64_t inode = static_cast<uint64_t>(st.st_ino);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (file->inode != 0 && file->inode != inode) {
    rotated_->Increment();
    ++stats_.restarts;
    file->offset = 0;
    file->pending.clear();
  } else if (size < file->offset) {
    truncated_->Increment();
    ++stats_.restarts;
    file->offset = 0;
    file->pending.clear();
  }
  file->inode = inode;
  uint64_t want = std::min({size - file->offset, options_.max_read_per_file, *budget});
  std::string buf;
  while (want > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(want, 1 << 20));
    buf.resize(chunk);
    const ssize_t n = ::pread(fd, buf.data(), chunk, static_cast<off_t>(file->offset));
    if (n <= 0) break;
    file->offset += static_cast<uint64_t>(n);
    *budget -= static_cast<uint64_t>(n);
    want -= static_cast<uint64_t>(n);
    stats_.bytes += static_cast<uint64_t>(n);
    bytes_->Increment(static_cast<double>(n));
    file->pending.append(buf.data(), static_cast<size_t>(n));
    TakeObjects(file, spans);
  }
  ::close(fd);
}

size_t NcclInspectorTailer::PollOnce() {
  DIR* d = ::opendir(options_.dir.c_str());
  if (d == nullptr) {
    uint64_t suppressed = 0;
    if (log_limiter_.Allow("dir", &suppressed)) {
      Log(LogLevel::kWarn, "nccl_inspector", "cannot list the NCCL Inspector dump directory",
          {{"dir", options_.dir},
           {"error", std::strerror(errno)},
           {"suppressed", absl::StrCat(suppressed)}});
    }
    return 0;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (auto& [name, f] : files_) f.seen = false;
  uint64_t budget = options_.max_read_per_poll;
  std::vector<Span> spans;
  bool moved = false;
  for (const std::string& name : names) {
    struct stat st {};
    if (::stat(absl::StrCat(options_.dir, "/", name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    auto it = files_.find(name);
    if (it == files_.end()) {
      if (files_.size() >= options_.max_files) {
        skipped_->Increment();
        continue;
      }
      it = files_.emplace(name, File{}).first;
    }
    it->second.seen = true;
    const uint64_t before = it->second.offset;
    if (budget > 0) ReadFile(name, &it->second, &budget, &spans);
    moved |= it->second.offset != before;
  }
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->second.seen) {
      ++it;
    } else {
      it = files_.erase(it);  // deleted
      moved = true;
    }
  }
  files_gauge_->Set(static_cast<double>(files_.size()));
  for (Span& s : spans) {
    if (s.pid != 0 && s.gpu.empty()) s.gpu = GpuOf(s.pid);
  }
  const size_t n = spans.size();
  if (n > 0) {
    const IngestResult r = ingester_->IngestOwn(IngestProtocol::kNcclInspector, std::move(spans));
    stats_.spans += r.accepted;
    stats_.rejected += r.rejected;
    spans_->Increment(static_cast<double>(r.accepted));
    rejected_->Increment(static_cast<double>(r.rejected));
  }
  if (moved) SaveOffsets();
  return n;
}

// The offsets file: one line per file, "INODE OFFSET NAME". The bytes after
// the last complete object are not kept: OFFSET is where that object ended,
// so a restart reads the partial one again from its start.
void NcclInspectorTailer::LoadOffsets() {
  if (options_.offsets_file.empty()) return;
  std::ifstream in(options_.offsets_file);
  std::string line;
  while (std::getline(in, line) && files_.size() < options_.max_files) {
    std::istringstream ls(line);
    File f;
    std::string name;
    if (!(ls >> f.inode >> f.offset) || !std::getline(ls >> std::ws, name) || name.empty() ||
        name.find('/') != std::string::npos) {
      continue;
    }
    files_[name] = std::move(f);
  }
}

void NcclInspectorTailer::SaveOffsets() const {
  if (options_.offsets_file.empty()) return;
  const std::string tmp = options_.offsets_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& [name, f] : files_) {
      out << f.inode << " " << f.offset - f.pending.size() << " " << name << "\n";
    }
    if (!out) return;
  }
  ::rename(tmp.c_str(), options_.offsets_file.c_str());
}

std::string NcclInspectorTailer::GpuOf(uint32_t pid) {
  const int64_t now = clock_->RealtimeNs();
  auto it = gpu_cache_.find(pid);
  if (it != gpu_cache_.end() && now - it->second.first < 60'000'000'000) return it->second.second;
  if (gpu_cache_.size() >= 4096) gpu_cache_.clear();
  // The GPU of the one /dev/nvidiaN the process has open (several: unknown).
  const ProcessDevices held = ReadProcessDevices(options_.proc_root, pid, 4096);
  std::string bus;
  if (held.nvidia_minors.size() == 1) {
    for (const NvidiaGpu& g : ReadNvidiaGpus(options_.proc_root)) {
      if (g.minor == held.nvidia_minors[0]) bus = g.bus_id;
    }
  }
  gpu_cache_[pid] = {now, bus};
  return bus;
}

}  // namespace fabricscope
