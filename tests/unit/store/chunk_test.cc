// Codec round-trip property tests: random and adversarial sequences.
#include "store/chunk.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace fabricscope {
namespace {

void ExpectRoundTrip(const std::vector<Sample>& in) {
  EncodedChunk c = EncodeChunk(in);
  ASSERT_EQ(c.header.count, in.size());
  std::vector<Sample> out;
  DecodeChunk(c.header, c.data.data(), &out);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(out[i], in[i]) << "sample " << i;
  }
  // Every prefix decodes too (the head chunk is read while it grows).
  if (!in.empty()) {
    ChunkHeader h;
    std::vector<uint8_t> buf(in.size() * kMaxSampleBytes + kMaxSampleBytes, 0);
    for (size_t i = 0; i < in.size(); ++i) {
      ChunkWriter::Append(&h, buf.data(), in[i].ts_ns, in[i].value);
      if (i % 97 == 0 || i + 1 == in.size()) {
        std::vector<Sample> prefix;
        DecodeChunk(h, buf.data(), &prefix);
        ASSERT_EQ(prefix.size(), i + 1);
        ASSERT_EQ(prefix.back(), in[i]);
      }
    }
  }
}

TEST(ChunkTest, ZigZagRoundTripsExtremes) {
  for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, std::numeric_limits<int64_t>::max(),
                    std::numeric_limits<int64_t>::min()}) {
    EXPECT_EQ(UnZigZag(ZigZag(v)), v);
  }
  EXPECT_EQ(ZigZag(0), 0u);
  EXPECT_EQ(ZigZag(-1), 1u);
  EXPECT_EQ(ZigZag(1), 2u);
}

TEST(ChunkTest, EmptyAndSingle) {
  ExpectRoundTrip({});
  ExpectRoundTrip({{123, 456}});
  ExpectRoundTrip({{std::numeric_limits<int64_t>::min(), UINT64_MAX}});
}

TEST(ChunkTest, ConstantCounterCostsOneBitPerSample) {
  std::vector<Sample> in;
  for (int i = 0; i < 8000; ++i) in.push_back({1'700'000'000'000'000'000 + i * 10'000'000LL, 42});
  ExpectRoundTrip(in);
  EncodedChunk c = EncodeChunk(in);
  // The second sample sets the timestamp delta (one '1' + codes); the rest are '0'.
  EXPECT_LE(c.data.size(), 8000 / 8 + 8);
}

TEST(ChunkTest, RunsOfEveryLengthRoundTrip) {
  // Runs of unchanged samples at each run-code boundary, ended by a moving
  // sample, and a trailing run left implicit in the header.
  for (uint32_t run : {1u, 2u, 17u, 18u, 273u, 274u, kMaxRun - 1, kMaxRun, kMaxRun + 1}) {
    std::vector<Sample> in;
    int64_t t = 1000;
    uint64_t v = 5;
    in.push_back({t, v});
    in.push_back({t += 10, v});  // sets the time delta: the runs below are pure
    for (uint32_t i = 0; i < run; ++i) in.push_back({t += 10, v});
    in.push_back({t += 10, ++v});
    for (uint32_t i = 0; i < run; ++i) in.push_back({t += 10, v});
    // Every prefix that ends at a run boundary decodes (the head is read
    // while it grows, with its trailing run pending).
    ChunkHeader h;
    std::vector<uint8_t> buf(in.size() * kMaxSampleBytes + kMaxSampleBytes, 0);
    for (size_t i = 0; i < in.size(); ++i) {
      ChunkWriter::Append(&h, buf.data(), in[i].ts_ns, in[i].value);
      if (i + 1 == in.size() || i == run + 1 || i == run + 2 || i == 2) {
        std::vector<Sample> out;
        DecodeChunk(h, buf.data(), &out);
        ASSERT_EQ(out.size(), i + 1) << "run " << run;
        for (size_t k = 0; k <= i; ++k)
          ASSERT_EQ(out[k], in[k]) << "run " << run << " sample " << k;
      }
    }
    if (run == kMaxRun + 1) {
      EXPECT_EQ(h.run, 1u);  // one full run code written, one pending
    }
  }
}

TEST(ChunkTest, AConstantCounterCostsARunCodePerRun) {
  std::vector<Sample> in;
  for (int i = 0; i < 8000; ++i) in.push_back({i * 10'000'000LL, 42});
  EncodedChunk c = EncodeChunk(in);
  // The second sample sets the time delta; the other 7998 are one pending run.
  EXPECT_EQ(c.header.run, 7998u);
  EXPECT_LE(c.data.size(), 5u);
  in.push_back({8000 * 10'000'000LL, 43});
  c = EncodeChunk(in);
  EXPECT_EQ(c.header.run, 0u);
  EXPECT_LE(c.data.size(), 10u);  // plus one run code and one moving sample
}

TEST(ChunkTest, ACorruptRunIsNotServed) {
  std::vector<Sample> in;
  for (int i = 0; i < 100; ++i) in.push_back({i * 10LL, uint64_t(i / 10)});
  EncodedChunk c = EncodeChunk(in);
  ChunkHeader h = c.header;
  h.count += 3;  // claims more samples than the stream and its trailing run hold
  std::vector<Sample> out;
  DecodeChunk(h, c.data.data(), &out);
  EXPECT_LT(out.size(), h.count);
}

TEST(ChunkTest, ResetsWrapsAndHugeJumps) {
  std::vector<Sample> in;
  int64_t ts = 1'000'000'000;
  uint64_t v = 0;
  const uint64_t steps[] = {
      0, 1, 63, 64, 8191, 8192, (1u << 23), (1ull << 39), (1ull << 40), UINT64_MAX / 2, UINT64_MAX};
  for (int round = 0; round < 3; ++round) {
    for (uint64_t s : steps) {
      ts += 10'000'000;
      v += s;  // wraps modulo 2^64
      in.push_back({ts, v});
    }
    ts += 10'000'000;
    in.push_back({ts, 0});  // reset
    ts += 10'000'000;
    in.push_back({ts, 4294967290u});  // near a 32-bit wrap
    ts += 10'000'000;
    in.push_back({ts, 5});  // 32-bit wrap
    ts += 10'000'000;
    in.push_back({ts, UINT64_MAX});
    ts += 10'000'000;
    in.push_back({ts, 0});
  }
  ExpectRoundTrip(in);
}

TEST(ChunkTest, IrregularEqualAndBackwardsTimestamps) {
  std::vector<Sample> in = {
      {1000, 1},
      {1000, 2},  // equal
      {1000, 3},
      {999, 4},  // clock stepped back
      {5'000'000'000, 5},
      {5'000'000'001, 5},
      {std::numeric_limits<int64_t>::max(), 6},
      {std::numeric_limits<int64_t>::min(), 7},
      {0, 8},
      {-5, 9},
      {std::numeric_limits<int64_t>::max(), 10},
  };
  ExpectRoundTrip(in);
}

TEST(ChunkTest, RandomSequencesRoundTrip) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Sample> in;
    const int n = 1 + static_cast<int>(rng() % 3000);
    int64_t ts = static_cast<int64_t>(rng());
    uint64_t v = rng();
    const int mode = trial % 5;
    for (int i = 0; i < n; ++i) {
      switch (mode) {
        case 0:  // fully random
          ts = static_cast<int64_t>(rng());
          v = rng();
          break;
        case 1:  // regular poll with jitter, small increments
          ts += 10'000'000 + static_cast<int64_t>(rng() % 200'000) - 100'000;
          v += rng() % 100;
          break;
        case 2:  // mostly idle, occasional large jumps and resets
          ts += 10'000'000;
          if (rng() % 50 == 0) v += rng() >> (rng() % 64);
          if (rng() % 500 == 0) v = rng() % 10;
          break;
        case 3:  // random bucket boundaries for both codes
          // Wrapping on purpose (two's complement), without signed overflow.
          ts = static_cast<int64_t>(
              static_cast<uint64_t>(ts) +
              ((rng() & 1) ? (uint64_t{1} << (rng() % 63)) : -(uint64_t{1} << (rng() % 63))));
          v += (uint64_t{1} << (rng() % 64)) - (rng() & 1);
          break;
        default:  // equal timestamps and constant runs
          if (rng() % 3 == 0) ts += static_cast<int64_t>(rng() % 1000);
          if (rng() % 10 == 0) v -= rng() % 1000;
          break;
      }
      in.push_back({ts, v});
    }
    ExpectRoundTrip(in);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "trial " << trial << " mode " << mode;
      return;
    }
  }
}

TEST(ChunkTest, MinMaxTimestampsTracked) {
  EncodedChunk c = EncodeChunk({{50, 1}, {10, 2}, {70, 3}, {60, 4}});
  EXPECT_EQ(c.header.first_ts, 50);
  EXPECT_EQ(c.header.last_ts, 60);
  EXPECT_EQ(c.header.min_ts, 10);
  EXPECT_EQ(c.header.max_ts, 70);
  EXPECT_EQ(c.header.last_value, 4u);
}

// DecodeChunkFrom: decoding in steps of n from the checkpoint each step
// leaves gives what DecodeChunk gives, for runs of every kind (inside a
// run, at its end, the implicit trailing run), and a checkpoint taken while
// the chunk grows (the head) still decodes the grown chunk.
TEST(ChunkTest, CheckpointsResumeAnywhereWhileTheChunkGrows) {
  std::mt19937_64 rng(21);
  for (int round = 0; round < 40; ++round) {
    std::vector<Sample> in;
    int64_t ts = 1'000'000;
    uint64_t v = rng();
    const size_t n = 1 + rng() % 3000;
    bool long_run = round % 5 != 0;  // one run longer than kMaxRun in every fifth round
    for (size_t i = 0; i < n; ++i) {
      const uint64_t r = rng() % 100;
      ts += (r < 90) ? 10 : static_cast<int64_t>(rng() % 50);      // mostly regular
      if (r < 5 || (round % 3 == 0 && r < 40)) v += rng() % 1000;  // mostly constant
      in.push_back({ts, v});
      if (!long_run && r == 99) {
        for (uint32_t k = 0; k < kMaxRun + 3; ++k) in.push_back({ts += 10, v});
        long_run = true;
      }
    }
    ChunkHeader h;
    std::vector<uint8_t> buf(in.size() * kMaxSampleBytes + kMaxSampleBytes, 0);
    std::vector<ChunkCheckpoint> taken;  // checkpoints taken on prefixes
    for (size_t i = 0; i < in.size(); ++i) {
      ChunkWriter::Append(&h, buf.data(), in[i].ts_ns, in[i].value);
      if (rng() % 50 == 0) {  // a reader of the head decodes it up to here
        ChunkCheckpoint cp = taken.empty() ? ChunkCheckpoint{} : taken.back();
        std::vector<Sample> got;
        const uint32_t from = cp.index;
        ASSERT_TRUE(DecodeChunkFrom(h, buf.data(), &cp, h.count, &got));
        ASSERT_EQ(cp.index, h.count);
        ASSERT_EQ(got.size(), h.count - from);
        for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], in[from + k]);
        taken.push_back(cp);
      }
    }
    // The whole chunk in random steps; from every checkpoint taken, the next
    // 2 x kMaxRun samples (past the end of a run it was taken in; a decode of
    // the whole rest from each would be quadratic), and the whole rest from
    // every tenth.
    ChunkCheckpoint cp;
    std::vector<Sample> got;
    while (cp.index < h.count) {
      const uint32_t before = cp.index;
      ASSERT_TRUE(DecodeChunkFrom(h, buf.data(), &cp, 1 + rng() % 200, &got));
      ASSERT_GT(cp.index, before);
    }
    ASSERT_EQ(got.size(), in.size());
    for (size_t k = 0; k < in.size(); ++k) ASSERT_EQ(got[k], in[k]) << "round " << round;
    for (size_t j = 0; j < taken.size(); ++j) {
      ChunkCheckpoint t = taken[j];
      std::vector<Sample> rest;
      const uint32_t from = t.index;
      const uint32_t want = j % 10 == 0 ? h.count - from : std::min(h.count - from, 2 * kMaxRun);
      ASSERT_TRUE(DecodeChunkFrom(h, buf.data(), &t, want, &rest));
      ASSERT_EQ(rest.size(), want);
      for (size_t k = 0; k < rest.size(); ++k) ASSERT_EQ(rest[k], in[from + k]);
    }
  }
}

}  // namespace
}  // namespace fabricscope

namespace fabricscope {
namespace {

// The decoder reads most codes from one 8-byte load and the rest bit by bit
// (64-bit fields, the stream's last bytes): every pair of a time code class
// and a value code class, at every bit alignment, decodes alike whole, from
// checkpoints into a caller's buffer in small batches, and truncated.
TEST(ChunkTest, EveryCodeClassAtEveryAlignmentDecodes) {
  // Zig-zagged magnitudes just inside each class (t: 0, 8, 20, 32, 64 bits;
  // value: 0, 6, 14, 24, 40, 64 bits).
  const int64_t dods[] = {0, 100, -100, 500'000, -500'000, 2'000'000'000LL, INT64_MAX / 4};
  const uint64_t vds[] = {0, 20, 8'000, 8'000'000, 500'000'000'000ULL, UINT64_MAX / 3};
  std::mt19937_64 rng(11);
  std::vector<Sample> in;
  // Times wrap as the codec's arithmetic does (two's complement, no signed
  // overflow: the large steps pass INT64_MAX).
  auto add = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  };
  int64_t t = 1'000;
  int64_t step = 10;
  uint64_t v = 5;
  for (int round = 0; round < 40; ++round) {
    for (int64_t dod : dods) {
      for (uint64_t vd : vds) {
        step = add(step, dod);
        t = add(t, step);
        v += vd;
        in.push_back({t, v});
        // A run now and then, of a length of each run code class.
        if (rng() % 5 == 0) {
          const int len = static_cast<int>(rng() % 3 == 0 ? 1 + rng() % 300 : 1 + rng() % 17);
          for (int k = 0; k < len; ++k) {
            t = add(t, step);
            in.push_back({t, v});
          }
        }
      }
    }
    // The runs' random lengths vary the bit alignment of the codes.
    step = add(step, 1);
  }
  ExpectRoundTrip(in);
  const EncodedChunk c = EncodeChunk(in);
  ChunkCheckpoint cp;
  std::vector<Sample> batch(16);
  std::vector<Sample> got;
  while (cp.index < c.header.count) {
    const uint32_t n = 1 + static_cast<uint32_t>(rng() % 16);
    bool ok = false;
    const uint32_t w = DecodeChunkInto(c.header, c.data.data(), &cp, n, batch.data(), &ok);
    ASSERT_TRUE(ok);
    ASSERT_EQ(w, std::min<uint32_t>(n, c.header.count - (cp.index - w)));
    got.insert(got.end(), batch.begin(), batch.begin() + w);
  }
  ASSERT_EQ(got, in);
  // A stream cut short is corrupt: fewer samples, never a wrong one, and no
  // read past the bytes the shortened header names.
  for (uint32_t cut = 1; cut < 400 && cut < c.header.bits; cut += 7) {
    ChunkHeader h = c.header;
    h.bits -= cut;
    std::vector<uint8_t> bytes(c.data.begin(), c.data.begin() + ChunkWriter::ByteSize(h));
    std::vector<Sample> out;
    DecodeChunk(h, bytes.data(), &out);
    ASSERT_LT(out.size(), in.size());
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], in[i]) << "cut " << cut;
  }
}

}  // namespace
}  // namespace fabricscope
