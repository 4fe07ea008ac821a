// `fabricscope top [--interval DUR] [--iterations N] [--all-priorities]
//                  [--limit N] [--server HOST:PORT] [--output human|json]`
//
// A live view for a plain terminal (works over ssh; no curses): one row per
// port and priority with the current rate (over the last refresh interval,
// default 1s) and the peak per-poll-interval rate seen since `top` started,
// for pause time (% of the interval), PFC pause frames, ECN marks, CNPs,
// discards and retransmits (out_of_sequence, packet_seq_err,
// local_ack_timeout_err, implied_nak_seq_err, roce_adp_retrans*). Rows come
// from Query.Series; ports are mapped to their netdev with Query.Ports.
// The last column names the detector episodes active on the row's port (and
// priority, for events that have one): Query.Events with active_only; a
// footer lists each active event with its summary.
//
// Rows: a port's row without a priority (port-wide signals) always; a
// priority row only when PFC is enabled on that netdev and priority
// (fabricscope_pfc_enabled, from Query.Series, the newest sample of the last
// 10 minutes) or one of its counters moved since `top` started;
// --all-priorities shows every row. A footer counts the idle rows hidden.
// --limit N shows at most N rows (default 40; json: no limit; 0: all) and
// says how many more there were.
//
// Keys: q quits (stdin in non-canonical mode while a terminal); Ctrl-C quits
// and restores the terminal. --iterations N stops after N refreshes (tests,
// scripts). On a terminal the screen is redrawn in place; otherwise frames
// are printed one after another. --output json prints one JSON object per
// refresh: {"ts_unix_nano": N, "rows": [{"device", "port", "netdev",
// "priority", "partner", "active": ["detector/kind"...], "<column>": {"current",
// "peak"}...}], "hidden_idle_rows": N, "left_out_rows": N, "active_events": [...
// as `fabricscope events --output json`]}.
// The link partner of a row's port comes with Query.Ports: "partner" is
// present only where the daemon's topology knows it ({"system_name",
// "port_id", "chassis_id", "port_description", "source"}); the human view
// then has a PARTNER column ("leaf07 Ethernet1/12").
#pragma once

#include <iosfwd>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fabricscope/v1/query.pb.h"
#include "tools/fabricscope/cli.h"

namespace fabricscope::cli {

// The columns of the view.
enum class TopColumn { kPause, kPfc, kEcn, kCnp, kDiscards, kRetransmits };
inline constexpr int kNumTopColumns = 6;

// Aggregates Series responses into rows; keeps peaks across refreshes.
class TopModel {
 public:
  struct Cell {
    // The rate over the last refresh window, summed over the row's series.
    double current = 0;
    // Since start: the highest per-poll-interval rate of any one of the row's
    // series, and never below a current shown (current <= peak always).
    double peak = 0;
    bool seen = false;
  };
  struct Row {
    std::string device;
    uint32_t port = 0;
    std::string netdev;
    std::string priority;  // "-" when the signals have none
    bool has_partner = false;
    v1::LinkPartner partner;  // the port's, from SetPorts, when has_partner
    Cell cells[kNumTopColumns];
    bool moved = false;  // a counter of the row increased since start
  };

  void SetPorts(const v1::PortsResponse& ports);
  // The fabricscope_pfc_enabled gauges (Query.Series): a priority row whose
  // netdev and priority has a newest sample != 0 is shown even when idle.
  void SetPfcEnabled(const v1::SeriesResponse& gauges);
  // Show every priority row, idle or not (--all-priorities).
  void set_all_priorities(bool all) { all_priorities_ = all; }
  // At most this many rows rendered (0: every one).
  void set_limit(uint32_t limit) { limit_ = limit; }
  // The detector events active now (Query.Events with active_only).
  void SetActiveEvents(const v1::EventsResponse& events) { active_ = events; }
  // One refresh: `series` holds the samples of the last `window_ns` per column.
  void Update(TopColumn column, const v1::SeriesResponse& series, int64_t window_ns);
  // Starts a refresh: current values go back to 0 (peaks stay).
  void BeginRefresh();

  std::string RenderHuman(int64_t now_ns) const;
  std::string RenderJson(int64_t now_ns) const;
  size_t rows() const { return rows_.size(); }

 private:
  // Whether a row is rendered (see the file comment), before the limit.
  bool Shown(const Row& row) const;
  // The rows rendered, in key order; `hidden`: idle rows not shown;
  // `left_out`: shown rows beyond the limit.
  std::vector<const Row*> Visible(size_t* hidden, size_t* left_out) const;
  Row& RowFor(const v1::SeriesData& d);
  // "detector/kind" of the active events on a row's port (and its priority,
  // for events that have one).
  std::vector<std::string> ActiveOn(const Row& row) const;
  std::vector<v1::Port> ports_;
  v1::EventsResponse active_;
  std::set<std::pair<std::string, std::string>> pfc_enabled_;  // (netdev, priority)
  bool all_priorities_ = false;
  uint32_t limit_ = 0;
  std::map<std::tuple<std::string, uint32_t, std::string, std::string>, Row> rows_;
};

int RunTop(const CliContext& ctx, const std::vector<std::string>& args);

}  // namespace fabricscope::cli
