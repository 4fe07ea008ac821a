// The world both query tests stand on: the QueryEngine tested directly
// (query_engine_test.cc) and the gRPC QueryService over it
// (tests/unit/daemon/service/query_service_test.cc).
//
// Ports mlx5_0/1 on eth0 (paused on priority 3 during [10 s, 10.2 s]) and
// mlx5_1/1 on eth1 (quiet), polled every 100 ms over [0, 30 s]; spans over
// the burst and after it. The clock stands at 60 s.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/clock.h"
#include "core/signals.h"
#include "daemon/correlate/correlator.h"
#include "daemon/detect/detectors.h"
#include "daemon/detect/event_log.h"
#include "daemon/query/query_engine.h"
#include "daemon/spans/span_store.h"
#include "gtest/gtest.h"
#include "store/port_inventory.h"
#include "store/store.h"

namespace fabricscope {
namespace query_test {

inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kSec = 1'000'000'000;
inline constexpr int64_t kT = 1'700'000'000 * kSec;

inline Span MakeSpan(uint8_t trace, uint8_t id, const std::string& name, int64_t t0, int64_t t1) {
  Span s;
  s.trace_id[15] = trace;
  s.span_id[7] = id;
  s.name = name;
  s.start_unix_nano = t0;
  s.end_unix_nano = t1;
  return s;
}

// `n` zero bytes but the last, which is `last` (a trace or span id).
inline std::string Bytes(size_t n, uint8_t last) {
  std::string s(n, '\0');
  s.back() = static_cast<char>(last);
  return s;
}

class QueryWorld : public ::testing::Test {
 protected:
  QueryWorld()
      : clock_(kT + 60 * kSec),
        events_(100, nullptr),
        detectors_({}, &ports_, &events_, nullptr),
        spans_({}, &clock_, nullptr),
        correlator_(&store_, &ports_, {}, StallPolicy({{"decode_step", absl::Milliseconds(100)}})),
        engine_(&spans_, &correlator_, &store_, &ports_, &events_, &clock_) {
    store_.SetObserver(&detectors_);
    ports_.Upsert({"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "100 Gb/sec", true});
    ports_.Upsert({"mlx5_1", 1, "eth1", "Ethernet", "ACTIVE", "100 Gb/sec", true});
    for (const char* netdev : {"eth0", "eth1"}) {
      SeriesKey k{"ethtool", "rx_prio3_pause_duration", "", 0, netdev};
      SeriesId id = store_.Register(k, *MapCounter(k));
      const bool burst = std::string(netdev) == "eth0";
      for (int64_t ts = kT; ts <= kT + 30 * kSec; ts += 100 * kMs) {
        const int64_t from = kT + 10 * kSec, to = from + 200 * kMs;
        store_.Append(id, ts,
                      burst ? static_cast<uint64_t>((std::clamp(ts, from, to) - from) / 1000) : 0);
      }
    }
    spans_.Add(MakeSpan(1, 1, "decode_step", kT + 10 * kSec, kT + 10200 * kMs));
    spans_.Add(MakeSpan(1, 2, "decode_step", kT + 20 * kSec, kT + 20050 * kMs));
    spans_.Add(MakeSpan(2, 3, "kv_transfer", kT + 10 * kSec, kT + 10300 * kMs));
  }

  FakeClock clock_;
  Store store_;
  PortInventory ports_;
  EventLog events_;
  DetectorEngine detectors_;
  SpanStore spans_;
  Correlator correlator_;
  QueryEngine engine_;
};

}  // namespace query_test
}  // namespace fabricscope
