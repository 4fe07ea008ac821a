#include "store/chunk.h"

#include <algorithm>
#include <cstring>

#include "store/bits.h"

namespace fabricscope {
namespace {

// A chunk's per-sample timestamp code (delta-of-delta, zigzag).
inline void PutTs(uint8_t* data, uint32_t* pos, uint64_t z) { PutTimeLadder<8, 20>(data, pos, z); }
inline uint64_t GetTs(BitReader* r) { return GetTimeLadder<8, 20>(r); }

inline void PutValue(uint8_t* data, uint32_t* pos, uint64_t z) {
  if (z == 0) {
    PutBits(data, pos, 0b0, 1);
  } else if (z < (uint64_t{1} << 6)) {
    PutBits(data, pos, 0b10, 2);
    PutBits(data, pos, z, 6);
  } else if (z < (uint64_t{1} << 14)) {
    PutBits(data, pos, 0b110, 3);
    PutBits(data, pos, z, 14);
  } else if (z < (uint64_t{1} << 24)) {
    PutBits(data, pos, 0b1110, 4);
    PutBits(data, pos, z, 24);
  } else if (z < (uint64_t{1} << 40)) {
    PutBits(data, pos, 0b11110, 5);
    PutBits(data, pos, z, 40);
  } else {
    PutBits(data, pos, 0b11111, 5);
    PutBits(data, pos, z, 64);
  }
}

inline uint64_t GetValue(BitReader* r) {
  if (!r->Bit()) return 0;
  if (!r->Bit()) return r->Get(6);
  if (!r->Bit()) return r->Get(14);
  if (!r->Bit()) return r->Get(24);
  if (!r->Bit()) return r->Get(40);
  return r->Get(64);
}

inline void PutRun(uint8_t* data, uint32_t* pos, uint32_t n) {
  PutBits(data, pos, 0, 1);
  if (n == 1) {
    PutBits(data, pos, 0b0, 1);
  } else if (n <= 17) {
    PutBits(data, pos, 0b10, 2);
    PutBits(data, pos, n - 2, 4);
  } else if (n <= 273) {
    PutBits(data, pos, 0b110, 3);
    PutBits(data, pos, n - 18, 8);
  } else {
    PutBits(data, pos, 0b111, 3);
    PutBits(data, pos, n - 274, 13);
  }
}

// After the '0' that starts a run.
inline uint32_t GetRun(BitReader* r) {
  if (!r->Bit()) return 1;
  if (!r->Bit()) return static_cast<uint32_t>(r->Get(4)) + 2;
  if (!r->Bit()) return static_cast<uint32_t>(r->Get(8)) + 18;
  return static_cast<uint32_t>(r->Get(13)) + 274;
}

}  // namespace

void ChunkWriter::Append(ChunkHeader* h, uint8_t* data, int64_t t, int64_t ts_ns, uint64_t value) {
  if (h->count == 0) {
    h->first_t = h->last_t = t;
    h->first_ts = h->last_ts = h->min_ts = h->max_ts = ts_ns;
    h->first_value = h->last_value = value;
    h->last_t_delta = 0;
    h->run = 0;
    h->count = 1;
    return;
  }
  const uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(h->last_t);
  const uint64_t dod = ZigZag(static_cast<int64_t>(delta - h->last_t_delta));
  const uint64_t vd = ZigZag(static_cast<int64_t>(value - h->last_value));
  uint32_t pos = h->bits;
  if (dod == 0 && vd == 0) {
    if (++h->run == kMaxRun) {
      PutRun(data, &pos, h->run);
      h->run = 0;
    }
  } else {
    if (h->run > 0) {
      PutRun(data, &pos, h->run);
      h->run = 0;
    }
    PutBits(data, &pos, 1, 1);
    PutTs(data, &pos, dod);
    PutValue(data, &pos, vd);
  }
  h->bits = pos;
  if (ts_ns < h->min_ts) h->min_ts = ts_ns;
  if (ts_ns > h->max_ts) h->max_ts = ts_ns;
  h->last_t = t;
  h->last_ts = ts_ns;
  h->last_value = value;
  h->last_t_delta = delta;
  ++h->count;
}

namespace {

// The sample decoder over `data` (`bits` long, ByteSize bytes readable).
// Where the stream has 8 bytes left at the position, a code is decoded from
// one 8-byte big-endian load (57 usable bits) with a branch per prefix bit
// (predictable: a series' codes repeat), so that the next position does not
// wait for the data; a code that does not fit (64-bit fields), or one near
// the stream's end, is read bit by bit (BitReader), exactly as written.
class FastReader {
 public:
  FastReader(const uint8_t* data, uint32_t bits)
      : data_(data), end_(bits), bytes_((bits + 7) / 8) {}
  uint32_t pos() const { return pos_; }
  void Seek(uint32_t pos) { pos_ = pos; }
  bool ok() const { return pos_ <= end_; }
  bool at_end() const { return pos_ == end_; }

  // The next code: a sample ('1': true, its zig-zagged time delta-of-delta
  // and value delta in *tz, *vz) or a run ('0': false, its length in *run).
  // Past the end: !ok() afterwards.
  bool Next(uint64_t* tz, uint64_t* vz, uint32_t* run) {
    if ((pos_ >> 3) + 8 <= bytes_) {
      uint64_t w;
      std::memcpy(&w, data_ + (pos_ >> 3), sizeof(w));
      w = __builtin_bswap64(w) << (pos_ & 7);  // the top 57 bits are the stream's
      if ((w >> 63) == 0) {                    // a run
        const uint64_t x = w << 1;
        if ((x >> 63) == 0) {
          *run = 1;
          pos_ += 2;
        } else if (((x << 1) >> 63) == 0) {
          *run = static_cast<uint32_t>((x << 2) >> 60) + 2;
          pos_ += 7;
        } else if (((x << 2) >> 63) == 0) {
          *run = static_cast<uint32_t>((x << 3) >> 56) + 18;
          pos_ += 12;
        } else {
          *run = static_cast<uint32_t>((x << 3) >> 51) + 274;
          pos_ += 17;
        }
        return false;
      }
      uint64_t x = w << 1;
      uint32_t used = 1;
      bool fits = true;
      if ((x >> 63) == 0) {
        *tz = 0;
        used += 1;
      } else if (((x << 1) >> 63) == 0) {
        *tz = (x << 2) >> 56;
        used += 10;
      } else if (((x << 2) >> 63) == 0) {
        *tz = (x << 3) >> 44;
        used += 23;
      } else {
        fits = false;
      }
      if (fits) {
        x = w << used;
        if ((x >> 63) == 0) {
          *vz = 0;
          pos_ += used + 1;
          return true;
        }
        if (((x << 1) >> 63) == 0) {
          *vz = (x << 2) >> 58;
          pos_ += used + 8;
          return true;
        }
        if (((x << 2) >> 63) == 0) {
          *vz = (x << 3) >> 50;
          pos_ += used + 17;
          return true;
        }
        if (((x << 3) >> 63) == 0 && used + 28 <= 57) {
          *vz = (x << 4) >> 40;
          pos_ += used + 28;
          return true;
        }
      }
    }
    BitReader r(data_, end_);
    r.Seek(pos_);
    const bool sample = r.Bit();
    if (sample) {
      *tz = GetTs(&r);
      *vz = GetValue(&r);
    } else {
      *run = GetRun(&r);
    }
    pos_ = r.pos();
    return sample;
  }
  // The first bit of the next code (resuming inside a run: '0').
  bool Bit() {
    BitReader r(data_, end_);
    r.Seek(pos_);
    const bool b = r.Bit();
    pos_ = r.pos();
    return b;
  }
  uint32_t Run() {
    BitReader r(data_, end_);
    r.Seek(pos_);
    const uint32_t n = GetRun(&r);
    pos_ = r.pos();
    return n;
  }

 private:
  const uint8_t* data_;
  uint32_t end_;
  uint32_t bytes_;
  uint32_t pos_ = 0;
};

// Writes samples cp->index .. end - 1 (end <= h.count) to out[0..] and
// advances `cp` past them; *written: how many were written (also on
// failure). False when the stream is corrupt there.
bool DecodeRaw(const ChunkHeader& h, const uint8_t* data, ChunkCheckpoint* cp, uint32_t end,
               Sample* out, uint32_t* written) {
  *written = 0;
  if (cp->index >= end) return true;
  Sample* o = out;
  if (cp->index == 0) {
    *o++ = {h.first_t, h.first_value};
    *cp = ChunkCheckpoint{1, 0, 0, static_cast<uint64_t>(h.first_t), h.first_value, 0};
  }
  if (cp->bit > h.bits) {
    *written = static_cast<uint32_t>(o - out);
    return false;
  }
  FastReader r(data, h.bits);
  r.Seek(cp->bit);
  uint32_t i = cp->index;
  uint64_t t = cp->t;
  uint64_t value = cp->value;
  uint64_t delta = cp->delta;
  uint32_t code_bit = cp->bit;  // where the current run's code starts
  uint32_t run_left = 0;        // samples of the current run still to emit
  uint32_t run_done = cp->run_done;
  bool trailing = false;  // the current run is the implicit trailing one
  auto fail = [&]() {
    *written = static_cast<uint32_t>(o - out);
    return false;
  };
  if (run_done > 0 && i < end) {  // resume inside a run
    uint32_t total;
    if (r.at_end()) {
      trailing = true;
      if (h.count - (i - run_done) != h.run) return fail();  // the trailing run
      total = h.run;
    } else {
      if (r.Bit()) return fail();
      total = r.Run();
      if (!r.ok()) return fail();
    }
    if (total < run_done || total - run_done > h.count - i) return fail();
    run_left = total - run_done;
  }
  while (i < end) {
    if (run_left == 0) {
      code_bit = r.pos();
      run_done = 0;
      trailing = false;
      if (r.at_end()) {
        if (h.count - i != h.run) return fail();  // corrupt: not what the writer left
        run_left = h.run;
        trailing = true;
      } else {
        uint64_t tz, vz;
        uint32_t run;
        if (r.Next(&tz, &vz, &run)) {
          delta += static_cast<uint64_t>(UnZigZag(tz));
          value += static_cast<uint64_t>(UnZigZag(vz));
          if (!r.ok()) return fail();
          t += delta;
          *o++ = {static_cast<int64_t>(t), value};
          ++i;
          continue;
        }
        run_left = run;
        if (!r.ok() || run_left > h.count - i) return fail();
      }
    }
    const uint32_t k = std::min(run_left, end - i);
    for (uint32_t j = 0; j < k; ++j) {
      t += delta;
      o[j] = {static_cast<int64_t>(t), value};
    }
    o += k;
    i += k;
    run_left -= k;
    run_done += k;
  }
  cp->index = i;
  cp->t = t;
  cp->value = value;
  cp->delta = delta;
  // Inside a run, or at the end of the trailing one (which the writer may
  // still extend and then write, as one code, at code_bit).
  if (run_left > 0 || (trailing && run_done > 0)) {
    cp->bit = code_bit;
    cp->run_done = run_done;
  } else {
    cp->bit = r.pos();
    cp->run_done = 0;
  }
  *written = static_cast<uint32_t>(o - out);
  return true;
}

}  // namespace

void DecodeChunk(const ChunkHeader& h, const uint8_t* data, std::vector<Sample>* out) {
  ChunkCheckpoint cp;
  DecodeChunkFrom(h, data, &cp, h.count, out);
}

bool DecodeChunkFrom(const ChunkHeader& h, const uint8_t* data, ChunkCheckpoint* cp, uint32_t n,
                     std::vector<Sample>* out) {
  if (cp->index >= h.count || n == 0) return true;
  const uint32_t end = n >= h.count - cp->index ? h.count : cp->index + n;
  const size_t start = out->size();
  out->resize(start + (end - cp->index));
  uint32_t written = 0;
  const bool ok = DecodeRaw(h, data, cp, end, out->data() + start, &written);
  out->resize(start + written);
  return ok;
}

uint32_t DecodeChunkInto(const ChunkHeader& h, const uint8_t* data, ChunkCheckpoint* cp, uint32_t n,
                         Sample* out, bool* ok) {
  *ok = true;
  if (cp->index >= h.count || n == 0) return 0;
  const uint32_t end = n >= h.count - cp->index ? h.count : cp->index + n;
  uint32_t written = 0;
  *ok = DecodeRaw(h, data, cp, end, out, &written);
  return written;
}

EncodedChunk EncodeChunk(const std::vector<Sample>& samples) {
  EncodedChunk c;
  c.data.assign(samples.size() * kMaxSampleBytes + kMaxSampleBytes, 0);
  for (const Sample& s : samples) ChunkWriter::Append(&c.header, c.data.data(), s.ts_ns, s.value);
  c.data.resize(ChunkWriter::ByteSize(c.header));
  return c;
}

}  // namespace fabricscope
