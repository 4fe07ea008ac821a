// Series identity and counter semantics: the vocabulary shared by collectors,
// the store, the exporters and the query side.
//
// A series is one raw counter at one place: (source, name, device, port,
// netdev). The raw name is kept exactly as the source spells it (recording
// files and `fabricscope series` show it); the canonical meaning (metric
// family, unit, labels) comes from the signal table (core/signals.h).
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "absl/hash/hash.h"

namespace fabricscope {

using SeriesId = uint32_t;
inline constexpr SeriesId kInvalidSeries = UINT32_MAX;

// How the raw values of a series behave (see ../shared/reference/counters.md).
enum class CounterKind : uint8_t {
  kGauge,       // a level, not a counter (port state, PFC enabled): no delta semantics
  kCounter64,   // 64-bit monotonic; any decrease is a reset (driver reload)
  kWrap32,      // 32-bit counter that wraps to 0 (mlx5 Q-counters, rx_out_of_buffer)
  kSaturating,  // IB PMA counter that sticks at 2^width-1 until cleared
};

struct CounterSemantics {
  CounterKind kind = CounterKind::kCounter64;
  uint8_t width = 64;  // bits; meaningful for kSaturating (4, 8, 16, 32) and kWrap32 (32)

  uint64_t MaxValue() const { return width >= 64 ? UINT64_MAX : (uint64_t{1} << width) - 1; }
  friend bool operator==(const CounterSemantics&, const CounterSemantics&) = default;
};

struct SeriesKey {
  std::string source;  // "hw_counters", "counters", "ethtool", "netdev", "dcb", ...
  std::string name;    // raw counter name, exactly as the source spells it
  std::string device;  // RDMA device, "" if none
  uint32_t port = 0;   // RDMA port number, 0 if none
  std::string netdev;  // network interface, "" if none

  friend bool operator==(const SeriesKey&, const SeriesKey&) = default;
  friend bool operator<(const SeriesKey& a, const SeriesKey& b) {
    return std::tie(a.source, a.device, a.port, a.netdev, a.name) <
           std::tie(b.source, b.device, b.port, b.netdev, b.name);
  }
  template <typename H>
  friend H AbslHashValue(H h, const SeriesKey& k) {
    return H::combine(std::move(h), k.source, k.name, k.device, k.port, k.netdev);
  }
};

// One raw reading of one series: a collector hands the readings of one tick
// to the store in one call (PollContext::AppendReadings, Store::Append with a
// span), which lets the store fetch the state of the series ahead of use.
struct SeriesReading {
  SeriesId id = kInvalidSeries;
  uint64_t raw = 0;
};

struct Sample {
  int64_t ts_ns = 0;   // unix time, nanoseconds
  uint64_t value = 0;  // raw value as read
  friend bool operator==(const Sample&, const Sample&) = default;
};

}  // namespace fabricscope
