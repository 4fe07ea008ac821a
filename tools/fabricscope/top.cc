#include "tools/fabricscope/top.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <ostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "tools/fabricscope/events.h"
#include "tools/fabricscope/query_client.h"

namespace fabricscope::cli {
namespace {

constexpr uint32_t kTopDefaultLimit = 40;

constexpr const char* kColumnNames[kNumTopColumns] = {"pause", "pfc_frames", "ecn",
                                                      "cnp",   "discards",   "retransmits"};
constexpr const char* kColumnTitles[kNumTopColumns] = {"PAUSE%", "PFC/s",  "ECN/s",
                                                       "CNP/s",  "DISC/s", "RETX/s"};
// Signals queried per column.
const std::vector<std::string>& ColumnSignals(TopColumn c) {
  static const auto* table = new std::vector<std::vector<std::string>>{
      {"pfc_pause_seconds"},       {"pfc_pause_frames"},         {"ecn_marked_packets"},
      {"cnp_sent", "cnp_handled"}, {"discards", "netdev_drops"}, {"rdma_errors"},
  };
  return (*table)[static_cast<int>(c)];
}

bool IsRetransmit(absl::string_view counter) {
  return counter == "out_of_sequence" || counter == "packet_seq_err" ||
         counter == "local_ack_timeout_err" || counter == "implied_nak_seq_err" ||
         absl::StartsWith(counter, "roce_adp_retrans");
}

std::atomic<bool> g_interrupted{false};
void OnSigint(int) { g_interrupted.store(true); }

// Puts a terminal stdin into non-canonical, no-echo mode; restores on destruction.
class RawStdin {
 public:
  RawStdin() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawStdin() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  bool active() const { return active_; }

 private:
  termios saved_{};
  bool active_ = false;
};

// Waits up to `ms` for a key; true when 'q' was pressed or SIGINT arrived.
bool WaitForQuit(int ms, bool read_keys) {
  if (g_interrupted.load()) return true;
  if (!read_keys) {
    pollfd none{};
    poll(&none, 0, ms);  // EINTR on SIGINT
    return g_interrupted.load();
  }
  pollfd p{STDIN_FILENO, POLLIN, 0};
  if (poll(&p, 1, ms) > 0 && (p.revents & POLLIN)) {
    char c;
    while (read(STDIN_FILENO, &c, 1) == 1) {
      if (c == 'q' || c == 'Q') return true;
    }
  }
  return g_interrupted.load();
}

}  // namespace

void TopModel::SetPorts(const v1::PortsResponse& ports) {
  ports_.assign(ports.ports().begin(), ports.ports().end());
}

void TopModel::SetPfcEnabled(const v1::SeriesResponse& gauges) {
  pfc_enabled_.clear();
  for (const v1::SeriesData& d : gauges.series()) {
    auto it = d.labels().find("priority");
    if (it == d.labels().end() || d.samples_size() == 0) continue;
    if (d.samples(d.samples_size() - 1).raw() != 0) pfc_enabled_.insert({d.netdev(), it->second});
  }
}

bool TopModel::Shown(const Row& row) const {
  return all_priorities_ || row.priority == "-" || row.moved ||
         pfc_enabled_.count({row.netdev, row.priority}) > 0;
}

std::vector<const TopModel::Row*> TopModel::Visible(size_t* hidden, size_t* left_out) const {
  std::vector<const Row*> out;
  *hidden = 0;
  *left_out = 0;
  for (const auto& [key, row] : rows_) {
    if (!Shown(row)) {
      ++*hidden;
    } else if (limit_ != 0 && out.size() >= limit_) {
      ++*left_out;
    } else {
      out.push_back(&row);
    }
  }
  return out;
}

void TopModel::BeginRefresh() {
  for (auto& [key, row] : rows_) {
    for (Cell& c : row.cells) c.current = 0;
  }
}

TopModel::Row& TopModel::RowFor(const v1::SeriesData& d) {
  std::string device = d.device(), netdev = d.netdev();
  uint32_t port = d.port();
  for (const v1::Port& p : ports_) {
    if (device.empty() && !netdev.empty() && p.netdev() == netdev) {
      device = p.device();
      port = p.port();
    }
    if (netdev.empty() && !device.empty() && p.device() == device && p.port() == port) {
      netdev = p.netdev();
    }
  }
  auto it = d.labels().find("priority");
  std::string prio = it == d.labels().end() || it->second.empty() ? "-" : it->second;
  Row& row = rows_[{device, port, netdev, prio}];
  row.device = device;
  row.port = port;
  row.netdev = netdev;
  row.priority = prio;
  row.has_partner = false;
  for (const v1::Port& p : ports_) {
    const bool same = (!device.empty() && p.device() == device && p.port() == port) ||
                      (!netdev.empty() && p.netdev() == netdev);
    if (same && p.has_partner()) {
      row.has_partner = true;
      row.partner = p.partner();
      break;
    }
  }
  return row;
}

void TopModel::Update(TopColumn column, const v1::SeriesResponse& series, int64_t window_ns) {
  for (const v1::SeriesData& d : series.series()) {
    if (column == TopColumn::kRetransmits) {
      auto it = d.labels().find("counter");
      if (it == d.labels().end() || !IsRetransmit(it->second)) continue;
    }
    // Pause frames/time per direction: the rx side is what stalls this host's
    // sends; tx (pause requested from the peer) is summed into the same row.
    Row& row = RowFor(d);
    Cell& cell = row.cells[static_cast<int>(column)];
    cell.seen = true;
    double total = 0;
    for (int i = 1; i < d.samples_size(); ++i) {
      const auto& a = d.samples(i - 1);
      const auto& b = d.samples(i);
      if (b.raw() < a.raw() || b.ts_unix_nano() <= a.ts_unix_nano()) continue;
      const double delta = static_cast<double>(b.raw() - a.raw()) * d.scale();
      total += delta;
      if (b.raw() > a.raw()) row.moved = true;
      double rate = delta / (static_cast<double>(b.ts_unix_nano() - a.ts_unix_nano()) * 1e-9);
      if (column == TopColumn::kPause) rate *= 100;  // percent of the interval
      cell.peak = std::max(cell.peak, rate);
    }
    double current = total / (static_cast<double>(window_ns) * 1e-9);
    if (column == TopColumn::kPause) current *= 100;
    cell.current += current;
  }
  // The peak is since start and covers what was shown: a row's current sums
  // its series (rx and tx, two sources) over the refresh window, which one
  // series' per-interval peak need not reach. current <= peak by construction.
  for (auto& [key, row] : rows_) {
    Cell& cell = row.cells[static_cast<int>(column)];
    cell.peak = std::max(cell.peak, cell.current);
  }
}

std::vector<std::string> TopModel::ActiveOn(const Row& row) const {
  std::vector<std::string> out;
  for (const v1::Event& e : active_.events()) {
    const bool port = (!e.netdev().empty() && e.netdev() == row.netdev) ||
                      (!e.device().empty() && e.device() == row.device && e.port() == row.port);
    if (!port) continue;
    if (!e.priority().empty() && e.priority() != row.priority) continue;
    std::string k = absl::StrCat(e.detector(), "/", e.kind());
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(std::move(k));
  }
  return out;
}

std::string TopModel::RenderHuman(int64_t now_ns) const {
  std::string out = absl::StrCat("fabricscope top  ", FormatUnixNano(now_ns),
                                 "   current (peak since start)   q or Ctrl-C quits\n\n");
  size_t hidden = 0, left_out = 0;
  const std::vector<const Row*> visible = Visible(&hidden, &left_out);
  const bool partners =
      std::any_of(visible.begin(), visible.end(), [](const Row* r) { return r->has_partner; });
  absl::StrAppend(&out, absl::StrFormat("%-12s %-10s", "PORT", "NETDEV"));
  if (partners) absl::StrAppend(&out, absl::StrFormat(" %-24s", "PARTNER"));
  absl::StrAppend(&out, absl::StrFormat(" %-6s", "PRIO"));
  for (const char* t : kColumnTitles) absl::StrAppend(&out, absl::StrFormat(" %17s", t));
  absl::StrAppend(&out, "  ACTIVE\n");
  for (const Row* r : visible) {
    const Row& row = *r;
    std::string port = row.device.empty() ? "-" : absl::StrCat(row.device, "/", row.port);
    absl::StrAppend(&out,
                    absl::StrFormat("%-12s %-10s", port, row.netdev.empty() ? "-" : row.netdev));
    if (partners) {
      absl::StrAppend(&out, absl::StrFormat(" %-24s", row.has_partner ? PartnerName(row.partner)
                                                                      : std::string("-")));
    }
    absl::StrAppend(&out, absl::StrFormat(" %-6s", row.priority));
    for (const Cell& c : row.cells) {
      absl::StrAppend(&out,
                      absl::StrFormat(" %17s", c.seen ? absl::StrCat(FormatRate(c.current), " (",
                                                                     FormatRate(c.peak), ")")
                                                      : "-"));
    }
    const std::vector<std::string> active = ActiveOn(row);
    absl::StrAppend(&out, "  ", active.empty() ? "-" : absl::StrJoin(active, ","), "\n");
  }
  if (rows_.empty()) absl::StrAppend(&out, "(no congestion series yet)\n");
  absl::StrAppend(&out, LeftOutLine(left_out, "rows"));
  if (hidden > 0) {
    absl::StrAppend(&out, hidden,
                    " idle priority rows hidden (PFC off and no counter moved since "
                    "start; --all-priorities shows them)\n");
  }
  if (active_.events_size() == 0) {
    absl::StrAppend(&out, "\nno detector active\n");
  } else {
    absl::StrAppend(&out, "\nactive detectors:\n");
    for (const v1::Event& e : active_.events()) {
      absl::StrAppend(&out, "  ", e.detector(), "/", e.kind(), " since ",
                      FormatUnixNano(static_cast<int64_t>(e.start_unix_nano())), ": ", e.summary(),
                      "\n");
    }
  }
  return out;
}

std::string TopModel::RenderJson(int64_t now_ns) const {
  std::string out = absl::StrCat("{\"ts_unix_nano\":", now_ns, ",\"rows\":[");
  bool first = true;
  size_t hidden = 0, left_out = 0;
  for (const Row* r : Visible(&hidden, &left_out)) {
    const Row& row = *r;
    absl::StrAppend(
        &out, first ? "" : ",", "{\"device\":", JsonString(row.device), ",\"port\":", row.port,
        ",\"netdev\":", JsonString(row.netdev), ",\"priority\":", JsonString(row.priority),
        row.has_partner ? ",\"partner\":" + PartnerJson(row.partner) : "", ",\"active\":[");
    const std::vector<std::string> active = ActiveOn(row);
    for (size_t i = 0; i < active.size(); ++i) {
      absl::StrAppend(&out, i ? "," : "", JsonString(active[i]));
    }
    absl::StrAppend(&out, "]");
    first = false;
    for (int i = 0; i < kNumTopColumns; ++i) {
      if (!row.cells[i].seen) continue;
      absl::StrAppend(&out, ",", JsonString(kColumnNames[i]),
                      ":{\"current\":", JsonNumber(row.cells[i].current),
                      ",\"peak\":", JsonNumber(row.cells[i].peak), "}");
    }
    absl::StrAppend(&out, "}");
  }
  absl::StrAppend(&out, "],\"hidden_idle_rows\":", hidden, ",\"left_out_rows\":", left_out,
                  ",\"active_events\":[");
  for (int i = 0; i < active_.events_size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", EventJson(active_.events(i)));
  }
  absl::StrAppend(&out, "]}\n");
  return out;
}

int RunTop(const CliContext& ctx, const std::vector<std::string>& args) {
  std::ostream& out = std::cout;
  const auto run = Invocation::Start(
      ctx, "top", args,
      {.values = {"iterations", "interval", "limit"},
       .bools = {"all-priorities"},
       .usage = "usage: fabricscope top [--interval DUR] [--iterations N] [--all-priorities] "
                "[--limit N] [--server HOST:PORT] [--output human|json]\n"
                "  priority rows only where PFC is enabled or a counter moved since start\n"
                "  (--all-priorities: every row); --limit N: at most N rows (default 40;\n"
                "  json: no limit; 0: all)\n"});
  if (!run) return kExitUsage;
  const Flags& flags = run->flags();
  auto limit = run->Limit(kTopDefaultLimit);
  if (!limit.ok()) return run->Usage(limit.status().message());
  int64_t iterations = -1;
  if (flags.Has("iterations") &&
      (!absl::SimpleAtoi(flags.Get("iterations"), &iterations) || iterations <= 0)) {
    return run->Usage("--iterations must be a positive integer");
  }
  auto interval = ParseSince(flags.Get("interval", "1s"));
  if (!interval.ok()) return run->Usage("--interval must be a positive duration such as 1s");
  const int64_t window_ns = absl::ToInt64Nanoseconds(*interval);

  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigaction(SIGINT, &sa, nullptr);
  RawStdin raw;
  const bool tty_out = isatty(STDOUT_FILENO) && &out == &std::cout;
  auto stub = MakeQueryStub(run->server());
  TopModel model;
  model.set_all_priorities(flags.Has("all-priorities"));
  model.set_limit(*limit);
  {
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::PortsResponse ports;
    grpc::Status s = stub->Ports(&call, v1::PortsRequest(), &ports);
    if (!s.ok()) return run->CallFailed(s.error_code(), s.error_message());
    model.SetPorts(ports);
  }
  for (int64_t n = 0; iterations < 0 || n < iterations; ++n) {
    const int64_t now = NowUnixNano();
    model.BeginRefresh();
    for (int c = 0; c < kNumTopColumns; ++c) {
      for (const std::string& signal : ColumnSignals(static_cast<TopColumn>(c))) {
        v1::SeriesRequest req;
        req.set_signal(signal);
        req.mutable_time_range()->set_from_unix_nano(static_cast<uint64_t>(now - window_ns));
        req.mutable_time_range()->set_to_unix_nano(static_cast<uint64_t>(now));
        grpc::ClientContext call;
        call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        v1::SeriesResponse resp;
        grpc::Status s = stub->Series(&call, req, &resp);
        if (!s.ok()) return run->CallFailed(s.error_code(), s.error_message());
        model.Update(static_cast<TopColumn>(c), resp, window_ns);
      }
    }
    {  // where PFC is enabled (the config tier polls it, every 10 s by default)
      v1::SeriesRequest req;
      req.set_signal("fabricscope_pfc_enabled");
      req.set_max_samples_per_series(1);
      req.mutable_time_range()->set_from_unix_nano(static_cast<uint64_t>(now - 600'000'000'000));
      req.mutable_time_range()->set_to_unix_nano(static_cast<uint64_t>(now));
      grpc::ClientContext call;
      call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::SeriesResponse resp;
      if (grpc::Status s = stub->Series(&call, req, &resp); s.ok()) model.SetPfcEnabled(resp);
    }
    {
      v1::EventsRequest req;
      req.set_active_only(true);
      req.mutable_time_range()->set_from_unix_nano(1);
      req.mutable_time_range()->set_to_unix_nano(static_cast<uint64_t>(now + 60'000'000'000));
      grpc::ClientContext call;
      call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::EventsResponse resp;
      if (grpc::Status s = stub->Events(&call, req, &resp); s.ok()) model.SetActiveEvents(resp);
    }
    if (run->json()) {
      out << model.RenderJson(now);
    } else {
      if (tty_out) out << "\033[H\033[2J";
      out << model.RenderHuman(now);
      if (!tty_out) out << "\n";
    }
    out.flush();
    if (iterations >= 0 && n + 1 >= iterations) break;
    if (WaitForQuit(static_cast<int>(window_ns / 1'000'000), raw.active())) break;
  }
  return kExitOk;
}

}  // namespace fabricscope::cli
