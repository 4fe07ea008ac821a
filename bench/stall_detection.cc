// Stall detection quality (issue #33 item 5): the StallLearner against
// injected slow requests, decode steps and collectives, over several seeds,
// with the rule it uses and the "above p99 and at least 2 x median" rule it
// was chosen over. Plain C++ (no Google Benchmark): prints one table row per
// seed and rule; bench/README.md ("Stall detection") has the figures.
//
//   stall_detection [SEEDS] [MINUTES]     (default 5 seeds, 30 minutes each)
//
// The workload, per seed (all spans of one host):
//   GenAI requests   20/s, "vllm llama decode": TPOT 20 ms x lognormal(0.15),
//                    16-1024 output tokens; at minute MINUTES/2 the TPOT of
//                    the workload shifts to 28 ms (a larger batch): the new
//                    normal, not stalls
//   decode steps     30/s, "engine decode_step": 30 ms x lognormal(0.05)
//   collectives      50/s, AllReduce of 1, 4, 16 or 64 MiB at 40 GB/s x
//                    lognormal(0.1)
// Injected: congestion episodes (on average one a minute, 0.5-5 s, severity
// 3-10x: an overlapped span's cost grows by (severity - 1) x the fraction of
// its judged window inside the episode), and isolated slow spans (0.3 %, 3-10x).
// Truth: a span whose injected slowdown is >= 2.5x is a stall; one below 1.3x
// is not; between them (a short episode diluted over a long decode) it is
// ambiguous and not scored. Precision and recall over the scored spans; the
// warm-up count is the stalls among each key's first --stall-warmup spans
// (must be 0).
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/spans/genai.h"

namespace fabricscope {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT0 = 1'800'000'000 * kSec;

struct Episode {
  int64_t start, end;
  double severity;
};

struct Generated {
  Span span;
  double slowdown = 1;  // injected
};

struct Score {
  uint64_t tp = 0, fp = 0, fn = 0, tn = 0, ambiguous = 0, warmup_stalls = 0;
  double Precision() const { return tp + fp == 0 ? 1 : static_cast<double>(tp) / (tp + fp); }
  double Recall() const { return tp + fn == 0 ? 1 : static_cast<double>(tp) / (tp + fn); }
};

// The slowdown an episode set gives a window [a, b].
double Slowdown(const std::vector<Episode>& episodes, int64_t a, int64_t b) {
  double s = 1;
  for (const Episode& e : episodes) {
    const int64_t lo = std::max(a, e.start), hi = std::min(b, e.end);
    if (hi <= lo) continue;
    s += (e.severity - 1) * static_cast<double>(hi - lo) / static_cast<double>(b - a);
  }
  return s;
}

std::vector<Generated> Workload(uint64_t seed, int minutes) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int64_t duration = minutes * 60 * kSec;
  std::vector<Episode> episodes;
  for (int64_t t = 0; t < duration;) {
    t += static_cast<int64_t>(-std::log(1 - u(rng)) * 60 * kSec);
    const int64_t len = static_cast<int64_t>((0.5 + 4.5 * u(rng)) * kSec);
    episodes.push_back({kT0 + t, kT0 + t + len, 3 + 7 * u(rng)});
  }
  auto isolated = [&]() { return u(rng) < 0.003 ? 3 + 7 * u(rng) : 1.0; };
  std::vector<Generated> out;
  // GenAI requests.
  std::lognormal_distribution<double> tpot_noise(0, 0.15);
  for (int64_t t = 0; t < duration; t += kSec / 20) {
    const double base_ms = t < duration / 2 ? 20 : 28;
    const int tokens = 16 + static_cast<int>(u(rng) * 1008);
    const double ttft = 0.05 + 0.2 * u(rng);
    const int64_t start = kT0 + t;
    const int64_t first = start + static_cast<int64_t>(ttft * kSec);
    double tpot_ms = base_ms * tpot_noise(rng);
    const int64_t nominal_end = first + static_cast<int64_t>((tokens - 1) * tpot_ms * 1e6);
    const double slow = Slowdown(episodes, first, nominal_end) * isolated();
    tpot_ms *= slow;
    const double decode_s = (tokens - 1) * tpot_ms / 1000;
    Generated g;
    g.slowdown = slow;
    Span& s = g.span;
    s.name = "llm_request";
    s.kind = SpanKind::kRequest;
    s.start_unix_nano = start;
    s.end_unix_nano = first + static_cast<int64_t>(decode_s * kSec);
    s.attributes = {{"service.name", "vllm"},
                    {"gen_ai.response.model", "llama"},
                    {"gen_ai.latency.time_in_queue", "0.01"},
                    {"gen_ai.latency.time_to_first_token", absl::StrCat(ttft)},
                    {"gen_ai.latency.time_in_model_decode", absl::StrCat(decode_s)},
                    {"gen_ai.usage.prompt_tokens", "512"},
                    {"gen_ai.usage.completion_tokens", absl::StrCat(tokens)}};
    ApplyGenAiRequest(&s);
    out.push_back(std::move(g));
  }
  // A span of `nominal_ns` starting at `start`, slowed by the episodes it
  // overlaps and, rarely, on its own.
  auto add = [&](const char* name, SpanKind kind, int64_t start, double nominal_ns,
                 std::vector<std::pair<std::string, std::string>> attributes) {
    const double slow =
        Slowdown(episodes, start, start + std::max<int64_t>(1, static_cast<int64_t>(nominal_ns))) *
        isolated();
    Generated g;
    g.slowdown = slow;
    g.span.name = name;
    g.span.kind = kind;
    g.span.start_unix_nano = start;
    g.span.end_unix_nano = start + static_cast<int64_t>(nominal_ns * slow);
    g.span.attributes = std::move(attributes);
    out.push_back(std::move(g));
  };
  // Decode steps.
  std::lognormal_distribution<double> step_noise(0, 0.05);
  for (int64_t t = 0; t < duration; t += kSec / 30) {
    add("decode_step", SpanKind::kDecodeStep, kT0 + t, 30e6 * step_noise(rng),
        {{"service.name", "engine"}});
  }
  // Collectives.
  std::lognormal_distribution<double> bw_noise(0, 0.1);
  const uint64_t sizes[] = {1u << 20, 4u << 20, 16u << 20, 64u << 20};
  for (int64_t t = 0; t < duration; t += kSec / 50) {
    const uint64_t bytes = sizes[static_cast<int>(u(rng) * 4) % 4];
    add("AllReduce", SpanKind::kCollective, kT0 + t,
        static_cast<double>(bytes) / 40.0 * bw_noise(rng),  // 40 GB/s = 40 B/ns
        {{"nccl.communicator", "0x7f3a"}, {"nccl.bytes", absl::StrCat(bytes)}});
  }
  // Front-end requests without GenAI attributes: a wide duration.
  std::lognormal_distribution<double> api_noise(0, 0.6);
  for (int64_t t = 0; t < duration; t += kSec / 10) {
    add("POST /v1/chat/completions", SpanKind::kRequest, kT0 + t, 200e6 * api_noise(rng),
        {{"service.name", "api"}});
  }
  // Arrival order: by end time (a span is exported when it ends).
  std::stable_sort(out.begin(), out.end(), [](const Generated& a, const Generated& b) {
    return a.span.end_unix_nano < b.span.end_unix_nano;
  });
  return out;
}

void Count(bool stall, double slowdown, Score* s) {
  if (slowdown >= 2.5) {
    (stall ? s->tp : s->fn)++;
  } else if (slowdown < 1.3) {
    (stall ? s->fp : s->tn)++;
  } else {
    s->ambiguous++;
  }
}

// A rule: the bound from a key's p50, p75, p90 and p99.
struct Rule {
  const char* name;
  double (*bound)(double p50, double p75, double p90, double p99);
  bool above_p99;  // also cost > p99
};

const Rule kRules[] = {
    {"max(2p50, p50(p75/p50)^4)",
     [](double p50, double p75, double, double) { return StallLearner::Bound(p50, p75, 2, 4); },
     false},
    {"max(2p50, p50(p75/p50)^5)",
     [](double p50, double p75, double, double) { return StallLearner::Bound(p50, p75, 2, 5); },
     false},
    {"max(2p50, p50+4(p90-p50))",
     [](double p50, double, double p90, double) {
       return std::max(2 * p50, p50 + 4 * (p90 - p50));
     },
     false},
    {"max(2p50, p50+8(p75-p50))",
     [](double p50, double p75, double, double) {
       return std::max(2 * p50, p50 + 8 * (p75 - p50));
     },
     false},
    {"p99 and 2 x p50", [](double p50, double, double, double) { return 2 * p50; }, true},
};
constexpr int kNumRules = sizeof(kRules) / sizeof(kRules[0]);
const char* const kClasses[] = {"GenAI TPOT", "decode_step", "collective", "wide request"};

// The class of a generated span (its key's family).
int ClassOf(const Span& s) {
  if (s.kind == SpanKind::kRequest) return s.phase.empty() ? 3 : 0;
  return s.kind == SpanKind::kDecodeStep ? 1 : 2;
}

}  // namespace
}  // namespace fabricscope

int main(int argc, char** argv) {
  using namespace fabricscope;
  const int seeds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int minutes = argc > 2 ? std::atoi(argv[2]) : 30;
  const StallLearnerOptions defaults;
  // [rule][class]
  Score scores[kNumRules][4];
  Score learner_score[4];
  double judge_ns = 0;
  uint64_t judged = 0, positives = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::vector<Generated> work = Workload(seed, minutes);
    // The daemon's learner, as configured by default.
    StallLearner learner(defaults, nullptr);
    const auto t0 = std::chrono::steady_clock::now();
    for (Generated& g : work) learner.Judge(&g.span);
    judge_ns +=
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    judged += work.size();
    for (const Generated& g : work) {
      const StallJudgement& j = g.span.judgement;
      positives += g.slowdown >= 2.5;
      Score& s = learner_score[ClassOf(g.span)];
      if (j.samples < defaults.warmup && j.stall) ++s.warmup_stalls;
      Count(j.stall, g.slowdown, &s);
    }
    // Each rule replayed on the same keys and costs, with the learner's
    // sketch and its learning policy (a stall learned at 1 in 8).
    for (int r = 0; r < kNumRules; ++r) {
      struct KeyState {
        QuantileSketch sketch{StallLearnerOptions{}.window};
        uint64_t stalls = 0;
      };
      std::map<std::string, KeyState> keys;
      for (const Generated& g : work) {
        const StallJudgement& j = g.span.judgement;
        if (j.key.empty()) continue;
        KeyState& k = keys[j.key];
        bool stall = false;
        if (k.sketch.count() >= defaults.warmup) {
          static const double qs[4] = {0.5, 0.75, 0.9, 0.99};
          double q[4];
          k.sketch.Quantiles(qs, 4, q);
          const double bound = kRules[r].bound(q[0], q[1], q[2], q[3]);
          stall = j.cost >= bound && (!kRules[r].above_p99 || j.cost > q[3]);
        }
        Count(stall, g.slowdown, &scores[r][ClassOf(g.span)]);
        if (!stall || ++k.stalls % 8 == 0) k.sketch.Add(j.cost);
      }
    }
  }
  std::printf("%d seeds x %d minutes, %" PRIu64 " spans, %" PRIu64 " injected stalls (>= 2.5x)\n\n",
              seeds, minutes, judged, positives);
  std::printf("%-28s %-13s %7s %6s %6s %9s %9s\n", "rule", "spans", "TP", "FP", "FN", "precision",
              "recall");
  auto row = [](const char* rule, const char* cls, const Score& s) {
    std::printf("%-28s %-13s %7" PRIu64 " %6" PRIu64 " %6" PRIu64 " %9.4f %9.4f\n", rule, cls, s.tp,
                s.fp, s.fn, s.Precision(), s.Recall());
  };
  for (int r = 0; r < kNumRules; ++r) {
    Score narrow;
    for (int c = 0; c < 4; ++c) {
      row(kRules[r].name, kClasses[c], scores[r][c]);
      if (c < 3) {
        narrow.tp += scores[r][c].tp;
        narrow.fp += scores[r][c].fp;
        narrow.fn += scores[r][c].fn;
      }
    }
    row(kRules[r].name, "first three", narrow);
  }
  Score narrow_learned;
  uint64_t warmup = 0;
  for (int c = 0; c < 4; ++c) {
    if (c < 3) {
      narrow_learned.tp += learner_score[c].tp;
      narrow_learned.fp += learner_score[c].fp;
      narrow_learned.fn += learner_score[c].fn;
    }
    warmup += learner_score[c].warmup_stalls;
  }
  std::printf(
      "\nthe daemon's learner (defaults): first three precision %.4f recall %.4f; "
      "wide request precision %.4f recall %.4f; %" PRIu64 " stalls during warm-up\n",
      narrow_learned.Precision(), narrow_learned.Recall(), learner_score[3].Precision(),
      learner_score[3].Recall(), warmup);
  std::printf("Judge: %.0f ns per span (one thread)\n", judge_ns / judged);
  return 0;
}
