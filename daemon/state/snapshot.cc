#include "daemon/state/snapshot.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
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

// The time blocks read so far, by the serial the file gives them.
struct ReadBlock {
  std::shared_ptr<TimeBlock> block;
  std::vector<int64_t> ts;  // the timestamp of each tick, from block->first_tick on
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

struct DecodedSeries {
  SeriesKey key;
  SeriesState state;
  std::vector<EncodedChunk> chunks;
  uint64_t samples = 0;
};

// Decodes a series record and checks every chunk against its header by
// decoding it. `detail` says what is wrong when it returns false.
bool DecodeSeries(absl::string_view payload, const ReadBlocks& blocks, DecodedSeries* out,
                  std::string* detail) {
  Reader r(payload);
  out->key = DecodeKey(&r);
  const uint8_t flags = r.U8();
  SeriesState& st = out->state;
  st.has_value = (flags & 1) != 0;
  st.saturated = (flags & 2) != 0;
  st.last_ts_ns = r.I64();
  st.last_raw = r.U64();
  st.total = r.F64();
  st.resets = r.U64();
  st.samples = r.U64();
  st.microbursts = r.U64();
  const uint32_t n = r.U32();
  if (!r.ok()) {
    *detail = "series record cut short";
    return false;
  }
  // Each chunk takes at least 96 bytes in the record: a count beyond that is
  // corrupt (and must not size an allocation).
  if (n > payload.size() / 96) {
    *detail = absl::StrCat("series record claims ", n, " chunks");
    return false;
  }
  out->chunks.clear();
  out->chunks.reserve(n);
  out->samples = 0;
  for (uint32_t i = 0; i < n; ++i) {
    EncodedChunk c;
    ChunkHeader& h = c.header;
    h.first_t = r.I64();
    h.last_t = r.I64();
    h.first_value = r.U64();
    h.last_value = r.U64();
    h.last_t_delta = r.U64();
    h.first_ts = r.I64();
    h.last_ts = r.I64();
    h.min_ts = r.I64();
    h.max_ts = r.I64();
    h.count = r.U32();
    h.bits = r.U32();
    h.run = r.U32();
    const uint64_t serial = r.U64();
    absl::string_view data = r.Bytes();
    if (!r.ok()) {
      *detail = absl::StrCat("series ", out->key.name, ": chunk ", i, " cut short");
      return false;
    }
    if (h.count == 0 || h.count > kMaxChunkSamples || data.size() != ChunkWriter::ByteSize(h)) {
      *detail = absl::StrCat("series ", out->key.name, ": chunk ", i, " has a bad header");
      return false;
    }
    const ReadBlock* block = nullptr;
    if (serial != 0) {
      auto it = blocks.find(serial);
      if (it == blocks.end()) {
        *detail = absl::StrCat("series ", out->key.name, ": chunk ", i,
                               " refers to a time block the file does not hold before it");
        return false;
      }
      block = &it->second;
      c.block = block->block;
    }
    c.data.assign(data.begin(), data.end());
    // The header is checked here; the stream is decoded when it is first read
    // (the store refuses and counts a chunk that does not decode to its
    // header): the CRC already vouches for the bytes the writer produced.
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
      *detail =
          absl::StrCat("series ", out->key.name, ": chunk ", i, " does not decode to its header");
      return false;
    }
    out->samples += h.count;
    out->chunks.push_back(std::move(c));
  }
  if (!r.done()) {
    *detail = absl::StrCat("series ", out->key.name, ": trailing bytes");
    return false;
  }
  return true;
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
}

bool DecodeSpan(absl::string_view payload, Span* s) {
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
                      const EventLog& events, int64_t saved_unix_nano, SnapshotCounts* counts) {
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
  payload.clear();
  PutU64(&payload, counts->series);
  PutU64(&payload, counts->spans);
  PutU64(&payload, counts->events);
  if (auto st = w->Record(kEndRecord, payload); !st.ok()) return st;
  return w->Flush();
}

// ---------------------------------------------------------------------------
// Reading: one pass over the records, validating or applying.

struct Applier {
  Store* store = nullptr;  // null: validate only
  SpanStore* spans = nullptr;
  EventLog* events = nullptr;
};

SnapshotStatus Fail(SnapshotError e, std::string detail) { return {e, std::move(detail)}; }

SnapshotStatus WalkRecords(absl::string_view data, const Applier& apply, ReadBlocks* blocks,
                           SnapshotCounts* counts) {
  *counts = SnapshotCounts{};
  counts->bytes = data.size();
  if (data.size() < sizeof kMagic || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    return Fail(SnapshotError::kFormat, "not a fabricscope snapshot (bad magic)");
  }
  if (data.size() < kHeaderBytes) return Fail(SnapshotError::kTruncated, "header cut short");
  Reader hr(data.substr(sizeof kMagic, kHeaderBytes - sizeof kMagic));
  const uint32_t version = hr.U32();
  const uint32_t flags = hr.U32();
  counts->saved_unix_nano = hr.I64();
  const uint32_t crc = hr.U32();
  if (version != kSnapshotVersion) {
    return Fail(SnapshotError::kVersion,
                absl::StrCat("format version ", version, ", this build reads ", kSnapshotVersion));
  }
  if (crc != Crc(data.substr(0, kHeaderBytes - 4))) {
    return Fail(SnapshotError::kChecksum, "header checksum mismatch");
  }
  if (flags != 0) return Fail(SnapshotError::kFormat, absl::StrCat("unknown flags ", flags));
  absl::string_view rest = data.substr(kHeaderBytes);
  std::vector<Span> span_batch;
  std::vector<DetectorEvent> event_list;
  DecodedSeries series;
  std::string detail;
  uint64_t record = 0;
  bool ended = false;
  while (!rest.empty()) {
    if (ended) return Fail(SnapshotError::kFormat, "bytes after the end record");
    ++record;
    if (rest.size() < kRecordOverhead) {
      return Fail(SnapshotError::kTruncated, absl::StrCat("record ", record, " cut short"));
    }
    Reader rr(rest);
    const uint8_t type = rr.U8();
    const uint32_t len = rr.U32();
    if (rest.size() - kRecordOverhead < len) {
      return Fail(SnapshotError::kTruncated, absl::StrCat("record ", record, " cut short"));
    }
    absl::string_view payload = rest.substr(5, len);
    // Restoring reads a file ValidateSnapshot accepted: its records were
    // checksummed then (the mapping does not change: the daemon only ever
    // replaces the file by rename), so the second pass does not redo it.
    if (apply.store == nullptr) {
      Reader cr(rest.substr(5 + len, 4));
      const uint32_t crc = cr.U32();
      if (crc != Crc(rest.substr(0, 5 + len))) {
        return Fail(SnapshotError::kChecksum,
                    absl::StrCat("record ", record, ": checksum mismatch"));
      }
    }
    rest.remove_prefix(kRecordOverhead + len);
    switch (type) {
      case kTimeBlockRecord: {
        uint64_t serial = 0;
        ReadBlock b;
        if (!DecodeTimeBlock(payload, &serial, &b, &detail)) {
          return Fail(SnapshotError::kFormat, absl::StrCat("record ", record, ": ", detail));
        }
        if (blocks->contains(serial)) {
          return Fail(SnapshotError::kFormat,
                      absl::StrCat("record ", record, ": time block ", serial, " twice"));
        }
        blocks->emplace(serial, std::move(b));
        break;
      }
      case kSeriesRecord: {
        if (!DecodeSeries(payload, *blocks, &series, &detail)) {
          return Fail(SnapshotError::kFormat, absl::StrCat("record ", record, ": ", detail));
        }
        ++counts->series;
        counts->chunks += series.chunks.size();
        counts->samples += series.samples;
        if (apply.store != nullptr) {
          std::optional<Signal> signal = MapCounter(series.key);
          if (!signal.has_value()) {
            ++counts->series_unmapped;
            break;
          }
          uint64_t dropped = 0;
          apply.store->Restore(series.key, *signal, series.state, std::move(series.chunks),
                               &dropped);
          counts->chunks_dropped += dropped;
        }
        break;
      }
      case kSpanRecord: {
        Span s;
        if (!DecodeSpan(payload, &s)) {
          return Fail(SnapshotError::kFormat, absl::StrCat("record ", record, ": bad span"));
        }
        ++counts->spans;
        if (apply.spans != nullptr) {
          span_batch.push_back(std::move(s));
          if (span_batch.size() >= 1024) {
            apply.spans->Add(std::move(span_batch));
            span_batch.clear();
          }
        }
        break;
      }
      case kEventRecord: {
        DetectorEvent e;
        if (!DecodeEvent(payload, &e)) {
          return Fail(SnapshotError::kFormat, absl::StrCat("record ", record, ": bad event"));
        }
        ++counts->events;
        if (apply.events != nullptr) event_list.push_back(std::move(e));
        break;
      }
      case kEndRecord: {
        Reader er(payload);
        const uint64_t ns = er.U64(), np = er.U64(), ne = er.U64();
        if (!er.ok() || !er.done()) {
          return Fail(SnapshotError::kFormat, absl::StrCat("record ", record, ": bad end record"));
        }
        if (ns != counts->series || np != counts->spans || ne != counts->events) {
          return Fail(SnapshotError::kFormat,
                      absl::StrCat("end record counts (", ns, " series, ", np, " spans, ", ne,
                                   " events) differ from the records read"));
        }
        ended = true;
        break;
      }
      default:
        return Fail(SnapshotError::kFormat,
                    absl::StrCat("record ", record, ": unknown type ", type));
    }
  }
  if (!ended) return Fail(SnapshotError::kTruncated, "no end record (the file was cut short)");
  if (apply.spans != nullptr && !span_batch.empty()) apply.spans->Add(std::move(span_batch));
  if (apply.events != nullptr)
    apply.events->Restore(std::move(event_list), counts->saved_unix_nano);
  return {};
}

SnapshotStatus Walk(absl::string_view data, const Applier& apply, SnapshotCounts* counts) {
  // Restored chunks share their blocks; the rest go with the map.
  ReadBlocks blocks;
  return WalkRecords(data, apply, &blocks, counts);
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
                           SnapshotCounts* counts) {
  *counts = SnapshotCounts{};
  counts->saved_unix_nano = saved_unix_nano;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("snapshot: cannot create ", tmp, ": ", std::strerror(errno)));
  }
  SnapshotWriter w(fd, deadline);
  absl::Status s = WriteAll(&w, store, spans, events, saved_unix_nano, counts);
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

SnapshotStatus ValidateSnapshot(absl::string_view data, uint64_t max_bytes,
                                SnapshotCounts* counts) {
  if (data.size() > max_bytes) {
    return Fail(SnapshotError::kTooLarge,
                absl::StrCat(data.size(), " bytes, more than the budgets it must fit in (",
                             max_bytes, ")"));
  }
  return Walk(data, Applier{}, counts);
}

SnapshotStatus RestoreSnapshot(absl::string_view data, Store* store, SpanStore* spans,
                               EventLog* events, SnapshotCounts* counts) {
  return Walk(data, Applier{store, spans, events}, counts);
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
  void* addr = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) {
    return Fail(SnapshotError::kIo, absl::StrCat("cannot map ", path, ": ", std::strerror(err)));
  }
  ::madvise(addr, static_cast<size_t>(st.st_size), MADV_SEQUENTIAL);
  if (addr_ != nullptr) ::munmap(addr_, size_);
  addr_ = addr;
  size_ = static_cast<size_t>(st.st_size);
  return {};
}

}  // namespace fabricscope
