// Readers never block the writer: a reader holding a snapshot (chunks it read)
// while the writer keeps appending, sealing and evicting. Run under TSan.
#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "store/store.h"

namespace fabricscope {
namespace store_concurrency_test {
namespace {

constexpr int64_t kMs = 1'000'000;

Signal Ecn() { return *MapCounter({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""}); }

TEST(StoreConcurrencyTest, WriterCompletesWhileReaderHoldsSnapshot) {
  StoreOptions o;
  o.memory_bytes = 128 << 10;  // small: the writer must evict while the reader holds chunks
  Store store(o);
  SeriesId id =
      store.Register({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_0", 1, ""}, Ecn());
  for (int i = 0; i < 20000; ++i) store.Append(id, (i + 1) * 10 * kMs, i * 3);
  // The reader takes its snapshots and then holds them (no lock is held).
  std::vector<Sample> held = store.ReadRange(id, 0, INT64_MAX);
  std::vector<SeriesSnapshot> snap = store.Snapshot();
  ASSERT_FALSE(held.empty());
  const Sample first_held = held.front();

  std::atomic<bool> release{false};
  std::atomic<int> writer_done{0};
  std::thread reader([&] {
    // Keeps reading (range reads decode without locks) until released.
    while (!release.load()) {
      auto r = store.ReadRange(id, 0, INT64_MAX);
      ASSERT_FALSE(r.empty());
      for (size_t i = 1; i < r.size(); ++i) ASSERT_LT(r[i - 1].ts_ns, r[i].ts_ns);
      auto d = store.Delta(id, r.front().ts_ns, r.back().ts_ns);
      ASSERT_TRUE(d.ok());
      // Eviction may have removed the front between the two reads.
      if (d->covers_from) {
        ASSERT_EQ(d->raw_delta, r.back().value - r.front().value);
      } else {
        ASSERT_LE(d->raw_delta, r.back().value - r.front().value);
      }
      (void)store.Stats();
      std::this_thread::yield();
    }
  });
  std::thread writer([&] {
    for (int i = 20000; i < 120000; ++i) store.Append(id, (i + 1) * 10 * kMs, i * 3);
    writer_done = 1;
  });
  writer.join();  // completes while the reader still holds its snapshot
  EXPECT_EQ(writer_done.load(), 1);
  release = true;
  reader.join();
  // The held snapshot is intact although its chunks were evicted meanwhile.
  EXPECT_EQ(held.front(), first_held);
  EXPECT_EQ(snap[0].state.samples, 20000u);
  StoreStats st = store.Stats();
  EXPECT_GT(st.evicted_samples, 0u);
  EXPECT_LE(st.bytes, o.memory_bytes);
  EXPECT_EQ(store.Get(id)->state.samples, 120000u);
  EXPECT_GT(store.ReadRange(id, 0, INT64_MAX).front().ts_ns, first_held.ts_ns);
}

TEST(StoreConcurrencyTest, ManyWritersAndReadersUnderEviction) {
  StoreOptions o;
  o.memory_bytes = 512 << 10;
  Store store(o);
  const Signal sig = Ecn();
  constexpr int kWriters = 3;
  constexpr int kSeriesPerWriter = 20;
  std::vector<std::vector<SeriesId>> ids(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    for (int s = 0; s < kSeriesPerWriter; ++s) {
      ids[w].push_back(
          store.Register({"hw_counters", "np_ecn_marked_roce_packets", "mlx5_" + std::to_string(w),
                          static_cast<uint32_t>(s + 1), ""},
                         sig));
    }
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int t = 0; t < 4000; ++t) {
        for (SeriesId id : ids[w]) store.Append(id, (t + 1) * 10 * kMs, uint64_t(t) * (id + 1));
      }
    });
  }
  std::thread reader([&] {
    while (!stop.load()) {
      for (const SeriesSnapshot& s : store.Snapshot()) {
        auto r = store.ReadRange(s.id, 0, INT64_MAX);
        for (const Sample& x : r)
          ASSERT_EQ(x.value, uint64_t(x.ts_ns / (10 * kMs) - 1) * (s.id + 1));
      }
      ASSERT_LE(store.Stats().bytes, o.memory_bytes);
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  reader.join();
  StoreStats st = store.Stats();
  EXPECT_EQ(st.samples + st.evicted_samples, uint64_t{kWriters} * kSeriesPerWriter * 4000);
  EXPECT_LE(st.bytes, o.memory_bytes);
}

// Tier threads each record ticks in their own time column and append with
// them while a reader decodes the open time blocks and eviction drops
// chunks and blocks.
TEST(StoreConcurrencyTest, TickColumnsWithConcurrentReaders) {
  StoreOptions o;
  o.memory_bytes = 192 << 10;
  Store store(o);
  constexpr int kTiers = 2;
  constexpr int kSeriesPerTier = 6;
  std::vector<std::vector<SeriesId>> ids(kTiers);
  std::vector<TickColumn*> cols;
  for (int w = 0; w < kTiers; ++w) {
    cols.push_back(store.AddTickColumn(absl::Milliseconds(10)));
    for (int i = 0; i < kSeriesPerTier; ++i) {
      ids[w].push_back(store.Register({"hw_counters", "np_ecn_marked_roce_packets",
                                       "mlx5_" + std::to_string(w), uint32_t(i + 1), ""},
                                      Ecn()));
    }
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kTiers; ++w) {
    threads.emplace_back([&, w] {
      for (int t = 0; t < 12000; ++t) {
        const TickRef tick = store.Tick(cols[w], (t + 1) * 10 * kMs + (t % 3) * 1000);
        for (SeriesId id : ids[w]) store.Append(id, tick, uint64_t(t) * (id + 1));
      }
    });
  }
  std::thread reader([&] {
    while (!stop.load()) {
      for (const SeriesSnapshot& s : store.Snapshot()) {
        auto r = store.ReadRange(s.id, 0, INT64_MAX);
        for (const Sample& x : r) {
          const int64_t t = x.ts_ns / (10 * kMs) - 1;
          ASSERT_EQ(x.ts_ns, (t + 1) * 10 * kMs + (t % 3) * 1000);
          ASSERT_EQ(x.value, uint64_t(t) * (s.id + 1));
        }
      }
      ASSERT_LE(store.Stats().bytes, o.memory_bytes);
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  reader.join();
  StoreStats st = store.Stats();
  EXPECT_EQ(st.samples + st.evicted_samples, uint64_t{kTiers} * kSeriesPerTier * 12000);
  EXPECT_GT(st.evicted_samples, 0u);
  EXPECT_LE(st.bytes, o.memory_bytes);
}

}  // namespace
}  // namespace store_concurrency_test
}  // namespace fabricscope
