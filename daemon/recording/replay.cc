#include "daemon/recording/replay.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/signals.h"
#include "daemon/ingest/span_convert.h"
#include "daemon/spans/genai.h"
#include "daemon/spans/span_store.h"

namespace fabricscope {

RecordingFeeder::RecordingFeeder(Store* store, PortInventory* ports, int64_t offset_ns)
    : store_(store), ports_(ports), offset_ns_(offset_ns) {
  // The built-in kind patterns only (a recording carries explicit kinds).
  classifier_ = *SpanKindClassifier::Create({});
}

void RecordingFeeder::Problem(size_t line_no, absl::string_view what, uint64_t* counter) {
  ++*counter;
  if (stats_.messages.size() < RecordingStats::kMaxMessages) {
    stats_.messages.push_back(absl::StrCat("line ", line_no, ": ", what));
  }
}

void RecordingFeeder::Feed(size_t line_no, absl::string_view line, std::vector<Span>* spans) {
  if (absl::StripAsciiWhitespace(line).empty()) return;
  ++stats_.lines;
  auto parsed = ParseRecordingLine(line);
  if (!parsed.ok()) {
    Problem(line_no, parsed.status().message(), &stats_.malformed);
    return;
  }
  if (parsed->type == RecordingLine::kSample) {
    AddSample(line_no, *parsed);
    return;
  }
  // What an incident recording is of: nothing to feed.
  if (parsed->type == RecordingLine::kIncident) return;
  if (parsed->type == RecordingLine::kHeader) {
    UseHeader(std::move(parsed->header));
    return;
  }
  v1::Span& in = parsed->span;
  in.set_start_unix_nano(in.start_unix_nano() + static_cast<uint64_t>(offset_ns_));
  in.set_end_unix_nano(in.end_unix_nano() + static_cast<uint64_t>(offset_ns_));
  Span span;
  std::string detail;
  ConvertContext ctx{&limits_, classifier_.get()};
  RejectReason r = ConvertNativeSpan(in, ctx, &span, &detail);
  // Judged as of its own end: a recorded span is never "too old".
  if (r == RejectReason::kNone) r = ValidateSpan(span, limits_, span.end_unix_nano, &detail);
  if (r != RejectReason::kNone) {
    Problem(line_no, absl::StrCat("span rejected: ", RejectReasonName(r), ": ", detail),
            &stats_.rejected_spans);
    return;
  }
  span.protocol = "recording";
  ++stats_.spans;
  // A derived span (a request's KV transfer) is derived again from its request.
  for (const auto& [k, v] : span.attributes) {
    if (k == kDerivedFromAttribute) return;
  }
  const size_t first = spans->size();
  spans->push_back(std::move(span));
  if (learner_ != nullptr || !spans->back().phase.empty()) {
    std::vector<Span> prepared(std::make_move_iterator(spans->begin() + first),
                               std::make_move_iterator(spans->end()));
    spans->resize(first);
    StallLearner::PrepareSpans(learner_, &prepared);
    for (Span& s : prepared) spans->push_back(std::move(s));
  }
  // The daemon's own judgement, where the recording carries it, wins over
  // this reader's learner (which starts cold and learned from fewer spans);
  // the learner still learned from the span. Derived spans keep the reader's.
  if (parsed->judgement.judged) {
    (*spans)[first].judgement = parsed->judgement;
    ++stats_.recorded_judgements;
  }
}

void RecordingFeeder::UseHeader(RecordingHeader header) {
  if (header_.has_value()) return;  // the first one describes the recording
  for (const PortInfo& p : header.ports) {
    ports_->Upsert(p);
    seen_ports_.try_emplace(absl::StrCat(p.device, "/", p.port, "/", p.netdev), true);
  }
  ports_->SetTopology(header.topology);
  ports_->SetPods(header.pods);
  header_ = std::move(header);
}

void RecordingFeeder::AddSample(size_t line_no, const RecordingLine& l) {
  auto [it, inserted] = series_.try_emplace(l.key);
  Known& k = it->second;
  if (inserted) {
    if (auto signal = MapCounter(l.key); signal.has_value()) {
      k.id = store_->Register(l.key, *signal);
    }
  }
  if (k.id == kInvalidSeries) {
    // Not an error: the daemon does not poll counters without a signal rule
    // either (a recording may carry a driver's whole `ethtool -S` set).
    if (inserted) ++stats_.unknown_counters;
    ++stats_.ignored_samples;
    return;
  }
  const int64_t ts = l.ts_ns + offset_ns_;
  if (ts < k.last_ts_ns) {
    Problem(line_no, absl::StrCat("sample of ", l.key.name, " older than the previous one"),
            &stats_.out_of_order);
    return;
  }
  k.last_ts_ns = ts;
  if (!l.key.device.empty() && !l.key.netdev.empty()) {
    const std::string port_key = absl::StrCat(l.key.device, "/", l.key.port, "/", l.key.netdev);
    if (seen_ports_.try_emplace(port_key, true).second) {
      PortInfo info;
      info.device = l.key.device;
      info.port = l.key.port;
      info.netdev = l.key.netdev;
      info.link_layer = "Ethernet";
      info.state = "ACTIVE";
      ports_->Upsert(info);
    }
  }
  store_->Append(k.id, ts, l.value);
  ++stats_.samples;
  if (stats_.first_ts_ns == 0) stats_.first_ts_ns = ts;
  stats_.last_ts_ns = std::max(stats_.last_ts_ns, ts);
}

absl::Status ForEachLine(const std::string& path,
                         const std::function<bool(size_t, absl::string_view)>& line_fn) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (!line_fn(line_no, line)) break;
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return absl::OkStatus();
}

bool RecordingTimeRange(const std::string& path, int64_t* first_ns, int64_t* last_ns) {
  bool any = false;
  (void)ForEachLine(path, [&](size_t, absl::string_view line) {
    auto l = ParseRecordingLine(line);
    if (l.ok() && l->type == RecordingLine::kSample) {
      if (!any) *first_ns = l->ts_ns;
      *first_ns = std::min(*first_ns, l->ts_ns);
      *last_ns = any ? std::max(*last_ns, l->ts_ns) : l->ts_ns;
      any = true;
    }
    return true;
  });
  return any;
}

ReplayWorker::ReplayWorker(std::string path, double speed, Store* store, PortInventory* ports,
                           SpanStore* spans, Clock* clock)
    : path_(std::move(path)),
      speed_(speed),
      store_(store),
      ports_(ports),
      spans_(spans),
      clock_(clock) {}

ReplayWorker::~ReplayWorker() { Stop(); }

void ReplayWorker::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ReplayWorker::Stop() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

bool ReplayWorker::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

RecordingStats ReplayWorker::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ReplayWorker::Run() {
  int64_t first = 0, last = 0;
  const bool has_samples = RecordingTimeRange(path_, &first, &last);
  const int64_t now = clock_->RealtimeNs();
  // Real time: the recording starts now; otherwise it ends now.
  const int64_t offset = !has_samples ? 0 : speed_ == 1.0 ? now - first : now - last;
  RecordingFeeder feeder(store_, ports_, offset);
  feeder.SetStallLearner(learner_);
  const SteadyTime t0 = clock_->SteadyNow();
  std::vector<Span> spans;
  absl::Status read = ForEachLine(path_, [&](size_t line_no, absl::string_view line) {
    if (speed_ > 0 && has_samples) {
      // Pace by the line's time (a quick look at ts_ns / end_unix_nano).
      auto l = ParseRecordingLine(line);
      if (l.ok() && (l->type == RecordingLine::kSample || l->type == RecordingLine::kSpan)) {
        const int64_t ts = l->type == RecordingLine::kSample
                               ? l->ts_ns
                               : static_cast<int64_t>(l->span.end_unix_nano());
        const double wait_ns = static_cast<double>(std::max<int64_t>(0, ts - first)) / speed_;
        if (!clock_->SleepUntil(t0 + std::chrono::nanoseconds(static_cast<int64_t>(wait_ns)),
                                &stop_)) {
          return false;
        }
      }
    } else if (stop_.Notified()) {
      return false;
    }
    feeder.Feed(line_no, line, &spans);
    if (!spans.empty()) {
      spans_->Add(std::move(spans));
      spans.clear();
    }
    return true;
  });
  const RecordingStats& st = feeder.stats();
  for (const std::string& m : st.messages) {
    Log(LogLevel::kWarn, "replay", "skipped a line of the recording", {{"problem", m}});
  }
  Log(read.ok() ? LogLevel::kInfo : LogLevel::kError, "replay",
      read.ok() ? "replay finished" : "replay stopped: cannot read the recording",
      {{"file", path_},
       {"error", read.ok() ? "" : std::string(read.message())},
       {"samples", absl::StrCat(st.samples)},
       {"spans", absl::StrCat(st.spans)},
       {"malformed_lines", absl::StrCat(st.malformed)},
       {"ignored_counters", absl::StrCat(st.unknown_counters)},
       {"out_of_order", absl::StrCat(st.out_of_order)},
       {"rejected_spans", absl::StrCat(st.rejected_spans)}});
  std::lock_guard lock(mu_);
  stats_ = st;
  finished_ = true;
}

}  // namespace fabricscope
