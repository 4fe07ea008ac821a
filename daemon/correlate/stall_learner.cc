#include "daemon/correlate/stall_learner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/spans/genai.h"
#include "daemon/spans/span_kind.h"

namespace fabricscope {
namespace {

const MetricSpec& kBound = DefineMetric(
    {.name = "fabricscope_stall_bound_seconds",
     .type = MetricType::kGauge,
     .help = "The bound a span's cost is held against to be a stall: learned per key "
             "(source=learned; cost duration, time_per_output_token or time_per_byte, in "
             "seconds and seconds per token or byte) once the key is past --stall-warmup, or "
             "configured per span name by --stall-thresholds (source=configured, key=the name).",
     .labels = {"kind", "key", "cost", "source"},
     .component = "correlate"});
const MetricSpec& kBoundSamples =
    DefineMetric({.name = "fabricscope_stall_bound_samples",
                  .type = MetricType::kGauge,
                  .help = "Samples in the sliding window behind a key's learned stall bound.",
                  .labels = {"kind", "key"},
                  .component = "correlate"});
const MetricSpec& kUnkeyed = DefineMetric(
    {.name = "fabricscope_stall_learning_unkeyed_total",
     .type = MetricType::kCounter,
     .help = "Spans not learned from because --stall-max-keys keys were already learned (they "
             "are judged by fabricscope.stall and --stall-thresholds only).",
     .labels = {},
     .component = "correlate"});

constexpr size_t kMaxKeyPart = 64;
constexpr uint64_t kStallLearnEvery = 8;
constexpr double kSpreadQuantile = 0.75;  // bytes of a service, model or communicator in a key

std::string KeyPart(absl::string_view v) {
  if (v.empty()) return "-";
  std::string s(v.substr(0, kMaxKeyPart));
  for (char& c : s) {
    if (c == ' ' || static_cast<unsigned char>(c) < 0x20) c = '_';
  }
  return s;
}

absl::string_view Attribute(const Span& span, absl::string_view key) {
  for (const auto& [k, v] : span.attributes) {
    if (k == key) return v;
  }
  return {};
}

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

template <typename T>
bool Get(absl::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

}  // namespace

absl::string_view StallCostName(StallCost cost) {
  switch (cost) {
    case StallCost::kDuration:
      return "duration";
    case StallCost::kTimePerOutputToken:
      return "time_per_output_token";
    case StallCost::kTimePerByte:
      return "time_per_byte";
    case StallCost::kTimePerPromptToken:
      return "time_per_prompt_token";
  }
  return "duration";
}

std::optional<StallCost> ParseStallCostName(absl::string_view name) {
  for (StallCost c : {StallCost::kDuration, StallCost::kTimePerOutputToken, StallCost::kTimePerByte,
                      StallCost::kTimePerPromptToken}) {
    if (name == StallCostName(c)) return c;
  }
  return std::nullopt;
}

std::optional<StallSource> ParseStallSourceName(absl::string_view name) {
  for (StallSource s :
       {StallSource::kNone, StallSource::kFlag, StallSource::kConfigured, StallSource::kLearned}) {
    if (name == StallSourceName(s)) return s;
  }
  return std::nullopt;
}

absl::string_view StallSourceName(StallSource source) {
  switch (source) {
    case StallSource::kNone:
      return "none";
    case StallSource::kFlag:
      return "flag";
    case StallSource::kConfigured:
      return "configured";
    case StallSource::kLearned:
      return "learned";
  }
  return "none";
}

// ---------------------------------------------------------------------------
// QuantileSketch.

void QuantileSketch::AddTo(Epoch* e, int32_t index) {
  ++e->n;
  auto it = std::lower_bound(e->buckets.begin(), e->buckets.end(), index,
                             [](const auto& b, int32_t i) { return b.first < i; });
  if (it != e->buckets.end() && it->first == index) {
    ++it->second;
    return;
  }
  e->buckets.insert(it, {index, 1});
  if (e->buckets.size() > kMaxBuckets) {  // merge the lowest two
    e->buckets[1].second += e->buckets[0].second;
    e->buckets.erase(e->buckets.begin());
  }
}

void QuantileSketch::Add(double value) {
  static const double kLogGamma = std::log(kGamma);
  int32_t index = std::numeric_limits<int16_t>::min();
  if (value > 0 && std::isfinite(value)) {
    index = static_cast<int32_t>(std::ceil(std::log(value) / kLogGamma));
    index = std::clamp<int32_t>(index, std::numeric_limits<int16_t>::min(),
                                std::numeric_limits<int16_t>::max());
  }
  if (current_.n >= epoch_samples_) {
    previous_ = std::move(current_);
    current_ = Epoch{};
  }
  AddTo(&current_, index);
}

void QuantileSketch::Quantiles(const double* qs, size_t n, double* out) const {
  const uint64_t total = count();
  if (total == 0) {
    std::fill(out, out + n, 0.0);
    return;
  }
  // Walk both epochs' buckets in index order.
  size_t a = 0, b = 0, qi = 0;
  uint64_t seen = 0;
  const auto& x = current_.buckets;
  const auto& y = previous_.buckets;
  while (qi < n && (a < x.size() || b < y.size())) {
    int32_t index;
    uint64_t c = 0;
    if (b >= y.size() || (a < x.size() && x[a].first <= y[b].first)) {
      index = x[a].first;
      c += x[a++].second;
      if (b < y.size() && y[b].first == index) c += y[b++].second;
    } else {
      index = y[b].first;
      c += y[b++].second;
    }
    seen += c;
    // Bucket (gamma^(i-1), gamma^i]: its midpoint in relative terms.
    const double value = 2.0 * std::pow(kGamma, index) / (1.0 + kGamma);
    while (qi < n && static_cast<double>(seen) >= qs[qi] * static_cast<double>(total - 1) + 1) {
      out[qi++] = value;
    }
  }
  for (; qi < n; ++qi) out[qi] = out[qi > 0 ? qi - 1 : 0];
}

void QuantileSketch::Encode(std::string* out) const {
  PutU64(out, epoch_samples_);
  for (const Epoch* e : {&current_, &previous_}) {
    PutU64(out, e->n);
    PutU32(out, static_cast<uint32_t>(e->buckets.size()));
    for (const auto& [i, c] : e->buckets) {
      PutU32(out, static_cast<uint32_t>(i));
      PutU32(out, c);
    }
  }
}

bool QuantileSketch::Decode(absl::string_view* in) {
  uint64_t epoch = 0;
  // The epoch size in force is the running daemon's (--stall-window).
  if (!Get(in, &epoch) || epoch == 0) return false;
  for (Epoch* e : {&current_, &previous_}) {
    uint32_t n = 0;
    if (!Get(in, &e->n) || !Get(in, &n) || n > kMaxBuckets) return false;
    e->buckets.clear();
    uint64_t sum = 0;
    int64_t last = std::numeric_limits<int64_t>::min();
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t i = 0, c = 0;
      if (!Get(in, &i) || !Get(in, &c)) return false;
      const int32_t index = static_cast<int32_t>(i);
      if (index <= last || c == 0) return false;  // sorted, no empty bucket
      last = index;
      sum += c;
      e->buckets.emplace_back(index, c);
    }
    if (sum != e->n) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// StallLearner.

struct StallLearner::KeyState {
  KeyState(SpanKind k, StallCost c, uint64_t window) : kind(k), cost(c), sketch(window) {}
  SpanKind kind;
  StallCost cost;
  QuantileSketch sketch;
  uint64_t stalls_seen = 0;  // learned stalls judged
  prometheus::Gauge* bound_gauge = nullptr;
  prometheus::Gauge* samples_gauge = nullptr;
};

StallLearner::StallLearner(StallLearnerOptions options, MetricsRegistry* metrics)
    : options_(std::move(options)), metrics_(metrics) {
  for (const auto& [name, d] : options_.thresholds) {
    threshold_ns_[name] = absl::ToInt64Nanoseconds(d);
  }
  if (metrics_ == nullptr) return;
  auto& bounds = metrics_->Gauge(kBound);
  metrics_->Gauge(kBoundSamples);
  unkeyed_ = &metrics_->Counter(kUnkeyed).Add({});
  for (const auto& [name, d] : options_.thresholds) {
    bounds
        .Add({{"kind", "any"},
              {"key", name},
              {"cost", std::string(StallCostName(StallCost::kDuration))},
              {"source", "configured"}})
        .Set(absl::ToDoubleSeconds(d));
  }
}

StallLearner::~StallLearner() = default;

double StallLearner::Bound(double p50, double p75, double median_factor, double spread_factor) {
  return std::max(median_factor * p50, p50 * std::pow(std::max(1.0, p75 / p50), spread_factor));
}

std::string StallLearner::SizeBucket(uint64_t bytes) {
  uint64_t b = 1;
  while (b < bytes && b < (1ull << 62)) b <<= 1;
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return absl::StrCat(b >> 30, "GiB");
  if (b >= (1ull << 20)) return absl::StrCat(b >> 20, "MiB");
  if (b >= (1ull << 10)) return absl::StrCat(b >> 10, "KiB");
  return absl::StrCat(b, "B");
}

bool StallLearner::KeyOf(const Span& span, std::string* key, StallCost* cost, double* value) {
  const absl::string_view service = Attribute(span, "service.name");
  if (span.phase == "decode" || span.phase == "prefill") {
    if (auto g = ReadGenAiRequest(span); g.has_value()) {
      const bool decode = span.phase == "decode";
      const double v = decode ? g->TimePerOutputTokenNs(span) : g->PrefillPerTokenNs(span);
      if (v >= 0) {
        *key = absl::StrCat(KeyPart(service), " ", KeyPart(g->model), " ", span.phase);
        *cost = decode ? StallCost::kTimePerOutputToken : StallCost::kTimePerPromptToken;
        *value = v;
        return true;
      }
    }
  }
  const double duration =
      static_cast<double>(std::max<int64_t>(0, span.end_unix_nano - span.start_unix_nano));
  if (span.kind == SpanKind::kCollective) {
    uint64_t bytes = 0;
    if (absl::SimpleAtoi(Attribute(span, "nccl.bytes"), &bytes) && bytes > 0) {
      *key = absl::StrCat(KeyPart(Attribute(span, "nccl.communicator")), " ", KeyPart(span.name),
                          " ", SizeBucket(bytes));
      *cost = StallCost::kTimePerByte;
      *value = duration / static_cast<double>(bytes);
      return true;
    }
  }
  switch (span.kind) {
    case SpanKind::kRequest:
    case SpanKind::kPrefill:
    case SpanKind::kDecodeStep:
    case SpanKind::kKvTransfer:
    case SpanKind::kCollective:
      *key = absl::StrCat(KeyPart(service), " ", SpanKindName(span.kind));
      *cost = StallCost::kDuration;
      *value = duration;
      return true;
    default:
      return false;
  }
}

StallLearner::KeyState* StallLearner::FindOrAdd(const std::string& key, SpanKind kind,
                                                StallCost cost) {
  auto it = keys_.find(key);
  if (it != keys_.end()) return it->second.get();
  if (keys_.size() >= options_.max_keys) return nullptr;
  auto state = std::make_unique<KeyState>(kind, cost, std::max<uint64_t>(1, options_.window));
  if (metrics_ != nullptr) {
    const std::string kind_name(SpanKindName(kind));
    state->bound_gauge = &metrics_->Gauge(kBound).Add({{"kind", kind_name},
                                                       {"key", key},
                                                       {"cost", std::string(StallCostName(cost))},
                                                       {"source", "learned"}});
    state->samples_gauge = &metrics_->Gauge(kBoundSamples).Add({{"kind", kind_name}, {"key", key}});
  }
  return keys_.emplace(key, std::move(state)).first->second.get();
}

void StallLearner::Judge(Span* span) {
  StallJudgement& j = span->judgement;
  j = StallJudgement{};
  j.judged = true;
  j.cost = static_cast<double>(std::max<int64_t>(0, span->end_unix_nano - span->start_unix_nano));
  if (span->stall_flag) {
    j.stall = true;
    j.source = StallSource::kFlag;
  }
  if (auto t = threshold_ns_.find(span->name); t != threshold_ns_.end()) {
    if (!span->stall_flag) {
      j.stall = j.cost >= static_cast<double>(t->second);
      j.source = StallSource::kConfigured;
    }
    j.bound = static_cast<double>(t->second);
  }
  if (!options_.enabled) return;
  std::string key;
  StallCost cost = StallCost::kDuration;
  double value = 0;
  if (!KeyOf(*span, &key, &cost, &value)) return;

  std::lock_guard<std::mutex> lock(mu_);
  KeyState* state = FindOrAdd(key, span->kind, cost);
  if (state == nullptr) {
    if (unkeyed_ != nullptr) unkeyed_->Increment();
    return;
  }
  const uint64_t n = state->sketch.count();
  double q[3] = {0, 0, 0};
  static constexpr double kQs[3] = {0.5, kSpreadQuantile, 0.99};
  if (n > 0) state->sketch.Quantiles(kQs, 3, q);
  const bool learned = n >= options_.warmup && q[0] > 0;
  const double bound =
      learned ? Bound(q[0], q[1], options_.median_factor, options_.spread_factor) : 0;
  j.key = key;
  j.samples = n;
  j.median = q[0];
  j.p99 = q[2];
  if (j.source == StallSource::kNone) {
    // Neither flag nor threshold: the learned bound decides.
    j.cost_kind = cost;
    j.cost = value;
    j.bound = bound;
    if (learned) {
      j.source = StallSource::kLearned;
      j.stall = value >= bound;
    }
  } else if (j.source == StallSource::kFlag) {
    j.cost_kind = cost;
    j.cost = value;
    j.bound = bound;
  } else {
    // Configured: the figures are the learned ones of the key, the bound and
    // cost the configured duration's; say so only when the units agree.
    if (cost != StallCost::kDuration) j.median = j.p99 = 0;
  }
  // A learned stall is learned from at 1 in kStallLearnEvery: an episode's
  // stalls do not become the key's normal (they would hide the rest of the
  // episode), while a workload that really got slower still becomes it.
  if (!(j.source == StallSource::kLearned && j.stall) ||
      ++state->stalls_seen % kStallLearnEvery == 0) {
    state->sketch.Add(value);
  }
  UpdateGauges(state);
}

void StallLearner::UpdateGauges(KeyState* state) const {
  if (state->samples_gauge == nullptr) return;
  const uint64_t n = state->sketch.count();
  state->samples_gauge->Set(static_cast<double>(n));
  if (n < options_.warmup) return;
  static constexpr double kQs[2] = {0.5, kSpreadQuantile};
  double q[2] = {0, 0};
  state->sketch.Quantiles(kQs, 2, q);
  state->bound_gauge->Set(Bound(q[0], q[1], options_.median_factor, options_.spread_factor) * 1e-9);
}

void StallLearner::PrepareSpans(StallLearner* learner, std::vector<Span>* spans) {
  const size_t n = spans->size();
  for (size_t i = 0; i < n; ++i) {
    if ((*spans)[i].phase.empty()) continue;  // only GenAI requests derive
    if (std::optional<Span> kv = KvTransferSpanOf((*spans)[i]); kv.has_value()) {
      spans->push_back(std::move(*kv));
    }
  }
  if (learner == nullptr) return;
  for (Span& s : *spans) learner->Judge(&s);
}

std::vector<LearnedBound> StallLearner::Bounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LearnedBound> out;
  out.reserve(keys_.size());
  static constexpr double kQs[3] = {0.5, kSpreadQuantile, 0.99};
  for (const auto& [key, s] : keys_) {
    LearnedBound b;
    b.key = key;
    b.kind = s->kind;
    b.cost = s->cost;
    b.samples = s->sketch.count();
    double q[3] = {0, 0, 0};
    s->sketch.Quantiles(kQs, 3, q);
    b.p50 = q[0];
    b.p75 = q[1];
    b.p99 = q[2];
    if (b.samples >= options_.warmup && b.p50 > 0) {
      b.bound = Bound(b.p50, b.p75, options_.median_factor, options_.spread_factor);
    }
    out.push_back(std::move(b));
  }
  std::sort(out.begin(), out.end(),
            [](const LearnedBound& a, const LearnedBound& b) { return a.key < b.key; });
  return out;
}

size_t StallLearner::keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_.size();
}

// Dump: u32 key count, then per key: u32 key length, key bytes, u8 kind,
// u8 cost, the sketch (QuantileSketch::Encode).
std::string StallLearner::Dump() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  PutU32(&out, static_cast<uint32_t>(keys_.size()));
  for (const auto& [key, s] : keys_) {
    PutU32(&out, static_cast<uint32_t>(key.size()));
    out += key;
    out.push_back(static_cast<char>(s->kind));
    out.push_back(static_cast<char>(s->cost));
    s->sketch.Encode(&out);
  }
  return out;
}

absl::Status StallLearner::Restore(absl::string_view dump) {
  struct Entry {
    std::string key;
    SpanKind kind;
    StallCost cost;
    QuantileSketch sketch;
  };
  std::vector<Entry> entries;
  uint32_t n = 0;
  if (!Get(&dump, &n)) return absl::DataLossError("stall learner dump: no key count");
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len = 0;
    if (!Get(&dump, &len) || len > dump.size() || len > 4 * kMaxKeyPart) {
      return absl::DataLossError(absl::StrCat("stall learner dump: key ", i, " cut short"));
    }
    std::string key(dump.substr(0, len));
    dump.remove_prefix(len);
    uint8_t kind = 0, cost = 0;
    if (!Get(&dump, &kind) || !Get(&dump, &cost) || kind > static_cast<uint8_t>(SpanKind::kOther) ||
        cost > static_cast<uint8_t>(StallCost::kTimePerPromptToken)) {
      return absl::DataLossError(absl::StrCat("stall learner dump: key ", i, " is malformed"));
    }
    QuantileSketch sketch(std::max<uint64_t>(1, options_.window));
    if (!sketch.Decode(&dump)) {
      return absl::DataLossError(
          absl::StrCat("stall learner dump: sketch of ", key, " is malformed"));
    }
    entries.push_back(
        {std::move(key), static_cast<SpanKind>(kind), static_cast<StallCost>(cost), sketch});
  }
  if (!dump.empty()) return absl::DataLossError("stall learner dump: trailing bytes");
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries) {
    KeyState* state = FindOrAdd(e.key, e.kind, e.cost);
    if (state == nullptr) break;  // max_keys
    state->sketch = std::move(e.sketch);
    UpdateGauges(state);
  }
  return absl::OkStatus();
}

}  // namespace fabricscope
