// The sample store: every sample of every series, plus the latest derived state
// of each series that the exporters render.
//
// Contract (DESIGN.md section 4, STYLE.md "the contract"):
//  - Collectors declare a series once (Register) and then append raw samples
//    (Append) with the tick's realtime timestamp.
//  - Each series has exactly one writer: the scheduler thread of the tier that
//    polls it. Different series are appended concurrently from different tier
//    threads.
//  - Readers (scrapes, queries) take snapshots; they never block a writer for
//    longer than copying one series' latest state.
//  - Memory is bounded by StoreOptions::memory_bytes; when full, the oldest
//    samples go first and are counted as evicted.
//
// Derived state computed at append time (counter semantics from
// counter_semantics.h, scaled to the family unit): the monotonic exported
// total, the last per-interval rate, resets and saturation.
//
// Thread-safety: all methods are thread-safe, subject to the one-writer-per-
// series rule for Append.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectors/signals.h"
#include "daemon/store/counter_semantics.h"
#include "daemon/store/series.h"

namespace fabricscope {

struct StoreOptions {
  uint64_t memory_bytes = 256ull << 20;
  absl::Duration peak_window = absl::Seconds(15);
  double burst_factor = 8.0;
};

// The latest derived view of one series, as exporters see it.
struct SeriesState {
  bool has_value = false;
  bool present = true;  // false while the device/file is gone (hot-unplug)
  int64_t last_ts_ns = 0;
  uint64_t last_raw = 0;
  // The exported value in the family's unit: for counters the first reading
  // plus every valid delta since (monotonic: resets and wraps never make it go
  // backwards); for gauges the current value. Both scaled by Signal::scale.
  double total = 0;
  uint64_t resets = 0;
  bool saturated = false;
  // Rate over the last poll interval, family unit per second; valid only when
  // rate_valid (not on the first sample, a reset, or while saturated).
  double last_rate = 0;
  bool rate_valid = false;
  uint64_t samples = 0;  // appended since registration
};

struct SeriesSnapshot {
  SeriesId id = kInvalidSeries;
  const SeriesKey* key = nullptr;  // owned by the store, valid for its lifetime
  const Signal* signal = nullptr;  // ditto
  SeriesState state;
};

// An RDMA port as discovered by a collector (inventory, fabricscope_port_info).
struct PortInfo {
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  std::string link_layer;  // "Ethernet" or "InfiniBand"
  std::string state;       // "ACTIVE", "DOWN", ...
  std::string rate;        // "100 Gb/sec (4X EDR)"
  bool present = true;
};

struct StoreStats {
  uint64_t bytes = 0;            // memory held by samples and series
  uint64_t samples = 0;          // samples held now
  int64_t oldest_ts_ns = 0;      // oldest sample still held (0 if none)
  uint64_t evicted_samples = 0;  // dropped to stay within the budget
  uint64_t series = 0;
};

class Store {
 public:
  explicit Store(StoreOptions options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Declares a series; returns the existing id if `key` is already registered
  // (a re-discovered device gets its old series back).
  SeriesId Register(const SeriesKey& key, const Signal& signal);
  std::optional<SeriesId> Find(const SeriesKey& key) const;

  // Appends one raw reading. Only the series' writer calls this.
  void Append(SeriesId id, int64_t ts_ns, uint64_t raw);

  // Marks a series present or absent (its device vanished / came back).
  // Absent series are not exported; their samples stay queryable.
  void SetPresent(SeriesId id, bool present);

  // Readers.
  std::vector<SeriesSnapshot> Snapshot() const;
  std::optional<SeriesSnapshot> Get(SeriesId id) const;
  // Samples of `id` with from_ns <= ts_ns <= to_ns, oldest first.
  std::vector<Sample> ReadRange(SeriesId id, int64_t from_ns, int64_t to_ns) const;
  StoreStats Stats() const;

  // Port inventory.
  void UpsertPort(const PortInfo& port);
  std::vector<PortInfo> Ports() const;

  const StoreOptions& options() const { return options_; }

 private:
  struct Series;
  Series* Lookup(SeriesId id) const;

  const StoreOptions options_;
  mutable absl::Mutex table_mu_;
  std::vector<std::unique_ptr<Series>> series_ ABSL_GUARDED_BY(table_mu_);
  absl::flat_hash_map<SeriesKey, SeriesId> by_key_ ABSL_GUARDED_BY(table_mu_);
  size_t per_series_capacity_ ABSL_GUARDED_BY(table_mu_);
  std::atomic<uint64_t> evicted_{0};

  mutable absl::Mutex ports_mu_;
  std::vector<PortInfo> ports_ ABSL_GUARDED_BY(ports_mu_);
};

}  // namespace fabricscope
