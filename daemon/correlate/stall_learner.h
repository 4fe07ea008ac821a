// Stall detection without configuration: which spans are stalls, learned
// from the spans themselves (DESIGN.md section 11; issue #33).
//
// Every span is judged once, when it is ingested (or replayed), against what
// the learner has seen of its key before it, and then learned from:
//
//   key (bounded)                          cost
//   GenAI request, decode phase            time per output token (genai.h)
//     "<service> <model> decode"
//   GenAI request, prefill only            prefill time per prompt token
//     "<service> <model> prefill"
//   collective with nccl.bytes             time per byte (= 1 / algorithm bw),
//     "<communicator> <name> <size bucket>"  message sizes bucketed by powers
//                                           of two
//   request, prefill, decode_step,         duration
//   kv_transfer, collective otherwise
//     "<service> <kind>"
//   other                                  not learned (flag/threshold only)
//
// Per key, a QuantileSketch (log buckets 4 % wide: every quantile within 2 %
// of a value of the window) over a sliding window of the key's last
// `window`..2x`window` costs (two epochs; the older is dropped when the newer
// fills).
//
// The rule. After `warmup` samples of its key, a span is a stall when
//   cost >= bound = max(median_factor x p50, p50 x (p75 / p50)^spread_factor)
// (defaults 2 and 4): at least twice the key's median, and at least four
// upper-quartile spreads above it in log terms (latencies spread
// multiplicatively: for a lognormal with sigma s the second term is
// e^(2.7 s) x p50, its 99.65th percentile; for s = 0.6 it is 5 x p50). The
// figures are the median and p75, not the p99 or p90: a congestion episode
// makes many spans of a key slow at once (every request whose decode overlaps
// it, mildly), and a window that holds a few percent of slow spans moves its
// p99 into them and its p90 up, while its p50 and p75 stay put up to 25 %
// contamination; and a learned stall is learned from at 1 in 8 (below). The
// median factor keeps a tight key from calling a 30 % wobble a stall.
// bench/README.md ("Stall detection") has the precision and recall of this
// rule against injected slow requests, decode steps and collectives, and of
// the p99 and p90 rules it was chosen over.
//
// Precedence: fabricscope.stall=true (a stall, source flag), then a
// --stall-thresholds entry for the span's name (source configured: the
// configured duration decides, learned or not), then the learned bound.
// Every span with a key is learned from, except that a span the learned bound
// calls a stall is learned at 1 in 8: an episode's stalls do not become the
// key's normal (hiding the rest of the episode), while a workload that really
// got slower still becomes the new normal, a few windows later.
//
// Bounds: at most max_keys keys (a span whose key does not fit is judged by
// flag/threshold only and counted in fabricscope_stall_learning_unkeyed_total);
// a sketch holds at most QuantileSketch::kMaxBuckets buckets per epoch. About
// 2 KiB per key at most.
//
// Metrics: fabricscope_stall_bound_seconds{kind,key,cost,source} (the bound a
// span of the key is held against now: learned, or configured per span name),
// fabricscope_stall_bound_samples{kind,key} (samples behind a learned bound).
//
// Snapshot: Dump()/Restore() carry every key's sketches across a restart.
//
// Thread-safety: thread-safe (one mutex; Judge is O(buckets)).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/metrics.h"
#include "daemon/spans/span.h"

namespace fabricscope {

// A log-bucketed quantile sketch of positive values (DDSketch's idea:
// bucket i holds (gamma^(i-1), gamma^i], gamma = 1.04), in two epochs.
class QuantileSketch {
 public:
  static constexpr double kGamma = 1.04;
  static constexpr size_t kMaxBuckets = 256;  // per epoch; lowest merged past it

  explicit QuantileSketch(uint64_t epoch_samples) : epoch_samples_(epoch_samples) {}

  void Add(double value);  // values <= 0 are counted in the lowest bucket
  uint64_t count() const { return current_.n + previous_.n; }
  // Quantiles of the window for q in `qs` (ascending), into `out`.
  void Quantiles(const double* qs, size_t n, double* out) const;

  void Encode(std::string* out) const;
  bool Decode(absl::string_view* in);

 private:
  struct Epoch {
    std::vector<std::pair<int32_t, uint32_t>> buckets;  // sorted by index
    uint64_t n = 0;
  };
  static void AddTo(Epoch* e, int32_t index);

  uint64_t epoch_samples_;
  Epoch current_;
  Epoch previous_;
};

struct StallLearnerOptions {
  bool enabled = true;         // --stall-learning
  uint64_t warmup = 200;       // --stall-warmup: samples of a key before its bound applies
  uint64_t window = 1000;      // --stall-window: samples per epoch (window: 1-2x)
  double median_factor = 2.0;  // --stall-median-factor
  double spread_factor = 4.0;  // --stall-spread-factor
  size_t max_keys = 1024;      // --stall-max-keys
  // --stall-thresholds: span name -> duration (configured wins).
  std::vector<std::pair<std::string, absl::Duration>> thresholds;
};

// What the learner knows of one key (Bounds()).
struct LearnedBound {
  std::string key;
  SpanKind kind = SpanKind::kOther;
  StallCost cost = StallCost::kDuration;
  uint64_t samples = 0;
  double p50 = 0, p75 = 0, p99 = 0;
  double bound = 0;  // 0 while warming up
};

class StallLearner {
 public:
  // `metrics` may be null (no gauges, e.g. `fabricscope analyze`).
  StallLearner(StallLearnerOptions options, MetricsRegistry* metrics);
  ~StallLearner();

  // Sets span->judgement (and judged) and learns the span's cost.
  void Judge(Span* span);

  // What ingest and replay do with spans before they are stored: appends the
  // spans derived from them (a GenAI request's KV-cache transfer, genai.h)
  // and judges every span in order. `learner` may be null (derive only).
  static void PrepareSpans(StallLearner* learner, std::vector<Span>* spans);

  std::vector<LearnedBound> Bounds() const;
  size_t keys() const;

  // The sketches, for the state snapshot.
  std::string Dump() const;
  // Replaces what was learned with a Dump()'s; a malformed dump changes
  // nothing and says why.
  absl::Status Restore(absl::string_view dump);

  // The bound rule on learned figures (exposed for the benchmark).
  static double Bound(double p50, double p75, double median_factor, double spread_factor);

  // "1KiB", "4MiB": the power-of-two bucket of a message size (its ceiling).
  static std::string SizeBucket(uint64_t bytes);

 private:
  struct KeyState;
  // The key and cost of a span; false when the span is not learned.
  static bool KeyOf(const Span& span, std::string* key, StallCost* cost, double* value);
  KeyState* FindOrAdd(const std::string& key, SpanKind kind, StallCost cost);  // mu_ held
  void UpdateGauges(KeyState* state) const;                                    // mu_ held

  const StallLearnerOptions options_;
  MetricsRegistry* const metrics_;
  absl::flat_hash_map<std::string, int64_t> threshold_ns_;
  prometheus::Counter* unkeyed_ = nullptr;

  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<KeyState>> keys_;  // guarded by mu_
};

// duration, time_per_output_token, time_per_byte, time_per_prompt_token
absl::string_view StallCostName(StallCost cost);
absl::string_view StallSourceName(StallSource source);  // none, flag, configured, learned
// Their inverses (recordings carry the names); nullopt for another name.
std::optional<StallCost> ParseStallCostName(absl::string_view name);
std::optional<StallSource> ParseStallSourceName(absl::string_view name);

}  // namespace fabricscope
