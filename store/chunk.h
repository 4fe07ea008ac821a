// The sample codec: a chunk is a bit stream of (timestamp, raw value) pairs.
//
// Encoding (MSB first), after the first sample which lives in the header:
//   ts_dod = (ts - prev_ts) - (prev_ts - prev_prev_ts)   (mod 2^64, zig-zag)
//   vdelta = value - prev_value                          (mod 2^64, zig-zag)
//   '0'                          ts_dod == 0 and vdelta == 0   (1 bit: a counter
//                                that does not move on a regular poll)
//   '1' <ts code> <value code>   otherwise
//   ts code:    '0' (0) | '10'+8 bits | '110'+20 bits | '1110'+32 bits | '1111'+64 bits
//   value code: '0' (0) | '10'+6 bits | '110'+14 bits | '1110'+24 bits
//               | '11110'+40 bits | '11111'+64 bits
// All arithmetic is modulo 2^64, so every u64 value and every int64 timestamp
// (equal, decreasing, irregular) round-trips exactly.
//
// ChunkWriter appends into a caller-owned, zero-initialised byte buffer (the
// store's head chunk); DecodeChunk reads any prefix that was written.
//
// Thread-safety: none; the store guards the head chunk and shares sealed
// chunks immutably.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/series.h"

namespace fabricscope {

// Everything needed to continue or decode a chunk besides its bits.
struct ChunkHeader {
  int64_t first_ts = 0;
  uint64_t first_value = 0;
  int64_t last_ts = 0;
  uint64_t last_value = 0;
  uint64_t last_ts_delta = 0;  // encoder state: previous timestamp delta (mod 2^64)
  int64_t min_ts = 0;          // smallest / largest timestamp in the chunk (they
  int64_t max_ts = 0;          // differ from first/last only after clock steps)
  uint32_t count = 0;          // samples, including the first
  uint32_t bits = 0;           // bits used in the stream
};

// Worst case bits one sample can take (1 + 4 + 64 + 5 + 64).
inline constexpr size_t kMaxSampleBits = 138;
inline constexpr size_t kMaxSampleBytes = (kMaxSampleBits + 7) / 8 + 1;

class ChunkWriter {
 public:
  // Appends one sample. The buffer `data` must have at least
  // ByteSize() + kMaxSampleBytes bytes, zero beyond ByteSize().
  static void Append(ChunkHeader* h, uint8_t* data, int64_t ts_ns, uint64_t value);

  // Bytes used by `h`'s stream.
  static size_t ByteSize(const ChunkHeader& h) { return (h.bits + 7) / 8; }
};

// Appends every sample of the chunk to `out`, oldest first.
void DecodeChunk(const ChunkHeader& h, const uint8_t* data, std::vector<Sample>* out);

// Convenience for tests and benchmarks: encodes `samples` into one chunk.
struct EncodedChunk {
  ChunkHeader header;
  std::vector<uint8_t> data;
};
EncodedChunk EncodeChunk(const std::vector<Sample>& samples);

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t z) { return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1)); }

}  // namespace fabricscope
