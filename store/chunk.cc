#include "store/chunk.h"

#include <algorithm>

#include "store/bits.h"

namespace fabricscope {
namespace {

inline void PutTs(uint8_t* data, uint32_t* pos, uint64_t z) {
  if (z == 0) {
    PutBits(data, pos, 0b0, 1);
  } else if (z < (uint64_t{1} << 8)) {
    PutBits(data, pos, 0b10, 2);
    PutBits(data, pos, z, 8);
  } else if (z < (uint64_t{1} << 20)) {
    PutBits(data, pos, 0b110, 3);
    PutBits(data, pos, z, 20);
  } else if (z < (uint64_t{1} << 32)) {
    PutBits(data, pos, 0b1110, 4);
    PutBits(data, pos, z, 32);
  } else {
    PutBits(data, pos, 0b1111, 4);
    PutBits(data, pos, z, 64);
  }
}

inline uint64_t GetTs(BitReader* r) {
  if (!r->Bit()) return 0;
  if (!r->Bit()) return r->Get(8);
  if (!r->Bit()) return r->Get(20);
  if (!r->Bit()) return r->Get(32);
  return r->Get(64);
}

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

void DecodeChunk(const ChunkHeader& h, const uint8_t* data, std::vector<Sample>* out) {
  if (h.count == 0) return;
  out->push_back({h.first_t, h.first_value});
  BitReader r(data, h.bits);
  uint64_t t = static_cast<uint64_t>(h.first_t);
  uint64_t value = h.first_value;
  uint64_t delta = 0;
  uint32_t i = 1;
  while (i < h.count) {
    uint32_t repeat;
    if (r.at_end()) {
      // The trailing run, implicit in the header.
      if (h.count - i != h.run) return;  // corrupt: not what the writer left
      repeat = h.run;
    } else if (r.Bit()) {
      delta += static_cast<uint64_t>(UnZigZag(GetTs(&r)));
      value += static_cast<uint64_t>(UnZigZag(GetValue(&r)));
      if (!r.ok()) return;  // never happens for a stream the writer produced
      t += delta;
      out->push_back({static_cast<int64_t>(t), value});
      ++i;
      continue;
    } else {
      repeat = GetRun(&r);
      if (!r.ok() || repeat > h.count - i) return;
    }
    for (uint32_t k = 0; k < repeat; ++k) {
      t += delta;
      out->push_back({static_cast<int64_t>(t), value});
    }
    i += repeat;
  }
}

bool DecodeChunkFrom(const ChunkHeader& h, const uint8_t* data, ChunkCheckpoint* cp, uint32_t n,
                     std::vector<Sample>* out) {
  if (cp->index >= h.count || n == 0) return true;
  const uint32_t end = n >= h.count - cp->index ? h.count : cp->index + n;
  if (cp->index == 0) {
    out->push_back({h.first_t, h.first_value});
    *cp = ChunkCheckpoint{1, 0, 0, static_cast<uint64_t>(h.first_t), h.first_value, 0};
  }
  BitReader r(data, h.bits);
  if (cp->bit > h.bits) return false;
  r.Seek(cp->bit);
  uint32_t i = cp->index;
  uint64_t t = cp->t;
  uint64_t value = cp->value;
  uint64_t delta = cp->delta;
  uint32_t code_bit = cp->bit;  // where the current run's code starts
  uint32_t run_left = 0;        // samples of the current run still to emit
  uint32_t run_done = cp->run_done;
  bool trailing = false;          // the current run is the implicit trailing one
  if (run_done > 0 && i < end) {  // resume inside a run
    uint32_t total;
    if (r.at_end()) {
      trailing = true;
      if (h.count - (i - run_done) != h.run) return false;  // the trailing run
      total = h.run;
    } else {
      if (r.Bit()) return false;
      total = GetRun(&r);
      if (!r.ok()) return false;
    }
    if (total < run_done || total - run_done > h.count - i) return false;
    run_left = total - run_done;
  }
  while (i < end) {
    if (run_left == 0) {
      code_bit = r.pos();
      run_done = 0;
      trailing = false;
      if (r.at_end()) {
        if (h.count - i != h.run) return false;  // corrupt: not what the writer left
        run_left = h.run;
        trailing = true;
      } else if (r.Bit()) {
        delta += static_cast<uint64_t>(UnZigZag(GetTs(&r)));
        value += static_cast<uint64_t>(UnZigZag(GetValue(&r)));
        if (!r.ok()) return false;
        t += delta;
        out->push_back({static_cast<int64_t>(t), value});
        ++i;
        continue;
      } else {
        run_left = GetRun(&r);
        if (!r.ok() || run_left > h.count - i) return false;
      }
    }
    const uint32_t k = std::min(run_left, end - i);
    for (uint32_t j = 0; j < k; ++j) {
      t += delta;
      out->push_back({static_cast<int64_t>(t), value});
    }
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
  return true;
}

EncodedChunk EncodeChunk(const std::vector<Sample>& samples) {
  EncodedChunk c;
  c.data.assign(samples.size() * kMaxSampleBytes + kMaxSampleBytes, 0);
  for (const Sample& s : samples) ChunkWriter::Append(&c.header, c.data.data(), s.ts_ns, s.value);
  c.data.resize(ChunkWriter::ByteSize(c.header));
  return c;
}

}  // namespace fabricscope
