#include "daemon/scheduler.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "store/store.h"

namespace fabricscope {
namespace {

const MetricSpec& kOverruns = DefineMetric(
    {.name = "fabricscope_scheduler_overruns_total",
     .type = MetricType::kCounter,
     .help = "Ticks skipped because the previous tick of the tier ran past their deadline.",
     .labels = {"tier"},
     .component = "scheduler"});
const MetricSpec& kTicks = DefineMetric({.name = "fabricscope_scheduler_ticks_total",
                                         .type = MetricType::kCounter,
                                         .help = "Ticks run, by tier.",
                                         .labels = {"tier"},
                                         .component = "scheduler"});
const MetricSpec& kInterval = DefineMetric({.name = "fabricscope_scheduler_interval_seconds",
                                            .type = MetricType::kGauge,
                                            .help = "Configured poll interval of each tier.",
                                            .labels = {"tier"},
                                            .component = "scheduler"});
const MetricSpec& kPollDuration =
    DefineMetric({.name = "fabricscope_collector_poll_duration_seconds",
                  .type = MetricType::kHistogram,
                  .help = "Time one poll of one collector took (one tier tick).",
                  .labels = {"collector"},
                  .component = "scheduler"});
const MetricSpec& kCollectorErrors = DefineMetric(
    {.name = "fabricscope_collector_errors_total",
     .type = MetricType::kCounter,
     .help = "Collector errors by class: not_found (device/file vanished), permission_denied, "
             "parse (garbage in a counter file), io, unsupported (asked once), poll (whole tick "
             "failed).",
     .labels = {"collector", "code"},
     .component = "scheduler"});

const prometheus::Histogram::BucketBoundaries& PollBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
      0.005,   0.01,     0.025,   0.05,   0.1,     0.25,   1.0};
  return *b;
}

}  // namespace

struct Scheduler::CollectorMetrics {
  prometheus::Histogram* duration = nullptr;
  std::array<prometheus::Counter*, kNumCollectorErrorCodes> errors{};
};

class Scheduler::TickContext final : public PollContext {
 public:
  // `tick` (null: a sample outside a tier tick, e.g. Discover) outlives the context.
  TickContext(Scheduler* s, Collector* c, CollectorMetrics* m, Tier tier, int64_t ts_ns,
              const TickRef* tick = nullptr)
      : s_(s), c_(c), m_(m), tier_(tier), ts_ns_(ts_ns), tick_(tick) {}
  Tier tier() const override { return tier_; }
  int64_t ts_ns() const override { return ts_ns_; }
  void Append(SeriesId id, uint64_t raw) override {
    if (tick_ != nullptr) {
      s_->store_->Append(id, *tick_, raw);
    } else {
      s_->store_->Append(id, ts_ns_, raw);
    }
  }
  void AppendReadings(absl::Span<const SeriesReading> readings) override {
    if (tick_ != nullptr) {
      s_->store_->Append(*tick_, readings);
    } else {
      for (const SeriesReading& r : readings) s_->store_->Append(r.id, ts_ns_, r.raw);
    }
  }
  // Poll/Discover returned `status`: counted as kPoll whatever its code.
  void PollFailed(absl::string_view key, const absl::Status& status) {
    RecordError(CollectorErrorCode::kPoll, key, status.ToString());
  }

 private:
  void RecordError(CollectorErrorCode code, absl::string_view key,
                   absl::string_view detail) override {
    m_->errors[static_cast<int>(code)]->Increment();
    uint64_t suppressed = 0;
    if (s_->log_limiter_.Allow(absl::StrCat(c_->name(), "/", key), &suppressed)) {
      Log(LogLevel::kWarn, c_->name(), detail,
          {{"code", std::string(CollectorErrorCodeName(code))},
           {"key", std::string(key)},
           {"suppressed", absl::StrCat(suppressed)}});
    }
  }

  Scheduler* s_;
  Collector* c_;
  CollectorMetrics* m_;
  Tier tier_;
  int64_t ts_ns_;
  const TickRef* tick_;
};

Scheduler::Scheduler(Clock* clock, Store* store, MetricsRegistry* metrics,
                     std::array<absl::Duration, kNumTiers> intervals)
    : clock_(clock), store_(store), metrics_(metrics), intervals_(intervals) {
  auto& overruns = metrics_->Counter(kOverruns);
  auto& ticks = metrics_->Counter(kTicks);
  auto& interval = metrics_->Gauge(kInterval);
  for (int t = 0; t < kNumTiers; ++t) {
    std::string name(TierName(static_cast<Tier>(t)));
    overrun_counters_[t] = &overruns.Add({{"tier", name}});
    tick_counters_[t] = &ticks.Add({{"tier", name}});
    interval.Add({{"tier", name}}).Set(absl::ToDoubleSeconds(intervals_[t]));
    columns_[t] = store_->AddTickColumn(intervals_[t]);
  }
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Add(Collector* collector) {
  auto m = std::make_unique<CollectorMetrics>();
  std::string name(collector->name());
  m->duration = &metrics_->Histogram(kPollDuration).Add({{"collector", name}}, PollBuckets());
  auto& errors = metrics_->Counter(kCollectorErrors);
  for (int code = 0; code < kNumCollectorErrorCodes; ++code) {
    m->errors[code] = &errors.Add(
        {{"collector", name},
         {"code", std::string(CollectorErrorCodeName(static_cast<CollectorErrorCode>(code)))}});
  }
  const size_t index = collectors_.size();
  collectors_.push_back(collector);
  collector_metrics_.push_back(std::move(m));
  // Tiers() is asked once here, not on every tick (it returns a vector).
  std::array<bool, kNumTiers> wants{};
  for (Tier t : collector->Tiers()) wants[static_cast<int>(t)] = true;
  for (int t = 0; t < kNumTiers; ++t) {
    if (wants[t]) tier_collectors_[t].push_back(index);
  }
}

void Scheduler::PollTier(Tier tier, int64_t ts_ns) {
  // The tick's timestamp, recorded once in the tier's time column.
  const TickRef tick = store_->Tick(columns_[static_cast<int>(tier)], ts_ns);
  for (size_t i : tier_collectors_[static_cast<int>(tier)]) {
    Collector* c = collectors_[i];
    TickContext ctx(this, c, collector_metrics_[i].get(), tier, ts_ns, &tick);
    SteadyTime start = clock_->SteadyNow();
    absl::Status s = c->Poll(ctx);
    collector_metrics_[i]->duration->Observe(
        std::chrono::duration<double>(clock_->SteadyNow() - start).count());
    if (!s.ok()) ctx.PollFailed(TierName(tier), s);
  }
  if (tick_hooks_[static_cast<int>(tier)]) tick_hooks_[static_cast<int>(tier)](ts_ns);
  ticks_[static_cast<int>(tier)].fetch_add(1);
  tick_counters_[static_cast<int>(tier)]->Increment();
}

void Scheduler::SetTickHook(Tier tier, std::function<void(int64_t ts_ns)> fn) {
  tick_hooks_[static_cast<int>(tier)] = std::move(fn);
}

void Scheduler::PollOnce(Tier tier) { PollTier(tier, clock_->RealtimeNs()); }

void Scheduler::Start() {
  if (started_) return;
  started_ = true;
  for (size_t i = 0; i < collectors_.size(); ++i) {
    TickContext ctx(this, collectors_[i], collector_metrics_[i].get(), Tier::kConfig,
                    clock_->RealtimeNs());
    absl::Status s = collectors_[i]->Discover(ctx);
    if (!s.ok()) ctx.PollFailed("discover", s);
  }
  // Group tiers by interval; a faster tier's interval absorbs equal slower ones.
  std::map<int64_t, Group> groups;
  for (int t = 0; t < kNumTiers; ++t) {
    int64_t key = absl::ToInt64Nanoseconds(intervals_[t]);
    Group& g = groups[key];
    g.interval = intervals_[t];
    g.tiers.push_back(static_cast<Tier>(t));
  }
  for (auto& entry : groups) {
    threads_.emplace_back([this, group = entry.second] { RunGroup(group); });
  }
}

void Scheduler::RunGroup(const Group& group) {
  const SteadyDuration interval = absl::ToChronoNanoseconds(group.interval);
  const SteadyTime start = clock_->SteadyNow();
  uint64_t k = 0;
  while (!stop_.Notified()) {
    const int64_t ts_ns = clock_->RealtimeNs();
    for (Tier t : group.tiers) PollTier(t, ts_ns);
    const int64_t done =
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock_->SteadyNow().time_since_epoch())
            .count();
    for (Tier t : group.tiers) last_tick_ns_[static_cast<int>(t)].store(std::max<int64_t>(1, done));
    ++k;
    SteadyTime next = start + interval * k;
    const SteadyTime now = clock_->SteadyNow();
    if (now >= next) {
      // Overrun: skip every tick whose deadline already passed.
      const uint64_t missed = static_cast<uint64_t>((now - next) / interval) + 1;
      k += missed;
      next = start + interval * k;
      for (Tier t : group.tiers) {
        overruns_[static_cast<int>(t)].fetch_add(missed);
        overrun_counters_[static_cast<int>(t)]->Increment(static_cast<double>(missed));
      }
    }
    if (!clock_->SleepUntil(next, &stop_)) break;
  }
}

Scheduler::Health Scheduler::CheckHealth(SteadyTime now) const {
  Health h;
  h.live = started_.load();
  h.ready = true;
  if (!h.live) h.detail = "scheduler not started";
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  for (int i = 0; i < kNumTiers; ++i) {
    const int64_t last = last_tick_ns_[i].load();
    const std::string name(TierName(static_cast<Tier>(i)));
    if (last == 0) {
      h.ready = false;
      absl::StrAppend(&h.detail, h.detail.empty() ? "" : "; ", "tier ", name,
                      ": no tick completed yet");
      continue;
    }
    const int64_t allowed =
        std::max<int64_t>(3 * absl::ToInt64Nanoseconds(intervals_[i]), 1'000'000'000);
    if (now_ns - last > allowed) {
      h.live = false;
      absl::StrAppend(&h.detail, h.detail.empty() ? "" : "; ", "tier ", name, ": last tick ",
                      (now_ns - last) / 1'000'000, " ms ago (allowed ", allowed / 1'000'000,
                      " ms)");
    }
  }
  return h;
}

void Scheduler::Stop() {
  stop_.Notify();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace fabricscope
