// The sample codec: a chunk is a bit stream of (time, raw value) pairs.
//
// "Time" is the stream time: the sample's timestamp in ns for a chunk of its
// own, or the index of the tier tick that polled it for a chunk that refers
// to a tick time column (time_column.h: the column holds each tick's
// timestamp once, for every series of the tier). A series polled every tick
// has tick-index deltas of exactly 1, so timestamp jitter costs nothing here.
// The header also keeps the samples' real first/last/min/max timestamps.
//
// Encoding (MSB first), after the first sample which lives in the header:
//   t_dod  = (t - prev_t) - (prev_t - prev_prev_t)       (mod 2^64, zig-zag)
//   vdelta = value - prev_value                          (mod 2^64, zig-zag)
//   '0' <run>                    a run of samples with t_dod == 0 and
//                                vdelta == 0 (a counter that does not move
//                                on a regular poll)
//   '1' <t code> <value code>    otherwise
//   run:        '0' (1) | '10'+4 bits (2..17) | '110'+8 bits (18..273)
//               | '111'+13 bits (274..8465)
//   t code:     '0' (0) | '10'+8 bits | '110'+20 bits | '1110'+32 bits | '1111'+64 bits
//   value code: '0' (0) | '10'+6 bits | '110'+14 bits | '1110'+24 bits
//               | '11110'+40 bits | '11111'+64 bits
// A run is written when the next moving sample (or the run's maximum) ends
// it; the trailing run (ChunkHeader::run samples) is implicit: the decoder
// repeats the last sample until it has `count` samples.
// All arithmetic is modulo 2^64, so every u64 value and every int64 time
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
#include <memory>
#include <vector>

#include "core/series.h"
#include "store/bits.h"

namespace fabricscope {

// Everything needed to continue or decode a chunk besides its bits.
struct ChunkHeader {
  int64_t first_t = 0;  // stream time (ns, or tick index) of the first sample
  int64_t last_t = 0;   // ... and of the last
  uint64_t first_value = 0;
  uint64_t last_value = 0;
  uint64_t last_t_delta = 0;  // encoder state: previous stream time delta (mod 2^64)
  int64_t first_ts = 0;       // real timestamps (ns) of the first and last sample
  int64_t last_ts = 0;
  int64_t min_ts = 0;  // smallest / largest timestamp in the chunk (they
  int64_t max_ts = 0;  // differ from first/last only after clock steps)
  uint32_t count = 0;  // samples, including the first
  uint32_t bits = 0;   // bits used in the stream
  uint32_t run = 0;    // trailing unchanged samples not yet in the stream
  uint32_t reserved = 0;
};

// The longest run one run code holds.
inline constexpr uint32_t kMaxRun = 8465;

// Worst case bits one sample can take: a run that it ends (1 + 3 + 13) and
// the sample (1 + 4 + 64 + 5 + 64).
inline constexpr size_t kMaxSampleBits = 17 + 138;
inline constexpr size_t kMaxSampleBytes = (kMaxSampleBits + 7) / 8 + 1;

class ChunkWriter {
 public:
  // Appends one sample at stream time `t` with real timestamp `ts_ns`. The
  // buffer `data` must have at least ByteSize() + kMaxSampleBytes bytes, zero
  // beyond ByteSize().
  static void Append(ChunkHeader* h, uint8_t* data, int64_t t, int64_t ts_ns, uint64_t value);
  // A chunk of its own: the stream time is the timestamp.
  static void Append(ChunkHeader* h, uint8_t* data, int64_t ts_ns, uint64_t value) {
    Append(h, data, ts_ns, ts_ns, value);
  }

  // Bytes used by `h`'s stream.
  static size_t ByteSize(const ChunkHeader& h) { return (h.bits + 7) / 8; }
};

// Appends every sample of the chunk to `out`, oldest first, with its stream
// time in Sample::ts_ns (the timestamp for a chunk of its own, the tick
// index for a chunk on a time column). A corrupt stream stops early (fewer
// than h.count samples appended).
void DecodeChunk(const ChunkHeader& h, const uint8_t* data, std::vector<Sample>* out);

// A decoder position between two samples of a chunk (DecodeChunkFrom): the
// next sample's index, the bit offset of the code that produces it and how
// many samples of that code (a run) came before it, and the decoder's state
// after the previous sample. A position inside the head chunk stays valid
// while the writer appends (the trailing run is written later at the same
// offset), so readers may keep it as a seek point.
struct ChunkCheckpoint {
  uint32_t index = 0;  // 0: before the first sample (the header's)
  uint32_t bit = 0;
  uint32_t run_done = 0;
  uint64_t t = 0;  // stream time, value and time delta after sample index - 1
  uint64_t value = 0;
  uint64_t delta = 0;
};

// Appends samples cp->index .. min(cp->index + n, h.count) - 1 to `out`
// (stream times, as DecodeChunk) and advances `cp` past them. False when
// the stream is corrupt there (what was appended before stays appended).
bool DecodeChunkFrom(const ChunkHeader& h, const uint8_t* data, ChunkCheckpoint* cp, uint32_t n,
                     std::vector<Sample>* out);
// The same into a caller's buffer `out`, which has room for
// min(n, h.count - cp->index) samples: returns how many were written; *ok
// false when the stream is corrupt there (those written stay written).
uint32_t DecodeChunkInto(const ChunkHeader& h, const uint8_t* data, ChunkCheckpoint* cp, uint32_t n,
                         Sample* out, bool* ok);

class TimeBlock;

// Convenience for tests and benchmarks (encodes `samples` into one chunk of
// its own), and the form a restored chunk takes (Store::Restore).
struct EncodedChunk {
  ChunkHeader header;
  std::vector<uint8_t> data;
  // The time column block the chunk's tick indexes refer to; null for a
  // chunk of its own.
  std::shared_ptr<TimeBlock> block;
};
EncodedChunk EncodeChunk(const std::vector<Sample>& samples);

}  // namespace fabricscope
