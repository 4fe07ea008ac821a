// The stall learner (daemon/correlate/stall_learner.h): its sketch, the
// bound rule, precedence, bounds and the snapshot dump; and the GenAI request
// view it learns from (daemon/spans/genai.h).
#include "daemon/correlate/stall_learner.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/metrics.h"
#include "daemon/spans/genai.h"
#include "gtest/gtest.h"

namespace fabricscope {
namespace stall_learner_test {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;

Span Decode(int64_t start_ns, double ms, const std::string& service = "engine") {
  Span s;
  s.name = "decode_step";
  s.kind = SpanKind::kDecodeStep;
  s.start_unix_nano = start_ns;
  s.end_unix_nano = start_ns + static_cast<int64_t>(ms * kMs);
  s.attributes = {{"service.name", service}};
  return s;
}

// A vLLM llm_request span: arrival at `start`, queue, TTFT, then `tokens`
// output tokens at `tpot_ms` each.
Span VllmRequest(int64_t start, double queue_s, double ttft_s, int tokens, double tpot_ms) {
  Span s;
  s.name = "llm_request";
  s.kind = SpanKind::kOther;
  s.start_unix_nano = start;
  const double decode_s = (tokens - 1) * tpot_ms / 1000;
  s.end_unix_nano = start + static_cast<int64_t>((ttft_s + decode_s) * 1e9);
  s.attributes = {{"gen_ai.latency.time_in_queue", absl::StrCat(queue_s)},
                  {"gen_ai.latency.time_to_first_token", absl::StrCat(ttft_s)},
                  {"gen_ai.latency.e2e", absl::StrCat(ttft_s + decode_s)},
                  {"gen_ai.latency.time_in_model_prefill", absl::StrCat(ttft_s - queue_s)},
                  {"gen_ai.latency.time_in_model_decode", absl::StrCat(decode_s)},
                  {"gen_ai.usage.prompt_tokens", "512"},
                  {"gen_ai.usage.completion_tokens", absl::StrCat(tokens)},
                  {"gen_ai.response.model", "llama-3-70b"},
                  {"gen_ai.request.id", "cmpl-1"},
                  {"some.unknown.attribute", "ignored"},
                  {"service.name", "vllm"}};
  return s;
}

TEST(QuantileSketch, QuantilesWithinTwoPercentOfExact) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(std::log(30e6), 0.3);
  QuantileSketch sketch(100000);
  std::vector<double> values;
  for (int i = 0; i < 20000; ++i) {
    values.push_back(dist(rng));
    sketch.Add(values.back());
  }
  std::sort(values.begin(), values.end());
  const double qs[3] = {0.5, 0.9, 0.99};
  double got[3];
  sketch.Quantiles(qs, 3, got);
  for (int i = 0; i < 3; ++i) {
    const double exact = values[static_cast<size_t>(qs[i] * (values.size() - 1))];
    EXPECT_NEAR(got[i] / exact, 1.0, 0.021) << "q=" << qs[i];
  }
}

TEST(QuantileSketch, SlidingWindowForgetsTheOldEpoch) {
  QuantileSketch sketch(100);
  for (int i = 0; i < 200; ++i) sketch.Add(10.0);
  for (int i = 0; i < 200; ++i) sketch.Add(1000.0);
  const double q = 0.01;
  double low;
  sketch.Quantiles(&q, 1, &low);
  EXPECT_GT(low, 900.0);  // the 10s are gone: two epochs of 1000s
  EXPECT_LE(sketch.count(), 200u);
}

TEST(QuantileSketch, BucketsStayBounded) {
  QuantileSketch sketch(1u << 20);
  for (int i = 0; i < 5000; ++i) sketch.Add(std::pow(1.05, i % 2000));  // 2000 distinct buckets
  std::string out;
  sketch.Encode(&out);
  // 8 + 2 x (8 + 4) + at most kMaxBuckets x 8 per epoch.
  EXPECT_LE(out.size(), 8 + 2 * 12 + QuantileSketch::kMaxBuckets * 8);
  const double q = 0.99;
  double p99;
  sketch.Quantiles(&q, 1, &p99);
  EXPECT_GT(p99, std::pow(1.05, 1900));  // the upper tail is kept exactly
}

StallLearnerOptions Options() {
  StallLearnerOptions o;
  o.warmup = 100;
  o.window = 500;
  return o;
}

TEST(StallLearner, NothingIsALearnedStallDuringWarmup) {
  StallLearner learner(Options(), nullptr);
  for (int i = 0; i < 100; ++i) {
    Span s = Decode(kT0 + i * 100 * kMs, i == 50 ? 5000 : 30);
    learner.Judge(&s);
    EXPECT_TRUE(s.judgement.judged);
    EXPECT_FALSE(s.judgement.stall) << i;
    EXPECT_EQ(s.judgement.source, StallSource::kNone);
    EXPECT_EQ(s.judgement.samples, static_cast<uint64_t>(i));
  }
}

TEST(StallLearner, LearnedBoundSeparatesSlowSpans) {
  MetricsRegistry metrics;
  StallLearner learner(Options(), &metrics);
  std::mt19937_64 rng(1);
  std::normal_distribution<double> jitter(30, 2);
  for (int i = 0; i < 300; ++i) {
    Span s = Decode(kT0 + i * 100 * kMs, jitter(rng));
    learner.Judge(&s);
    EXPECT_FALSE(s.judgement.stall) << i << " cost " << s.judgement.cost;
  }
  Span slow = Decode(kT0 + 400 * 100 * kMs, 95);
  learner.Judge(&slow);
  EXPECT_TRUE(slow.judgement.stall);
  EXPECT_EQ(slow.judgement.source, StallSource::kLearned);
  EXPECT_EQ(slow.judgement.cost_kind, StallCost::kDuration);
  EXPECT_EQ(slow.judgement.key, "engine decode_step");
  EXPECT_EQ(slow.judgement.samples, 300u);
  EXPECT_NEAR(slow.judgement.median / kMs, 30, 1.5);
  // A tight key: the bound is twice the median, not p50 + 4 x spread.
  EXPECT_NEAR(slow.judgement.bound / kMs, 60, 3);
  Span wobble = Decode(kT0 + 401 * 100 * kMs, 40);  // +33 %: not a stall
  learner.Judge(&wobble);
  EXPECT_FALSE(wobble.judgement.stall);
  const std::vector<LearnedBound> bounds = learner.Bounds();
  ASSERT_EQ(bounds.size(), 1u);
  EXPECT_NEAR(bounds[0].bound / kMs, 60, 3);
}

// A congestion episode: 5 % of the window slow. The p99 sits among the slow
// spans, so a "> p99" rule would miss about half of them; the learned rule
// uses p50 and p75 and catches every one.
TEST(StallLearner, AnEpisodeDoesNotHideItsOwnStalls) {
  StallLearner learner(Options(), nullptr);
  std::mt19937_64 rng(2);
  std::normal_distribution<double> normal(30, 2);
  std::uniform_real_distribution<double> slow(80, 200);
  int stalls = 0, slow_spans = 0, false_stalls = 0;
  for (int i = 0; i < 2000; ++i) {
    const bool is_slow = i >= 200 && i % 20 == 0;
    Span s = Decode(kT0 + i * 100 * kMs, is_slow ? slow(rng) : normal(rng));
    learner.Judge(&s);
    if (is_slow) {
      ++slow_spans;
      stalls += s.judgement.stall;
    } else {
      false_stalls += s.judgement.stall;
    }
  }
  EXPECT_EQ(stalls, slow_spans);
  EXPECT_EQ(false_stalls, 0);
}

TEST(StallLearner, FlagAndConfiguredThresholdWin) {
  StallLearnerOptions o = Options();
  o.thresholds = {{"decode_step", absl::Milliseconds(500)}};
  StallLearner learner(o, nullptr);
  for (int i = 0; i < 200; ++i) {
    Span s = Decode(kT0 + i * 100 * kMs, 30);
    learner.Judge(&s);
  }
  Span slow = Decode(kT0, 120);  // a learned stall, but the configured 500ms says no
  learner.Judge(&slow);
  EXPECT_FALSE(slow.judgement.stall);
  EXPECT_EQ(slow.judgement.source, StallSource::kConfigured);
  EXPECT_EQ(slow.judgement.bound, 500.0 * kMs);
  Span over = Decode(kT0, 600);
  learner.Judge(&over);
  EXPECT_TRUE(over.judgement.stall);
  Span flagged = Decode(kT0, 1);
  flagged.stall_flag = true;
  learner.Judge(&flagged);
  EXPECT_TRUE(flagged.judgement.stall);
  EXPECT_EQ(flagged.judgement.source, StallSource::kFlag);
}

TEST(StallLearner, OtherSpansAreNotLearnedAndDisabledLearnsNothing) {
  StallLearner learner(Options(), nullptr);
  Span other = Decode(kT0, 30);
  other.kind = SpanKind::kOther;
  learner.Judge(&other);
  EXPECT_TRUE(other.judgement.judged);
  EXPECT_TRUE(other.judgement.key.empty());
  EXPECT_EQ(learner.keys(), 0u);
  StallLearnerOptions off = Options();
  off.enabled = false;
  StallLearner disabled(off, nullptr);
  Span s = Decode(kT0, 30);
  disabled.Judge(&s);
  EXPECT_EQ(disabled.keys(), 0u);
  EXPECT_FALSE(s.judgement.stall);
}

TEST(StallLearner, KeysAreBoundedAndCounted) {
  StallLearnerOptions o = Options();
  o.max_keys = 2;
  MetricsRegistry metrics;
  StallLearner learner(o, &metrics);
  for (const char* service : {"a", "b", "c", "d"}) {
    Span s = Decode(kT0, 30, service);
    learner.Judge(&s);
  }
  EXPECT_EQ(learner.keys(), 2u);
  bool found = false;
  for (const auto& f : metrics.registry()->Collect()) {
    if (f.name != "fabricscope_stall_learning_unkeyed_total") continue;
    ASSERT_EQ(f.metric.size(), 1u);
    EXPECT_EQ(f.metric[0].counter.value, 2);
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(StallLearner, DumpRestoresTheSameJudgements) {
  StallLearner a(Options(), nullptr);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(30, 3);
  for (int i = 0; i < 700; ++i) {
    Span s = Decode(kT0 + i * kMs, normal(rng), i % 2 ? "x" : "y");
    a.Judge(&s);
  }
  const std::string dump = a.Dump();
  StallLearner b(Options(), nullptr);
  ASSERT_TRUE(b.Restore(dump).ok());
  for (double ms : {20.0, 45.0, 70.0}) {
    Span sa = Decode(kT0, ms, "x"), sb = Decode(kT0, ms, "x");
    a.Judge(&sa);
    b.Judge(&sb);
    EXPECT_EQ(sa.judgement.stall, sb.judgement.stall) << ms;
    EXPECT_EQ(sa.judgement.bound, sb.judgement.bound) << ms;
    EXPECT_EQ(sa.judgement.samples, sb.judgement.samples) << ms;
  }
  // Every truncation, and a flipped count, is refused and changes nothing.
  for (size_t n = 0; n < dump.size(); n += 7) {
    StallLearner c(Options(), nullptr);
    EXPECT_FALSE(c.Restore(dump.substr(0, n)).ok()) << n;
    EXPECT_EQ(c.keys(), 0u);
  }
  std::string bad = dump;
  bad[bad.size() - 1] ^= 0x40;  // the last bucket's count: sum no longer matches
  StallLearner d(Options(), nullptr);
  EXPECT_FALSE(d.Restore(bad).ok());
}

TEST(GenAi, VllmRequestIsJudgedOverItsDecodeByTimePerOutputToken) {
  Span s = VllmRequest(kT0, 0.05, 0.25, 201, 20);
  ASSERT_TRUE(ApplyGenAiRequest(&s));
  EXPECT_EQ(s.kind, SpanKind::kRequest);
  EXPECT_EQ(s.phase, "decode");
  EXPECT_EQ(s.window_start_unix_nano, kT0 + 250 * kMs);
  EXPECT_EQ(s.window_end_unix_nano, s.end_unix_nano);
  const auto g = ReadGenAiRequest(s);
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->model, "llama-3-70b");
  EXPECT_NEAR(g->TimePerOutputTokenNs(s), 20.0 * kMs, 1e3);
  EXPECT_NEAR(g->PrefillPerTokenNs(s), 0.2e9 / 512, 1e3);

  // Learned by time per output token: a long request is not a stall, a slow
  // one is.
  StallLearner learner(Options(), nullptr);
  std::mt19937_64 rng(4);
  std::normal_distribution<double> tpot(20, 1);
  std::uniform_int_distribution<int> tokens(20, 800);
  for (int i = 0; i < 300; ++i) {
    Span r = VllmRequest(kT0 + i * kMs, 0.01, 0.2, tokens(rng), tpot(rng));
    ApplyGenAiRequest(&r);
    learner.Judge(&r);
    EXPECT_FALSE(r.judgement.stall);
  }
  Span longest = VllmRequest(kT0, 0.01, 0.2, 4000, 21);  // 84 s, normal pace
  ApplyGenAiRequest(&longest);
  learner.Judge(&longest);
  EXPECT_FALSE(longest.judgement.stall);
  EXPECT_EQ(longest.judgement.cost_kind, StallCost::kTimePerOutputToken);
  EXPECT_EQ(longest.judgement.key, "vllm llama-3-70b decode");
  Span slow = VllmRequest(kT0, 0.01, 0.2, 100, 70);  // 7 s, slow pace
  ApplyGenAiRequest(&slow);
  learner.Judge(&slow);
  EXPECT_TRUE(slow.judgement.stall);
  EXPECT_NEAR(slow.judgement.cost / kMs, 70, 0.1);
  // Queueing is not counted: a long queue with a normal decode is no stall.
  Span queued = VllmRequest(kT0, 30, 30.2, 100, 20);
  ApplyGenAiRequest(&queued);
  learner.Judge(&queued);
  EXPECT_FALSE(queued.judgement.stall);
}

TEST(GenAi, SingleTokenRequestIsJudgedOverItsPrefill) {
  Span s = VllmRequest(kT0, 0.1, 0.5, 1, 0);
  ASSERT_TRUE(ApplyGenAiRequest(&s));
  EXPECT_EQ(s.phase, "prefill");
  EXPECT_EQ(s.window_start_unix_nano, kT0 + 100 * kMs);
  EXPECT_EQ(s.window_end_unix_nano, kT0 + 500 * kMs);
}

TEST(GenAi, PlainSpansAndGarbageAreNotGenAi) {
  Span plain = Decode(kT0, 30);
  EXPECT_FALSE(ApplyGenAiRequest(&plain));
  EXPECT_TRUE(plain.phase.empty());
  Span bad = VllmRequest(kT0, 0.05, 0.25, 201, 20);
  for (auto& [k, v] : bad.attributes) {
    if (k == "gen_ai.latency.time_to_first_token" || k == "gen_ai.latency.time_in_queue") {
      v = "-1";
    }
  }
  EXPECT_FALSE(ApplyGenAiRequest(&bad));
  // Absurd latencies and counts (any number is a valid attribute) neither
  // overflow nor escape the span.
  for (const char* huge : {"1e300", "9.2e18", "1e308"}) {
    Span h = VllmRequest(kT0, 0.05, 0.25, 201, 20);
    for (auto& [k, v] : h.attributes) {
      if (absl::StartsWith(k, "gen_ai.latency.") || k == "gen_ai.usage.completion_tokens") v = huge;
    }
    h.attributes.emplace_back("gen_ai.latency.kv_cache_transfer_time", huge);
    ASSERT_TRUE(ApplyGenAiRequest(&h)) << huge;
    const auto w = JudgedWindow(h);
    EXPECT_GE(w.first, h.start_unix_nano);
    EXPECT_LE(w.second, h.end_unix_nano);
    auto kv = KvTransferSpanOf(h);
    ASSERT_TRUE(kv.has_value());
    EXPECT_GE(kv->start_unix_nano, h.start_unix_nano);
    StallLearner learner(Options(), nullptr);
    learner.Judge(&h);
    EXPECT_TRUE(h.judgement.judged);
  }
  // A TTFT past the span's end is clamped: the window stays inside the span.
  Span late = VllmRequest(kT0, 0.05, 0.25, 3, 20);
  for (auto& [k, v] : late.attributes) {
    if (k == "gen_ai.latency.time_to_first_token") v = "1e6";
  }
  ASSERT_TRUE(ApplyGenAiRequest(&late));
  const auto w = JudgedWindow(late);
  EXPECT_GE(w.first, late.start_unix_nano);
  EXPECT_LE(w.second, late.end_unix_nano);
}

TEST(GenAi, KvTransferBecomesASpanOfItsOwn) {
  Span s = VllmRequest(kT0, 0.05, 0.25, 201, 20);
  s.span_id = {1, 2, 3, 4, 5, 6, 7, 8};
  s.attributes.emplace_back("fabricscope.event.kv_cache_transfer_start",
                            absl::StrCat(kT0 + 60 * kMs));
  s.attributes.emplace_back("fabricscope.event.kv_cache_transfer_end",
                            absl::StrCat(kT0 + 140 * kMs));
  ApplyGenAiRequest(&s);
  std::vector<Span> batch = {s};
  StallLearner learner(Options(), nullptr);
  StallLearner::PrepareSpans(&learner, &batch);
  ASSERT_EQ(batch.size(), 2u);
  const Span& kv = batch[1];
  EXPECT_EQ(kv.kind, SpanKind::kKvTransfer);
  EXPECT_EQ(kv.start_unix_nano, kT0 + 60 * kMs);
  EXPECT_EQ(kv.end_unix_nano, kT0 + 140 * kMs);
  EXPECT_EQ(kv.parent_span_id, s.span_id);
  EXPECT_NE(kv.span_id, s.span_id);
  EXPECT_TRUE(kv.judgement.judged);
  EXPECT_EQ(kv.judgement.key, "vllm kv_transfer");

  // Without the events: placed from the transfer time, ending at the first
  // token, and marked estimated.
  Span t = VllmRequest(kT0, 0.05, 0.25, 201, 20);
  t.attributes.emplace_back("gen_ai.latency.kv_cache_transfer_time", "0.1");
  auto est = KvTransferSpanOf(t);
  ASSERT_TRUE(est.has_value());
  EXPECT_EQ(est->end_unix_nano, kT0 + 250 * kMs);
  EXPECT_EQ(est->start_unix_nano, kT0 + 150 * kMs);
  bool estimated = false;
  for (const auto& [k, v] : est->attributes) estimated |= k == "fabricscope.estimated";
  EXPECT_TRUE(estimated);
  EXPECT_FALSE(KvTransferSpanOf(Decode(kT0, 30)).has_value());
}

TEST(StallLearner, CollectivesAreLearnedPerSizeByTimePerByte) {
  StallLearner learner(Options(), nullptr);
  auto coll = [](uint64_t bytes, double ms) {
    Span s = Decode(kT0, ms);
    s.name = "AllReduce";
    s.kind = SpanKind::kCollective;
    s.attributes = {{"nccl.communicator", "0xabc"}, {"nccl.bytes", absl::StrCat(bytes)}};
    return s;
  };
  Span a = coll(3 << 20, 1);
  learner.Judge(&a);
  EXPECT_EQ(a.judgement.key, "0xabc AllReduce 4MiB");
  EXPECT_EQ(a.judgement.cost_kind, StallCost::kTimePerByte);
  EXPECT_NEAR(a.judgement.cost, 1e6 / (3 << 20), 1e-9);
  Span b = coll(100, 1);
  learner.Judge(&b);
  EXPECT_EQ(b.judgement.key, "0xabc AllReduce 128B");
  EXPECT_EQ(StallLearner::SizeBucket(1), "1B");
  EXPECT_EQ(StallLearner::SizeBucket(1025), "2KiB");
  EXPECT_EQ(StallLearner::SizeBucket(1ull << 30), "1GiB");
}

}  // namespace
}  // namespace stall_learner_test
}  // namespace fabricscope
