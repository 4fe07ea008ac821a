// MSB-first bit stream primitives shared by the sample codec (chunk.h) and
// the tick time column (time_column.h).
//
// Thread-safety: none; callers own the buffers.
#pragma once

#include <cstdint>
#include <cstring>

namespace fabricscope {

// Writes the low `n` bits of `v` (n <= 64) MSB first at bit offset *pos into
// a zero-initialised buffer.
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

// Reads what PutBits wrote, never past `bits`; a read past the end returns 0
// and leaves ok() false.
class BitReader {
 public:
  BitReader(const uint8_t* data, uint32_t bits) : data_(data), end_(bits) {}
  bool ok() const { return pos_ <= end_; }
  bool at_end() const { return pos_ == end_; }
  uint32_t pos() const { return pos_; }
  // Moves to bit offset `pos` (<= the stream's length; beyond it, ok() is false).
  void Seek(uint32_t pos) { pos_ = pos; }
  uint64_t Get(int n) {
    // Fast path: 1..56 bits wholly inside the stream and 8 readable bytes.
    if (n > 0 && n <= 56 && pos_ + static_cast<uint32_t>(n) <= end_ &&
        (pos_ >> 3) + 8 <= ((end_ + 7) >> 3)) {
      uint64_t w;
      std::memcpy(&w, data_ + (pos_ >> 3), sizeof(w));
      w = __builtin_bswap64(w);  // MSB first
      const uint64_t v = (w << (pos_ & 7)) >> (64 - n);
      pos_ += static_cast<uint32_t>(n);
      return v;
    }
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
  bool Bit() {
    if (pos_ >= end_) {
      pos_ = end_ + 1;
      return false;
    }
    const bool b = ((data_[pos_ >> 3] >> (7 - (pos_ & 7))) & 1) != 0;
    ++pos_;
    return b;
  }

 private:
  const uint8_t* data_;
  uint32_t end_;
  uint32_t pos_ = 0;
};

// The timestamp codes of chunks and tick time columns: a zigzag value in a
// prefix ladder 0 | 10 + A bits | 110 + B bits | 1110 + 32 bits | 1111 + 64
// bits (A < B < 32); the two differ only in A and B.
template <int A, int B>
inline void PutTimeLadder(uint8_t* data, uint32_t* pos, uint64_t z) {
  static_assert(0 < A && A < B && B < 32);
  if (z == 0) {
    PutBits(data, pos, 0b0, 1);
  } else if (z < (uint64_t{1} << A)) {
    PutBits(data, pos, 0b10, 2);
    PutBits(data, pos, z, A);
  } else if (z < (uint64_t{1} << B)) {
    PutBits(data, pos, 0b110, 3);
    PutBits(data, pos, z, B);
  } else if (z < (uint64_t{1} << 32)) {
    PutBits(data, pos, 0b1110, 4);
    PutBits(data, pos, z, 32);
  } else {
    PutBits(data, pos, 0b1111, 4);
    PutBits(data, pos, z, 64);
  }
}

template <int A, int B>
inline uint64_t GetTimeLadder(BitReader* r) {
  if (!r->Bit()) return 0;
  if (!r->Bit()) return r->Get(A);
  if (!r->Bit()) return r->Get(B);
  if (!r->Bit()) return r->Get(32);
  return r->Get(64);
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t z) { return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1)); }

}  // namespace fabricscope
