#include "store/chunk.h"

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

EncodedChunk EncodeChunk(const std::vector<Sample>& samples) {
  EncodedChunk c;
  c.data.assign(samples.size() * kMaxSampleBytes + kMaxSampleBytes, 0);
  for (const Sample& s : samples) ChunkWriter::Append(&c.header, c.data.data(), s.ts_ns, s.value);
  c.data.resize(ChunkWriter::ByteSize(c.header));
  return c;
}

}  // namespace fabricscope
