#include "daemon/state/snapshot.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/signals.h"

namespace fabricscope {
namespace {

constexpr char kMagic[8] = {'F', 'S', 'S', 'N', 'A', 'P', '\r', '\n'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4;  // magic, version, flags, saved, crc
constexpr size_t kRecordOverhead = 1 + 4 + 4;       // type, length, crc

enum RecordType : uint8_t {
  kSeriesRecord = 1,
  kSpanRecord = 2,
  kEventRecord = 3,
  kTimeBlockRecord = 4,
  kStallLearnerRecord = 5,  // version 3: StallLearner::Dump(), at most one
  kEndRecord = 0xff,
};

// ---------------------------------------------------------------------------
// Little-endian encoding.

void PutU8(std::string* out, uint8_t v) { out->push_back(static_cast<char>(v)); }
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutI64(std::string* out, int64_t v) { PutU64(out, static_cast<uint64_t>(v)); }
void PutF64(std::string* out, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  PutU64(out, bits);
}
void PutBytes(std::string* out, const void* data, size_t n) {
  PutU32(out, static_cast<uint32_t>(n));
  out->append(static_cast<const char*>(data), n);
}
void PutStr(std::string* out, absl::string_view s) { PutBytes(out, s.data(), s.size()); }

// Reads what the Put functions wrote; every read is bounds-checked and a
// failed one leaves ok() false (further reads return zeros).
class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  bool done() const { return in_.empty(); }
  absl::string_view rest() const { return in_; }  // what is left to read

  uint8_t U8() { return static_cast<uint8_t>(Fixed(1)); }
  uint32_t U32() { return static_cast<uint32_t>(Fixed(4)); }
  uint64_t U64() { return Fixed(8); }
  int64_t I64() { return static_cast<int64_t>(Fixed(8)); }
  double F64() {
    uint64_t bits = Fixed(8);
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  absl::string_view Bytes() {
    const uint32_t n = U32();
    if (!ok_ || n > in_.size()) return Fail();
    absl::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  std::string Str() { return std::string(Bytes()); }
  template <size_t N>
  void Array(std::array<uint8_t, N>* a) {
    if (!ok_ || in_.size() < N) {
      Fail();
      return;
    }
    std::memcpy(a->data(), in_.data(), N);
    in_.remove_prefix(N);
  }

 private:
  uint64_t Fixed(size_t n) {
    if (!ok_ || in_.size() < n) {
      Fail();
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(in_[i])} << (8 * i);
    in_.remove_prefix(n);
    return v;
  }
  absl::string_view Fail() {
    ok_ = false;
    in_ = {};
    return {};
  }

  absl::string_view in_;
  bool ok_ = true;
};

uint32_t Crc(absl::string_view a) {
  uLong crc = crc32(0L, Z_NULL, 0);
  return static_cast<uint32_t>(
      crc32(crc, reinterpret_cast<const Bytef*>(a.data()), static_cast<uInt>(a.size())));
}

// ---------------------------------------------------------------------------
// Records.

void EncodeKey(std::string* out, const SeriesKey& k) {
  PutStr(out, k.source);
  PutStr(out, k.name);
  PutStr(out, k.device);
  PutU32(out, k.port);
  PutStr(out, k.netdev);
}

SeriesKey DecodeKey(Reader* r) {
  SeriesKey k;
  k.source = r->Str();
  k.name = r->Str();
  k.device = r->Str();
  k.port = r->U32();
  k.netdev = r->Str();
  return k;
}

void EncodeSeries(std::string* out, const SeriesDump& d) {
  EncodeKey(out, *d.key);
  const SeriesState& st = d.state;
  PutU8(out, static_cast<uint8_t>((st.has_value ? 1 : 0) | (st.saturated ? 2 : 0)));
  PutI64(out, st.last_ts_ns);
  PutU64(out, st.last_raw);
  PutF64(out, st.total);
  PutU64(out, st.resets);
  PutU64(out, st.samples);
  PutU64(out, st.microbursts);
  uint32_t n = 0;
  for (const SeriesDump::ChunkRef& c : d.chunks) n += c.header.count > 0 ? 1 : 0;
  PutU32(out, n);
  for (const SeriesDump::ChunkRef& c : d.chunks) {
    const ChunkHeader& h = c.header;
    if (h.count == 0) continue;
    PutI64(out, h.first_t);
    PutI64(out, h.last_t);
    PutU64(out, h.first_value);
    PutU64(out, h.last_value);
    PutU64(out, h.last_t_delta);
    PutI64(out, h.first_ts);
    PutI64(out, h.last_ts);
    PutI64(out, h.min_ts);
    PutI64(out, h.max_ts);
    PutU32(out, h.count);
    PutU32(out, h.bits);
    PutU32(out, h.run);
    PutU64(out, c.block != nullptr ? c.block->serial : 0);
    PutBytes(out, c.data, ChunkWriter::ByteSize(h));
  }
}

// A time block record: the block's serial (what chunks refer to) and image.
void EncodeTimeBlock(std::string* out, uint64_t serial, const TimeBlockImage& im) {
  PutU64(out, serial);
  PutI64(out, im.first_tick);
  PutI64(out, im.interval_ns);
  PutI64(out, im.first_ts);
  PutI64(out, im.last_ts);
  PutU32(out, im.count);
  PutU32(out, im.bits);
  PutBytes(out, im.data.data(), im.data.size());
}

// The time blocks of a file, by the serial the file gives them.
struct ReadBlock {
  std::shared_ptr<TimeBlock> block;
  std::vector<int64_t> ts;  // the timestamp of each tick, from block->first_tick on
  uint64_t record = 0;      // the record that holds it
};
using ReadBlocks = absl::flat_hash_map<uint64_t, ReadBlock>;

bool DecodeTimeBlock(absl::string_view payload, uint64_t* serial, ReadBlock* out,
                     std::string* detail) {
  Reader r(payload);
  *serial = r.U64();
  TimeBlockImage im;
  im.first_tick = r.I64();
  im.interval_ns = r.I64();
  im.first_ts = r.I64();
  im.last_ts = r.I64();
  im.count = r.U32();
  im.bits = r.U32();
  absl::string_view data = r.Bytes();
  if (!r.ok() || !r.done() || *serial == 0) {
    *detail = "bad time block record";
    return false;
  }
  im.data.assign(data.begin(), data.end());
  out->block = TimeBlock::FromImage(im, detail);
  if (out->block == nullptr) return false;
  out->ts.clear();
  out->block->Read(&out->ts);
  return true;
}

// The part of a series record before its chunks.
struct SeriesHead {
  SeriesKey key;
  SeriesState state;
  uint32_t chunks = 0;
};

bool DecodeSeriesHead(Reader* r, size_t payload_size, SeriesHead* out, std::string* detail) {
  out->key = DecodeKey(r);
  const uint8_t flags = r->U8();
  SeriesState& st = out->state;
  st.has_value = (flags & 1) != 0;
  st.saturated = (flags & 2) != 0;
  st.last_ts_ns = r->I64();
  st.last_raw = r->U64();
  st.total = r->F64();
  st.resets = r->U64();
  st.samples = r->U64();
  st.microbursts = r->U64();
  out->chunks = r->U32();
  if (!r->ok()) {
    *detail = "series record cut short";
    return false;
  }
  // Each chunk takes at least 96 bytes in the record: a count beyond that is
  // corrupt (and must not size an allocation).
  if (out->chunks > payload_size / 96) {
    *detail = absl::StrCat("series record claims ", out->chunks, " chunks");
    return false;
  }
  return true;
}

// One chunk of a series record: its header, the serial of its time block (0:
// none) and its stream, in place.
void DecodeChunkFields(Reader* r, ChunkHeader* h, uint64_t* serial, absl::string_view* data) {
  h->first_t = r->I64();
  h->last_t = r->I64();
  h->first_value = r->U64();
  h->last_value = r->U64();
  h->last_t_delta = r->U64();
  h->first_ts = r->I64();
  h->last_ts = r->I64();
  h->min_ts = r->I64();
  h->max_ts = r->I64();
  h->count = r->U32();
  h->bits = r->U32();
  h->run = r->U32();
  *serial = r->U64();
  *data = r->Bytes();
}

// Checks the chunks of series record `record` (`r` is past its head): every
// header against its stream's size, its own fields and, for a chunk on a
// time column, the block's timestamps; nothing is copied. The stream is
// decoded when it is first read (the store refuses and counts a chunk that
// does not decode to its header): the CRC already vouches for the bytes the
// writer produced. `detail` says what is wrong when it returns false.
bool CheckSeriesChunks(Reader* r, const SeriesHead& head, const ReadBlocks& blocks, uint64_t record,
                       uint64_t* samples, std::string* detail) {
  *samples = 0;
  const std::string& name = head.key.name;
  for (uint32_t i = 0; i < head.chunks; ++i) {
    ChunkHeader h;
    uint64_t serial = 0;
    absl::string_view data;
    DecodeChunkFields(r, &h, &serial, &data);
    if (!r->ok()) {
      *detail = absl::StrCat("series ", name, ": chunk ", i, " cut short");
      return false;
    }
    if (h.count == 0 || h.count > kMaxChunkSamples || data.size() != ChunkWriter::ByteSize(h)) {
      *detail = absl::StrCat("series ", name, ": chunk ", i, " has a bad header");
      return false;
    }
    const ReadBlock* block = nullptr;
    if (serial != 0) {
      auto it = blocks.find(serial);
      if (it == blocks.end() || it->second.record >= record) {
        *detail = absl::StrCat("series ", name, ": chunk ", i,
                               " refers to a time block the file does not hold before it");
        return false;
      }
      block = &it->second;
    }
    bool consistent = h.run < h.count && h.min_ts <= h.max_ts && h.first_ts >= h.min_ts &&
                      h.first_ts <= h.max_ts && h.last_ts >= h.min_ts && h.last_ts <= h.max_ts &&
                      (h.count > 1 || (h.first_t == h.last_t && h.first_ts == h.last_ts &&
                                       h.first_value == h.last_value && h.bits == 0));
    if (consistent && block != nullptr) {  // tick indexes within the block, at its times
      const uint64_t first = static_cast<uint64_t>(h.first_t - block->block->first_tick);
      const uint64_t last = static_cast<uint64_t>(h.last_t - block->block->first_tick);
      consistent = first < block->ts.size() && last < block->ts.size() && first <= last &&
                   block->ts[first] == h.first_ts && block->ts[last] == h.last_ts;
    } else if (consistent) {
      consistent = h.first_t == h.first_ts && h.last_t == h.last_ts;
    }
    if (!consistent) {
      *detail = absl::StrCat("series ", name, ": chunk ", i, " does not decode to its header");
      return false;
    }
    *samples += h.count;
  }
  if (!r->done()) {
    *detail = absl::StrCat("series ", name, ": trailing bytes");
    return false;
  }
  return true;
}

// The chunks of a checked series record (`chunk_bytes`: the record past its
// head), pointing into the record, for Store::RestoreChunks.
void CollectChunks(absl::string_view chunk_bytes, uint32_t n, const ReadBlocks& blocks,
                   std::vector<RestoredChunk>* out) {
  out->clear();
  out->reserve(n);
  Reader r(chunk_bytes);
  for (uint32_t i = 0; i < n; ++i) {
    RestoredChunk c;
    uint64_t serial = 0;
    absl::string_view data;
    DecodeChunkFields(&r, &c.header, &serial, &data);
    c.data = reinterpret_cast<const uint8_t*>(data.data());
    if (serial != 0) c.block = blocks.find(serial)->second.block;  // checked
    out->push_back(std::move(c));
  }
}

void EncodeSpan(std::string* out, const Span& s) {
  out->append(reinterpret_cast<const char*>(s.trace_id.data()), s.trace_id.size());
  out->append(reinterpret_cast<const char*>(s.span_id.data()), s.span_id.size());
  out->append(reinterpret_cast<const char*>(s.parent_span_id.data()), s.parent_span_id.size());
  PutStr(out, s.name);
  PutU8(out, static_cast<uint8_t>(s.kind));
  PutI64(out, s.start_unix_nano);
  PutI64(out, s.end_unix_nano);
  PutU32(out, static_cast<uint32_t>(s.attributes.size()));
  for (const auto& [k, v] : s.attributes) {
    PutStr(out, k);
    PutStr(out, v);
  }
  PutStr(out, s.rdma_device);
  PutU32(out, s.rdma_port);
  PutStr(out, s.netdev);
  PutU8(out, s.stall_flag ? 1 : 0);
  PutStr(out, s.protocol);
  // Version 3: the judged window, the phase and the stall judgement.
  PutI64(out, s.window_start_unix_nano);
  PutI64(out, s.window_end_unix_nano);
  PutStr(out, s.phase);
  const StallJudgement& j = s.judgement;
  PutU8(out, static_cast<uint8_t>((j.judged ? 1 : 0) | (j.stall ? 2 : 0)));
  PutU8(out, static_cast<uint8_t>(j.source));
  PutU8(out, static_cast<uint8_t>(j.cost_kind));
  PutF64(out, j.cost);
  PutF64(out, j.bound);
  PutF64(out, j.median);
  PutF64(out, j.p99);
  PutU64(out, j.samples);
  PutStr(out, j.key);
}

bool DecodeSpan(absl::string_view payload, uint32_t version, Span* s) {
  Reader r(payload);
  r.Array(&s->trace_id);
  r.Array(&s->span_id);
  r.Array(&s->parent_span_id);
  s->name = r.Str();
  const uint8_t kind = r.U8();
  if (kind > static_cast<uint8_t>(SpanKind::kOther)) return false;
  s->kind = static_cast<SpanKind>(kind);
  s->start_unix_nano = r.I64();
  s->end_unix_nano = r.I64();
  const uint32_t n = r.U32();
  if (!r.ok() || n > payload.size() / 8) return false;  // each takes >= 8 bytes
  s->attributes.clear();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    std::string k = r.Str();
    std::string v = r.Str();
    s->attributes.emplace_back(std::move(k), std::move(v));
  }
  s->rdma_device = r.Str();
  s->rdma_port = r.U32();
  s->netdev = r.Str();
  s->stall_flag = r.U8() != 0;
  s->protocol = r.Str();
  s->window_start_unix_nano = s->window_end_unix_nano = 0;
  s->phase.clear();
  s->judgement = StallJudgement{};
  if (version >= 3) {
    s->window_start_unix_nano = r.I64();
    s->window_end_unix_nano = r.I64();
    s->phase = r.Str();
    StallJudgement& j = s->judgement;
    const uint8_t flags = r.U8();
    const uint8_t source = r.U8();
    const uint8_t cost = r.U8();
    if (flags > 3 || source > static_cast<uint8_t>(StallSource::kLearned) ||
        cost > static_cast<uint8_t>(StallCost::kTimePerPromptToken)) {
      return false;
    }
    j.judged = (flags & 1) != 0;
    j.stall = (flags & 2) != 0;
    j.source = static_cast<StallSource>(source);
    j.cost_kind = static_cast<StallCost>(cost);
    j.cost = r.F64();
    j.bound = r.F64();
    j.median = r.F64();
    j.p99 = r.F64();
    j.samples = r.U64();
    j.key = r.Str();
  }
  // The GPU hint is not a record field (format version 1 predates it): it is
  // the fabricscope.gpu attribute, which the record holds.
  s->gpu.clear();
  s->pid = 0;
  for (const auto& [k, v] : s->attributes) {
    if (k == "fabricscope.gpu" && s->gpu.empty()) {
      s->gpu = std::string(absl::StripAsciiWhitespace(v));
    } else if (k == "process.pid" && s->pid == 0) {
      s->pid = ParseProcessPid(v);  // likewise the process.pid attribute
    }
  }
  return r.ok() && r.done() && s->end_unix_nano >= s->start_unix_nano;
}

void EncodeEvent(std::string* out, const DetectorEvent& e) {
  PutU64(out, e.id);
  PutStr(out, e.detector);
  PutStr(out, e.kind);
  PutStr(out, e.device);
  PutU32(out, e.port);
  PutStr(out, e.netdev);
  PutStr(out, e.priority);
  PutStr(out, e.direction);
  PutI64(out, e.start_unix_nano);
  PutI64(out, e.end_unix_nano);
  PutI64(out, e.detected_unix_nano);
  PutF64(out, e.peak);
  PutStr(out, e.summary);
  // Appended fields (absent in older snapshots of the same version).
  PutU32(out, static_cast<uint32_t>(e.signals.size()));
  for (const std::string& s : e.signals) PutStr(out, s);
  PutU64(out, e.merged_into);
}

bool DecodeEvent(absl::string_view payload, DetectorEvent* e) {
  Reader r(payload);
  e->id = r.U64();
  e->detector = r.Str();
  e->kind = r.Str();
  e->device = r.Str();
  e->port = r.U32();
  e->netdev = r.Str();
  e->priority = r.Str();
  e->direction = r.Str();
  e->start_unix_nano = r.I64();
  e->end_unix_nano = r.I64();
  e->detected_unix_nano = r.I64();
  e->peak = r.F64();
  e->summary = r.Str();
  if (r.ok() && !r.done()) {  // the signals and merge of an episode
    const uint32_t n = r.U32();
    for (uint32_t i = 0; i < n && r.ok() && i < 1024; ++i) e->signals.push_back(r.Str());
    e->merged_into = r.U64();
  }
  return r.ok() && r.done();
}

// ---------------------------------------------------------------------------
// Writing.

class SnapshotWriter {
 public:
  SnapshotWriter(int fd, absl::Time deadline) : fd_(fd), deadline_(deadline) {}

  // Appends one record; flushes to the file every 1 MiB.
  absl::Status Record(RecordType type, const std::string& payload) {
    if (payload.size() > UINT32_MAX) {
      return absl::ResourceExhaustedError("snapshot: a record exceeds 4 GiB");
    }
    const size_t start = buf_.size();
    PutU8(&buf_, type);
    PutU32(&buf_, static_cast<uint32_t>(payload.size()));
    buf_.append(payload);
    PutU32(&buf_, Crc(absl::string_view(buf_).substr(start)));
    if (buf_.size() >= (1u << 20)) return Flush();
    return absl::OkStatus();
  }
  void Raw(const std::string& bytes) { buf_.append(bytes); }

  absl::Status Flush() {
    if (absl::Now() > deadline_) {
      return absl::DeadlineExceededError("snapshot: ran past --state-save-timeout");
    }
    size_t off = 0;
    while (off < buf_.size()) {
      ssize_t n = ::write(fd_, buf_.data() + off, buf_.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return absl::InternalError(absl::StrCat("snapshot: write: ", std::strerror(errno)));
      off += static_cast<size_t>(n);
    }
    written_ += buf_.size();
    buf_.clear();
    return absl::OkStatus();
  }
  uint64_t written() const { return written_ + buf_.size(); }

 private:
  const int fd_;
  const absl::Time deadline_;
  std::string buf_;
  uint64_t written_ = 0;
};

absl::Status WriteAll(SnapshotWriter* w, const Store& store, const SpanStore& spans,
                      const EventLog& events, const StallLearner* learner, int64_t saved_unix_nano,
                      SnapshotCounts* counts) {
  std::string header(kMagic, sizeof kMagic);
  PutU32(&header, kSnapshotVersion);
  PutU32(&header, 0);
  PutI64(&header, saved_unix_nano);
  PutU32(&header, Crc(header));
  w->Raw(header);

  absl::Status status;
  std::string payload;
  absl::flat_hash_set<uint64_t> blocks_written;
  store.Dump([&](const SeriesDump& d) {
    // The time blocks its chunks refer to go first, once each.
    for (const SeriesDump::ChunkRef& c : d.chunks) {
      if (c.block == nullptr || c.header.count == 0 ||
          !blocks_written.insert(c.block->serial).second) {
        continue;
      }
      payload.clear();
      EncodeTimeBlock(&payload, c.block->serial, c.block->Image());
      status = w->Record(kTimeBlockRecord, payload);
      if (!status.ok()) return false;
    }
    payload.clear();
    EncodeSeries(&payload, d);
    status = w->Record(kSeriesRecord, payload);
    ++counts->series;
    for (const SeriesDump::ChunkRef& c : d.chunks) {
      counts->chunks += c.header.count > 0 ? 1 : 0;
      counts->samples += c.header.count;
    }
    return status.ok();
  });
  if (!status.ok()) return status;

  uint64_t seq = spans.Stats().first_seq;
  while (true) {
    SpanStore::ReadResult r = spans.ReadFrom(seq, 4096);
    if (r.spans.empty()) break;
    for (const SpanRef& s : r.spans) {
      payload.clear();
      EncodeSpan(&payload, *s);
      if (auto st = w->Record(kSpanRecord, payload); !st.ok()) return st;
      ++counts->spans;
    }
    seq = r.next_seq;
  }
  for (const DetectorEvent& e : events.All()) {
    payload.clear();
    EncodeEvent(&payload, e);
    if (auto st = w->Record(kEventRecord, payload); !st.ok()) return st;
    ++counts->events;
  }
  if (learner != nullptr) {
    if (auto st = w->Record(kStallLearnerRecord, learner->Dump()); !st.ok()) return st;
  }
  payload.clear();
  PutU64(&payload, counts->series);
  PutU64(&payload, counts->spans);
  PutU64(&payload, counts->events);
  if (auto st = w->Record(kEndRecord, payload); !st.ok()) return st;
  return w->Flush();
}

// ---------------------------------------------------------------------------
// Reading, in three steps:
//  1. Framing, on the calling thread: the header, then each record's type
//     and length up to the end record. Time blocks (few; the series records
//     need them) and the end record are checked and decoded here.
//  2. Checking, on up to kMaxReadThreads threads, each over a contiguous
//     range of records of about the same size: every other record's CRC and
//     contents. Series records are parsed in place (nothing copied); spans
//     and events are decoded into their slots.
//  3. Restoring, when the whole file passed and there are stores to restore
//     into: the series are registered in file order (so their ids follow the
//     file), then their chunks are copied once, straight from `data`, into
//     the store on the same threads (Store::RestoreChunks without eviction);
//     when the budget is full, the series left are linked afterwards in file
//     order, evicting the oldest chunks as a single-threaded restore does.
//     Spans and events go last, in file order.
// A reading that fails reports the first failure in file order, whatever the
// threads: the same reason and record a sequential reading would report.

SnapshotStatus Fail(SnapshotError e, std::string detail) { return {e, std::move(detail)}; }

// Record numbers count from 1 (0: the header).
class FirstFailure {
 public:
  bool failed() const { return record_ != kNone; }
  uint64_t record() const { return record_; }
  const SnapshotStatus& status() const { return status_; }
  void Note(uint64_t record, SnapshotError e, std::string detail) {
    if (record >= record_) return;
    record_ = record;
    status_ = {e, std::move(detail)};
  }
  void Merge(FirstFailure other) {
    if (other.failed()) Note(other.record_, other.status_.error, std::move(other.status_.detail));
  }

 private:
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t record_ = kNone;
  SnapshotStatus status_;
};

struct RecordRef {
  uint8_t type = 0;
  absl::string_view framed;   // type, length and payload: what the CRC covers
  absl::string_view payload;  // in `framed`
  uint32_t crc = 0;
  uint32_t slot = 0;  // index among the records of its type
};

struct SeriesSlot {
  SeriesHead head;
  absl::string_view chunk_bytes;  // the record past its head
  uint64_t samples = 0;
  size_t bytes = 0;  // the record's size (how the work is split)
  SeriesId id = kInvalidSeries;
};

// What the framing found and the checking filled in.
struct FileIndex {
  int64_t saved_unix_nano = 0;
  std::vector<RecordRef> records;  // every record before the end record
  ReadBlocks blocks;
  std::vector<SeriesSlot> series;
  std::vector<Span> spans;
  std::vector<DetectorEvent> events;
  uint64_t span_records = 0;
  uint64_t event_records = 0;
  uint32_t version = kSnapshotVersion;
  absl::string_view learner;  // the stall learner record's payload, "" when none
};

constexpr int kMaxReadThreads = 4;

uint32_t RecordCrc(absl::string_view payload_end) {
  Reader cr(payload_end.substr(0, 4));
  return cr.U32();
}

// Step 1. Fills `index` up to the first failure, which it notes.
void FrameRecords(absl::string_view data, FileIndex* index, FirstFailure* fail) {
  if (data.size() < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    fail->Note(0, SnapshotError::kFormat, "not a fabricscope snapshot (bad magic)");
    return;
  }
  if (data.size() < kHeaderBytes) {
    fail->Note(0, SnapshotError::kTruncated, "header cut short");
    return;
  }
  Reader hr(data.substr(sizeof kMagic, kHeaderBytes - sizeof kMagic));
  const uint32_t version = hr.U32();
  const uint32_t flags = hr.U32();
  index->saved_unix_nano = hr.I64();
  const uint32_t crc = hr.U32();
  if (version != kSnapshotVersion && version != 2) {
    fail->Note(
        0, SnapshotError::kVersion,
        absl::StrCat("format version ", version, ", this build reads 2 and ", kSnapshotVersion));
    return;
  }
  index->version = version;
  if (crc != Crc(data.substr(0, kHeaderBytes - 4))) {
    fail->Note(0, SnapshotError::kChecksum, "header checksum mismatch");
    return;
  }
  if (flags != 0) {
    fail->Note(0, SnapshotError::kFormat, absl::StrCat("unknown flags ", flags));
    return;
  }
  absl::string_view rest = data.substr(kHeaderBytes);
  uint64_t series = 0;
  std::string detail;
  uint64_t record = 0;
  bool ended = false;
  while (!rest.empty()) {
    if (ended) {
      fail->Note(record + 1, SnapshotError::kFormat, "bytes after the end record");
      return;
    }
    ++record;
    if (rest.size() < kRecordOverhead) {
      fail->Note(record, SnapshotError::kTruncated, absl::StrCat("record ", record, " cut short"));
      return;
    }
    Reader rr(rest);
    RecordRef ref;
    ref.type = rr.U8();
    const uint32_t len = rr.U32();
    if (rest.size() - kRecordOverhead < len) {
      fail->Note(record, SnapshotError::kTruncated, absl::StrCat("record ", record, " cut short"));
      return;
    }
    ref.framed = rest.substr(0, 5 + len);
    ref.payload = rest.substr(5, len);
    ref.crc = RecordCrc(rest.substr(5 + len));
    rest.remove_prefix(kRecordOverhead + len);
    if (ref.type == kTimeBlockRecord || ref.type == kEndRecord) {
      if (ref.crc != Crc(ref.framed)) {
        fail->Note(record, SnapshotError::kChecksum,
                   absl::StrCat("record ", record, ": checksum mismatch"));
        return;
      }
    }
    switch (ref.type) {
      case kTimeBlockRecord: {
        uint64_t serial = 0;
        ReadBlock b;
        if (!DecodeTimeBlock(ref.payload, &serial, &b, &detail)) {
          fail->Note(record, SnapshotError::kFormat, absl::StrCat("record ", record, ": ", detail));
          return;
        }
        if (index->blocks.contains(serial)) {
          fail->Note(record, SnapshotError::kFormat,
                     absl::StrCat("record ", record, ": time block ", serial, " twice"));
          return;
        }
        b.record = record;
        index->blocks.emplace(serial, std::move(b));
        break;
      }
      case kEndRecord: {
        Reader er(ref.payload);
        const uint64_t ns = er.U64(), np = er.U64(), ne = er.U64();
        if (!er.ok() || !er.done()) {
          fail->Note(record, SnapshotError::kFormat,
                     absl::StrCat("record ", record, ": bad end record"));
          return;
        }
        // Every record before it is checked in step 2; if one fails, that
        // failure comes first.
        if (ns != series || np != index->span_records || ne != index->event_records) {
          fail->Note(record, SnapshotError::kFormat,
                     absl::StrCat("end record counts (", ns, " series, ", np, " spans, ", ne,
                                  " events) differ from the records read"));
          return;
        }
        ended = true;
        break;
      }
      case kSeriesRecord:
        ref.slot = static_cast<uint32_t>(series++);
        break;
      case kSpanRecord:
        ref.slot = static_cast<uint32_t>(index->span_records++);
        break;
      case kEventRecord:
        ref.slot = static_cast<uint32_t>(index->event_records++);
        break;
      case kStallLearnerRecord:
        if (!index->learner.empty() || version < 3) {
          fail->Note(record, SnapshotError::kFormat,
                     absl::StrCat("record ", record, ": unexpected stall learner record"));
          return;
        }
        index->learner = ref.payload;
        break;
      default:  // reported in step 2 (after this record's CRC)
        break;
    }
    index->records.push_back(ref);
  }
  if (!ended) {
    fail->Note(record + 1, SnapshotError::kTruncated, "no end record (the file was cut short)");
  }
}

// Splits items of the given sizes into at most `parts` contiguous ranges of
// about the same total size: range i is [bounds[i], bounds[i + 1]).
std::vector<size_t> SplitBySize(const std::vector<size_t>& sizes, int parts) {
  uint64_t total = 0;
  for (size_t n : sizes) total += n;
  std::vector<size_t> bounds{0};
  uint64_t sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sum += sizes[i];
    const size_t made = bounds.size();  // ranges closed so far + 1
    if (made < static_cast<size_t>(parts) && sum * parts >= total * made && i + 1 < sizes.size()) {
      bounds.push_back(i + 1);
    }
  }
  bounds.push_back(sizes.size());
  return bounds;
}

// Runs fn(0) .. fn(parts - 1), fn(0) on the calling thread, the others on
// threads of their own (or here, if a thread cannot be started); returns
// when all are done.
void RunParts(int parts, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::vector<int> inline_parts;
  for (int i = 1; i < parts; ++i) {
    try {
      threads.emplace_back(fn, i);
    } catch (const std::system_error&) {
      inline_parts.push_back(i);
    }
  }
  fn(0);
  for (int i : inline_parts) fn(i);
  for (std::thread& t : threads) t.join();
}

int ReadThreads(int requested, size_t bytes) {
  if (requested > 0) return std::min(requested, kMaxReadThreads);
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // A thread per MiB at least: starting one costs more than a small file.
  const uint64_t by_size = 1 + bytes / (1 << 20);
  return static_cast<int>(std::min<uint64_t>(
      {static_cast<uint64_t>(hw), static_cast<uint64_t>(kMaxReadThreads), by_size}));
}

// Step 2 over records [begin, end): stops at its first failure.
void CheckRecords(FileIndex* index, size_t begin, size_t end, bool keep, FirstFailure* fail) {
  std::string detail;
  for (size_t i = begin; i < end; ++i) {
    const RecordRef& ref = index->records[i];
    const uint64_t record = i + 1;
    if (ref.type == kTimeBlockRecord || ref.type == kEndRecord) continue;  // step 1
    if (ref.crc != Crc(ref.framed)) {
      fail->Note(record, SnapshotError::kChecksum,
                 absl::StrCat("record ", record, ": checksum mismatch"));
      return;
    }
    switch (ref.type) {
      case kSeriesRecord: {
        SeriesSlot& slot = index->series[ref.slot];
        Reader r(ref.payload);
        if (!DecodeSeriesHead(&r, ref.payload.size(), &slot.head, &detail)) {
          fail->Note(record, SnapshotError::kFormat, absl::StrCat("record ", record, ": ", detail));
          return;
        }
        slot.chunk_bytes = r.rest();
        slot.bytes = ref.framed.size();
        if (!CheckSeriesChunks(&r, slot.head, index->blocks, record, &slot.samples, &detail)) {
          fail->Note(record, SnapshotError::kFormat, absl::StrCat("record ", record, ": ", detail));
          return;
        }
        break;
      }
      case kSpanRecord: {
        Span scratch;
        Span* s = keep ? &index->spans[ref.slot] : &scratch;
        if (!DecodeSpan(ref.payload, index->version, s)) {
          fail->Note(record, SnapshotError::kFormat, absl::StrCat("record ", record, ": bad span"));
          return;
        }
        break;
      }
      case kStallLearnerRecord: {
        // Checked by restoring it into a learner of its own.
        StallLearner check(StallLearnerOptions{}, nullptr);
        if (absl::Status ls = check.Restore(ref.payload); !ls.ok()) {
          fail->Note(record, SnapshotError::kFormat,
                     absl::StrCat("record ", record, ": ", ls.message()));
          return;
        }
        break;
      }
      case kEventRecord: {
        DetectorEvent scratch;
        DetectorEvent* e = keep ? &index->events[ref.slot] : &scratch;
        if (!DecodeEvent(ref.payload, e)) {
          fail->Note(record, SnapshotError::kFormat,
                     absl::StrCat("record ", record, ": bad event"));
          return;
        }
        break;
      }
      default:
        fail->Note(record, SnapshotError::kFormat,
                   absl::StrCat("record ", record, ": unknown type ", ref.type));
        return;
    }
  }
}

// Steps 1 and 2: `index` holds the checked file when it returns ok.
SnapshotStatus ReadFile(absl::string_view data, int threads, bool keep, FileIndex* index,
                        SnapshotCounts* counts) {
  *counts = SnapshotCounts{};
  counts->bytes = data.size();
  FirstFailure fail;
  FrameRecords(data, index, &fail);
  counts->saved_unix_nano = index->saved_unix_nano;
  if (fail.failed() && fail.record() == 0) return fail.status();  // the header
  uint64_t series = 0;
  for (const RecordRef& r : index->records) series += r.type == kSeriesRecord ? 1 : 0;
  index->series.resize(series);
  if (keep) {
    index->spans.resize(index->span_records);
    index->events.resize(index->event_records);
  }
  std::vector<size_t> sizes;
  sizes.reserve(index->records.size());
  for (const RecordRef& r : index->records) sizes.push_back(r.framed.size());
  const std::vector<size_t> bounds = SplitBySize(sizes, ReadThreads(threads, data.size()));
  const int parts = static_cast<int>(bounds.size()) - 1;
  std::vector<FirstFailure> fails(parts);
  RunParts(parts, [&](int p) { CheckRecords(index, bounds[p], bounds[p + 1], keep, &fails[p]); });
  for (FirstFailure& f : fails) fail.Merge(std::move(f));
  if (fail.failed()) return fail.status();
  counts->series = series;
  for (const SeriesSlot& s : index->series) {
    counts->chunks += s.head.chunks;
    counts->samples += s.samples;
  }
  counts->spans = index->span_records;
  counts->events = index->event_records;
  return {};
}

// Step 3, series.
void RestoreSeries(FileIndex* index, Store* store, int threads, size_t bytes,
                   SnapshotCounts* counts) {
  std::vector<SeriesSlot>& all = index->series;
  for (SeriesSlot& s : all) {
    std::optional<Signal> signal = MapCounter(s.head.key);
    if (!signal.has_value()) {
      ++counts->series_unmapped;
      continue;
    }
    s.id = store->RestoreSeries(s.head.key, *signal, s.head.state);
    if (s.id == kInvalidSeries) counts->chunks_dropped += s.head.chunks;
  }
  std::vector<size_t> sizes;
  sizes.reserve(all.size());
  for (const SeriesSlot& s : all) sizes.push_back(s.bytes);
  const std::vector<size_t> bounds = SplitBySize(sizes, ReadThreads(threads, bytes));
  const int parts = static_cast<int>(bounds.size()) - 1;
  std::atomic<bool> full{false};
  std::vector<std::vector<size_t>> left(parts);  // did not fit without evicting
  std::vector<uint64_t> dropped(parts, 0);
  RunParts(parts, [&](int p) {
    std::vector<RestoredChunk> chunks;
    for (size_t i = bounds[p]; i < bounds[p + 1]; ++i) {
      const SeriesSlot& s = all[i];
      if (s.id == kInvalidSeries) continue;
      uint64_t n = 0;
      if (!full.load(std::memory_order_relaxed)) {
        CollectChunks(s.chunk_bytes, s.head.chunks, index->blocks, &chunks);
        if (store->RestoreChunks(s.id, chunks, /*may_evict=*/false, &n)) {
          dropped[p] += n;
          continue;
        }
        full.store(true, std::memory_order_relaxed);
      }
      left[p].push_back(i);
    }
  });
  std::vector<RestoredChunk> chunks;
  for (int p = 0; p < parts; ++p) {
    counts->chunks_dropped += dropped[p];
    for (size_t i : left[p]) {  // ranges in file order: so is this
      const SeriesSlot& s = all[i];
      uint64_t n = 0;
      CollectChunks(s.chunk_bytes, s.head.chunks, index->blocks, &chunks);
      store->RestoreChunks(s.id, chunks, /*may_evict=*/true, &n);
      counts->chunks_dropped += n;
    }
  }
}

}  // namespace

absl::string_view SnapshotErrorName(SnapshotError e) {
  switch (e) {
    case SnapshotError::kNone:
      return "none";
    case SnapshotError::kIo:
      return "io";
    case SnapshotError::kFormat:
      return "format";
    case SnapshotError::kVersion:
      return "version";
    case SnapshotError::kChecksum:
      return "checksum";
    case SnapshotError::kTruncated:
      return "truncated";
    case SnapshotError::kTooLarge:
      return "too_large";
  }
  return "unknown";
}

absl::Status WriteSnapshot(const std::string& path, const Store& store, const SpanStore& spans,
                           const EventLog& events, int64_t saved_unix_nano, absl::Time deadline,
                           SnapshotCounts* counts, const StallLearner* learner) {
  *counts = SnapshotCounts{};
  counts->saved_unix_nano = saved_unix_nano;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("snapshot: cannot create ", tmp, ": ", std::strerror(errno)));
  }
  SnapshotWriter w(fd, deadline);
  absl::Status s = WriteAll(&w, store, spans, events, learner, saved_unix_nano, counts);
  counts->bytes = w.written();
  if (s.ok() && ::fsync(fd) != 0) {
    s = absl::InternalError(absl::StrCat("snapshot: fsync: ", std::strerror(errno)));
  }
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat("snapshot: rename to ", path, ": ", std::strerror(errno)));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // Make the rename durable.
  const std::string dir =
      path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (int dfd = ::open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

SnapshotStatus ValidateSnapshot(absl::string_view data, uint64_t max_bytes, SnapshotCounts* counts,
                                int threads) {
  if (data.size() > max_bytes) {
    *counts = SnapshotCounts{};
    counts->bytes = data.size();
    return Fail(SnapshotError::kTooLarge,
                absl::StrCat(data.size(), " bytes, more than the budgets it must fit in (",
                             max_bytes, ")"));
  }
  FileIndex index;
  return ReadFile(data, threads, /*keep=*/false, &index, counts);
}

SnapshotStatus RestoreSnapshot(absl::string_view data, Store* store, SpanStore* spans,
                               EventLog* events, SnapshotCounts* counts, int threads,
                               StallLearner* learner) {
  FileIndex index;
  SnapshotStatus st = ReadFile(data, threads, /*keep=*/true, &index, counts);
  if (!st.ok()) return st;
  RestoreSeries(&index, store, threads, data.size(), counts);
  for (size_t i = 0; i < index.spans.size(); i += 1024) {
    const size_t n = std::min<size_t>(1024, index.spans.size() - i);
    std::vector<Span> batch(std::make_move_iterator(index.spans.begin() + i),
                            std::make_move_iterator(index.spans.begin() + i + n));
    spans->Add(std::move(batch));
  }
  events->Restore(std::move(index.events), counts->saved_unix_nano);
  if (learner != nullptr && !index.learner.empty()) {
    learner->Restore(index.learner).IgnoreError();  // checked above
  }
  return {};
}

std::string ResealSnapshotForFuzzing(absl::string_view data) {
  std::string out(data);
  if (out.size() < kHeaderBytes) return out;
  std::string crc;
  PutU32(&crc, Crc(absl::string_view(out).substr(0, kHeaderBytes - 4)));
  out.replace(kHeaderBytes - 4, 4, crc);
  size_t off = kHeaderBytes;
  while (out.size() - off >= kRecordOverhead) {
    Reader r(absl::string_view(out).substr(off + 1, 4));
    const uint32_t len = r.U32();
    if (out.size() - off - kRecordOverhead < len) break;
    crc.clear();
    PutU32(&crc, Crc(absl::string_view(out).substr(off, 5 + len)));
    out.replace(off + 5 + len, 4, crc);
    off += kRecordOverhead + len;
  }
  return out;
}

MappedSnapshot::~MappedSnapshot() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

SnapshotStatus MappedSnapshot::Open(const std::string& path, uint64_t max_bytes, bool* missing) {
  *missing = false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *missing = errno == ENOENT;
    return Fail(SnapshotError::kIo, absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Fail(SnapshotError::kIo, absl::StrCat(path, " is not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Fail(SnapshotError::kTooLarge,
                absl::StrCat(path, ": ", st.st_size,
                             " bytes, more than the budgets it must fit in (", max_bytes, ")"));
  }
  if (st.st_size == 0) {
    ::close(fd);
    return {};  // empty: ValidateSnapshot reports it
  }
  // Populated at once: every page is read anyway, and one fault per page
  // range costs more than mapping them all in one call (most in a VM).
  void* addr = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                      MAP_PRIVATE | MAP_POPULATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) {
    return Fail(SnapshotError::kIo, absl::StrCat("cannot map ", path, ": ", std::strerror(err)));
  }
  if (addr_ != nullptr) ::munmap(addr_, size_);
  addr_ = addr;
  size_ = static_cast<size_t>(st.st_size);
  return {};
}

}  // namespace fabricscope
