#include "store/chunk.h"

namespace fabricscope {
namespace {

// Writes the low `n` bits of `v` (n <= 64) MSB first at bit offset *pos.
inline void PutBits(uint8_t* data, uint32_t* pos, uint64_t v, int n) {
  uint32_t p = *pos;
  while (n > 0) {
    const int room = 8 - static_cast<int>(p & 7);
    const int take = n < room ? n : room;
    const uint64_t bits = (v >> (n - take)) & ((uint64_t{1} << take) - 1);
    data[p >> 3] |= static_cast<uint8_t>(bits << (room - take));
    p += take;
    n -= take;
  }
  *pos = p;
}

class BitReader {
 public:
  BitReader(const uint8_t* data, uint32_t bits) : data_(data), end_(bits) {}
  bool ok() const { return pos_ <= end_; }
  uint64_t Get(int n) {
    uint64_t v = 0;
    while (n > 0) {
      if (pos_ >= end_) {  // truncated stream: stop cleanly
        pos_ = end_ + 1;
        return 0;
      }
      const int room = 8 - static_cast<int>(pos_ & 7);
      const int take = n < room ? n : room;
      const uint64_t byte = data_[pos_ >> 3];
      v = (v << take) | ((byte >> (room - take)) & ((uint64_t{1} << take) - 1));
      pos_ += take;
      n -= take;
    }
    return v;
  }
  bool Bit() { return Get(1) != 0; }

 private:
  const uint8_t* data_;
  uint32_t end_;
  uint32_t pos_ = 0;
};

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

}  // namespace

void ChunkWriter::Append(ChunkHeader* h, uint8_t* data, int64_t ts_ns, uint64_t value) {
  if (h->count == 0) {
    h->first_ts = h->last_ts = h->min_ts = h->max_ts = ts_ns;
    h->first_value = h->last_value = value;
    h->last_ts_delta = 0;
    h->count = 1;
    return;
  }
  const uint64_t delta = static_cast<uint64_t>(ts_ns) - static_cast<uint64_t>(h->last_ts);
  const uint64_t dod = ZigZag(static_cast<int64_t>(delta - h->last_ts_delta));
  const uint64_t vd = ZigZag(static_cast<int64_t>(value - h->last_value));
  uint32_t pos = h->bits;
  if (dod == 0 && vd == 0) {
    PutBits(data, &pos, 0, 1);
  } else {
    PutBits(data, &pos, 1, 1);
    PutTs(data, &pos, dod);
    PutValue(data, &pos, vd);
  }
  h->bits = pos;
  if (ts_ns < h->min_ts) h->min_ts = ts_ns;
  if (ts_ns > h->max_ts) h->max_ts = ts_ns;
  h->last_ts = ts_ns;
  h->last_value = value;
  h->last_ts_delta = delta;
  ++h->count;
}

void DecodeChunk(const ChunkHeader& h, const uint8_t* data, std::vector<Sample>* out) {
  if (h.count == 0) return;
  out->push_back({h.first_ts, h.first_value});
  BitReader r(data, h.bits);
  uint64_t ts = static_cast<uint64_t>(h.first_ts);
  uint64_t value = h.first_value;
  uint64_t delta = 0;
  for (uint32_t i = 1; i < h.count; ++i) {
    if (r.Bit()) {
      delta += static_cast<uint64_t>(UnZigZag(GetTs(&r)));
      value += static_cast<uint64_t>(UnZigZag(GetValue(&r)));
    }
    if (!r.ok()) return;  // never happens for a stream the writer produced
    ts += delta;
    out->push_back({static_cast<int64_t>(ts), value});
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
