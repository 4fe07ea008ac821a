#include "daemon/config.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/correlate/correlator.h"
#include "daemon/spans/span_kind.h"

namespace fabricscope {
namespace {

// One option: its name (flag and config key), the value it takes, its help,
// how its current value is rendered (the --help default; RestartOnlyChanges
// compares these) and how a value is parsed into a Config.
struct Option {
  std::string name;
  std::string value_hint;  // e.g. "DURATION"; empty for a boolean flag
  std::string help;        // includes the allowed values
  bool reloadable;
  std::function<std::string(const Config&)> get;  // default rendering
  std::function<absl::Status(absl::string_view, Config*)> set;
};

constexpr bool kReloadable = true;  // takes effect on SIGHUP
constexpr bool kRestart = false;    // a reload keeps the running value

std::string DurationText(absl::Duration d) { return absl::FormatDuration(d); }

std::string FormatBytes(uint64_t b) {
  if (b % (1ull << 30) == 0) return absl::StrCat(b >> 30, "GiB");
  if (b % (1ull << 20) == 0) return absl::StrCat(b >> 20, "MiB");
  if (b % (1ull << 10) == 0) return absl::StrCat(b >> 10, "KiB");
  return absl::StrCat(b);
}

// FormatBytes for a message: "1MiB", "16 bytes".
std::string BytesText(uint64_t b) {
  std::string s = FormatBytes(b);
  return absl::ascii_isdigit(s.back()) ? absl::StrCat(s, " bytes") : s;
}

std::vector<std::string> SplitList(absl::string_view v) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return out;
}

// The field an option sets: a member of Config, or of Config::detect.
template <typename T>
T& Ref(Config& c, T Config::*field) {
  return c.*field;
}
template <typename T>
const T& Ref(const Config& c, T Config::*field) {
  return c.*field;
}
template <typename T>
T& Ref(Config& c, T DetectorOptions::*field) {
  return c.detect.*field;
}
template <typename T>
const T& Ref(const Config& c, T DetectorOptions::*field) {
  return c.detect.*field;
}

// Checks a value before it is stored; the message says what was expected.
using Validator = std::function<absl::Status(absl::string_view)>;

// The typed options. Each takes the option's name, its value hint where the
// type does not fix it (String, Number), its help and whether it is
// reloadable, then the Config field (a pointer to a member of Config or of
// DetectorOptions) and what bounds the value. Options with a syntax of their
// own (log-level, stall-thresholds, correlate-floors, replay-speed) are
// written out as an Option.

// Any string, or one `validate` accepts.
template <typename Field>
Option String(const char* name, const char* hint, std::string help, bool reloadable, Field field,
              Validator validate = nullptr) {
  return {name,
          hint,
          std::move(help),
          reloadable,
          [field](const Config& c) { return std::string(Ref(c, field)); },
          [field, validate](absl::string_view v, Config* c) -> absl::Status {
            if (validate) {
              if (auto s = validate(v); !s.ok()) return s;
            }
            Ref(*c, field) = std::string(v);
            return absl::OkStatus();
          }};
}

// HOST:PORT or [V6]:PORT (core/parse.h).
template <typename Field>
Option ListenAddress(const char* name, std::string help, bool reloadable, Field field) {
  return String(name, "HOST:PORT", std::move(help), reloadable, field, ValidateListenAddress);
}

// true or false; given bare (--name, or an empty value) it means true.
template <typename Field>
Option Bool(const char* name, std::string help, bool reloadable, Field field) {
  return {name,
          "",
          std::move(help),
          reloadable,
          [field](const Config& c) { return std::string(Ref(c, field) ? "true" : "false"); },
          [field](absl::string_view v, Config* c) -> absl::Status {
            if (v == "true" || v.empty()) {
              Ref(*c, field) = true;
            } else if (v == "false") {
              Ref(*c, field) = false;
            } else {
              return absl::InvalidArgumentError("expected true or false");
            }
            return absl::OkStatus();
          }};
}

// A comma-separated list (blanks around items dropped). With `validate`, the
// Config with the new list must pass it, else nothing changes.
template <typename Field>
Option List(const char* name, std::string help, bool reloadable, Field field,
            std::function<absl::Status(const Config&)> validate = nullptr) {
  return {name,
          "LIST",
          std::move(help),
          reloadable,
          [field](const Config& c) { return absl::StrJoin(Ref(c, field), ","); },
          [field, validate](absl::string_view v, Config* c) -> absl::Status {
            std::vector<std::string> list = SplitList(v);
            if (validate) {
              Config next = *c;
              Ref(next, field) = list;
              if (auto s = validate(next); !s.ok()) return s;
            }
            Ref(*c, field) = std::move(list);
            return absl::OkStatus();
          }};
}

// A finite duration > 0 ("10ms", "1s").
template <typename Field>
Option Duration(const char* name, std::string help, bool reloadable, Field field) {
  return {name,
          "DURATION",
          std::move(help),
          reloadable,
          [field](const Config& c) { return DurationText(Ref(c, field)); },
          [field](absl::string_view v, Config* c) -> absl::Status {
            auto d = ParsePositiveDuration(v);
            if (!d.ok()) return d.status();
            Ref(*c, field) = *d;
            return absl::OkStatus();
          }};
}

// An integer from `lo` to `hi`; the help gets " LO to HI." appended.
template <typename Field>
Option Integer(const char* name, absl::string_view help, bool reloadable, Field field, uint64_t lo,
               uint64_t hi) {
  return {name,
          "N",
          absl::StrCat(help, " ", lo, " to ", hi, "."),
          reloadable,
          [field](const Config& c) { return absl::StrCat(Ref(c, field)); },
          [field, lo, hi](absl::string_view v, Config* c) -> absl::Status {
            uint64_t n;
            if (!absl::SimpleAtoi(v, &n) || n < lo || n > hi) {
              return absl::InvalidArgumentError(
                  absl::StrCat("expected an integer from ", lo, " to ", hi));
            }
            Ref(*c, field) = n;
            return absl::OkStatus();
          }};
}

// A byte size ("256MiB", core/parse.h) of at least `min` (and at most `max`).
template <typename Field>
Option ByteSize(const char* name, std::string help, bool reloadable, Field field, uint64_t min,
                uint64_t max = std::numeric_limits<uint64_t>::max()) {
  return {name,
          "BYTES",
          std::move(help),
          reloadable,
          [field](const Config& c) { return FormatBytes(Ref(c, field)); },
          [field, min, max](absl::string_view v, Config* c) -> absl::Status {
            auto b = ParseByteSize(v);
            if (!b.ok()) return b.status();
            if (*b < min || *b > max) {
              return absl::InvalidArgumentError(
                  max == std::numeric_limits<uint64_t>::max()
                      ? absl::StrCat("must be at least ", BytesText(min))
                      : absl::StrCat("must be from ", BytesText(min), " to ", BytesText(max)));
            }
            Ref(*c, field) = *b;
            return absl::OkStatus();
          }};
}

// The numbers a Number option accepts: from `lo` (excluded when `lo_open`) to
// `hi`, what an error says was expected, and what the help appends.
struct NumberRange {
  double lo;
  bool lo_open;
  double hi;
  std::string expected;
  std::string help;

  bool Contains(double f) const { return (lo_open ? f > lo : f >= lo) && f <= hi; }
};

// [lo, hi]: "From LO to HI."
NumberRange Between(double lo, double hi) {
  return {lo, false, hi, absl::StrCat("a number from ", lo, " to ", hi),
          absl::StrCat("From ", lo, " to ", hi, ".")};
}
// (lo, hi], hi only a sanity bound: "A number > LO."
NumberRange Above(double lo, double hi) {
  return {lo, true, hi, absl::StrCat("a number > ", lo), absl::StrCat("A number > ", lo, ".")};
}
// [lo, hi], hi only a sanity bound: "A number >= LO."
NumberRange AtLeast(double lo, double hi) {
  return {lo, false, hi, absl::StrCat("a number >= ", lo), absl::StrCat("A number >= ", lo, ".")};
}
// (0, 1].
NumberRange Fraction() { return {0, true, 1, "a number in (0, 1]", "A number in (0, 1]."}; }

// A number in `range`; the help gets the range's text appended.
template <typename Field>
Option Number(const char* name, const char* hint, absl::string_view help, bool reloadable,
              Field field, NumberRange range) {
  std::string full_help = absl::StrCat(help, " ", range.help);
  return {name,
          hint,
          std::move(full_help),
          reloadable,
          [field](const Config& c) { return absl::StrCat(Ref(c, field)); },
          [field, range = std::move(range)](absl::string_view v, Config* c) -> absl::Status {
            double f;
            if (!absl::SimpleAtod(v, &f) || !range.Contains(f)) {
              return absl::InvalidArgumentError(absl::StrCat("expected ", range.expected));
            }
            Ref(*c, field) = f;
            return absl::OkStatus();
          }};
}

absl::Status ValidateDetectors(const Config& c) { return c.detect.Validate(); }

const std::vector<Option>& Options() {
  static const auto* options = new std::vector<Option>{
      String("sysfs-root", "DIR",
             "Root of the sysfs tree to read (a fake tree for tests and the simulator).", kRestart,
             &Config::sysfs_root,
             [](absl::string_view v) -> absl::Status {
               if (v.empty()) return absl::InvalidArgumentError("must not be empty (a directory)");
               return absl::OkStatus();
             }),
      ListenAddress(
          "metrics-listen",
          "Address of the Prometheus /metrics endpoint. Port 0 picks a free port (logged).",
          kRestart, &Config::metrics_listen),
      {"metrics-profile", "NAME",
       "What /metrics exports: full (every series) or fleet (only what the shipped Prometheus "
       "rules and Grafana dashboard read; deploy/README.md, Fleet scale).",
       kRestart, [](const Config& c) { return std::string(MetricsProfileName(c.metrics_profile)); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto p = ParseMetricsProfile(v);
         if (!p.ok()) return p.status();
         c->metrics_profile = *p;
         return absl::OkStatus();
       }},
      ListenAddress("grpc-listen",
                    "Address of the gRPC span ingest and query server. Loopback by default. Port 0 "
                    "picks a free port (logged).",
                    kRestart, &Config::grpc_listen),
      {"log-level", "LEVEL", "Log level: debug, info, warn or error.", kReloadable,
       [](const Config& c) { return std::string(LogLevelName(c.log_level)); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto l = ParseLogLevel(v);
         if (!l.ok()) return l.status();
         c->log_level = *l;
         return absl::OkStatus();
       }},

      // Scheduler tiers.
      Duration("hot-interval",
               "Hot tier poll interval (congestion hw_counters, netdev stats), e.g. 10ms.",
               kRestart, &Config::hot_interval),
      Duration("medium-interval",
               "Medium tier poll interval (other hw_counters, ethtool). Equal to --hot-interval "
               "merges the two tiers.",
               kRestart, &Config::medium_interval),
      Duration("slow-interval",
               "Slow tier poll interval (IB PMA counters/: one firmware command per file on mlx5).",
               kRestart, &Config::slow_interval),
      Duration("config-interval",
               "Config tier poll interval (PFC/ECN configuration, hw_counters lifespan).", kRestart,
               &Config::config_interval),

      // Collectors.
      List("collectors",
           "Comma-separated collectors to enable; empty enables all (see --list-collectors).",
           kRestart, &Config::collectors),
      List("hot-counters",
           "Comma-separated hw_counters names read in the hot tier; the rest of hw_counters is "
           "read in the medium tier.",
           kRestart, &Config::hot_counters),
      List("rdma-enable-optional-counters",
           "Comma-separated optional RDMA hw counters (e.g. mlx5 cc_rx_ce_pkts) the rdma_netlink "
           "collector enables on every port at discovery, in addition to those already enabled. "
           "Needs CAP_NET_ADMIN (e.g. systemd AmbientCapabilities=CAP_NET_ADMIN); without it "
           "the kernel refuses (counted as permission_denied). Empty changes nothing.",
           kRestart, &Config::rdma_enable_optional_counters),
      Bool("rdma-per-process",
           "Per-process RDMA QP counters: the rdma_netlink collector sets auto mode by PID on "
           "every port (each process's QPs get a counter object) and exports the top processes "
           "by retransmits/out-of-sequence per port, the rest as process=\"other\". Needs "
           "CAP_NET_ADMIN (e.g. systemd AmbientCapabilities=CAP_NET_ADMIN).",
           kRestart, &Config::rdma_per_process),
      String("netdev-include", "REGEX",
             "Extra network interfaces for the netdev collector (ECMAScript regex, full match), "
             "besides the netdevs of RDMA ports.",
             kRestart, &Config::netdev_include,
             [](absl::string_view v) -> absl::Status {
               if (auto s = CheckRegexBounds(v); !s.ok()) return s;
               // The same compile the collectors' filter gets (collectors/netdev_filter.h).
               return NetdevFilter::Compile(v).status();
             }),
      String("ethtool-dir", "DIR",
             "Read `ethtool -S` text files DIR/<netdev> instead of the ETHTOOL_GSTATS ioctl "
             "(tests, simulator). Empty uses the kernel.",
             kRestart, &Config::ethtool_dir),
      String("dcb-dir", "DIR",
             "Read each netdev's PFC configuration from DIR/<netdev> (`dcb pfc show dev "
             "<netdev>` text) instead of dcbnl (tests, simulator). Empty uses the kernel.",
             kRestart, &Config::dcb_dir),
      String("lldpd-socket", "PATH",
             "lldpd's control socket, read by the topology collector for LLDP neighbours (the "
             "daemon's user must be able to connect: root or group _lldpd). Empty disables LLDP.",
             kRestart, &Config::lldpd_socket),
      Bool("ib-mad-topology",
           "Ask each InfiniBand port's peer for its NodeDescription, NodeGUID and port number "
           "with directed-route SMPs (needs read-write access to /dev/infiniband/umad*).",
           kRestart, &Config::ib_mad_topology),
      String("topology-file", "FILE",
             "Link partners from a cabling inventory (docs/topology-file.md); re-read when it "
             "changes. Live LLDP/SMP answers win over it.",
             kRestart, &Config::topology_file),
      String("hwloc-xml", "FILE",
             "Load the PCI tree (GPU-NIC affinity) from this hwloc XML export instead of "
             "discovering the host (tests, offline analysis).",
             kRestart, &Config::hwloc_xml),

      // Store.
      ByteSize("store-memory",
               "Memory budget of the sample store, e.g. 256MiB; never exceeded (oldest chunks are "
               "evicted).",
               kRestart, &Config::store_memory_bytes, 1ull << 20),
      Duration("peak-window", "Trailing window of the peak-rate and peak-pause-fraction gauges.",
               kRestart, &Config::peak_window),
      Number("burst-factor", "FACTOR",
             "A poll interval is a microburst when its rate exceeds FACTOR times the trailing 1s "
             "mean (and the signal's floor).",
             kReloadable, &Config::burst_factor, Above(1, 1e6)),

      // Span ingest.
      Duration("max-span-age",
               "Spans that ended longer ago than DURATION are rejected at ingest (too_old) and "
               "evicted from the span store.",
               kRestart, &Config::max_span_age),
      ByteSize("span-memory",
               "Memory budget of the span store, e.g. 64MiB; when full the oldest spans are "
               "evicted (counted). At least 1MiB.",
               kRestart, &Config::span_memory_bytes, 1ull << 20),
      Integer("max-spans-per-request",
              "Spans in one ingest request (or stream message); a larger request fails with "
              "INVALID_ARGUMENT.",
              kRestart, &Config::max_spans_per_request, 1, 1000000),
      Integer("max-attributes-per-span",
              "Attributes of one span; a span with more is rejected (too_many_attributes).",
              kRestart, &Config::max_attributes_per_span, 1, 10000),
      ByteSize("max-attribute-bytes",
               "Key plus value length of one span attribute (and the span name); a span with a "
               "longer one is rejected (attribute_too_large). 16B to 1MiB.",
               kRestart, &Config::max_attribute_bytes, 16, 1ull << 20),
      Duration("ingest-stream-idle-timeout",
               "An ingest stream that sends nothing for this long is cancelled (its slot freed).",
               kRestart, &Config::stream_idle_timeout),
      String("nccl-inspector-dir", "DIR",
             "Tail the NCCL Inspector profiler plugin's dump files in DIR "
             "(NCCL_INSPECTOR_DUMP_DIR): every collective record becomes a collective span of its "
             "process (and its GPU, from the process's open /dev/nvidiaN), judged and correlated "
             "like any other; offsets are kept in --state-dir. Empty: off.",
             kRestart, &Config::nccl_inspector_dir),
      String("span-kind-patterns", "LIST",
             "Span kind from the span name for spans without an explicit kind or "
             "fabricscope.kind attribute: REGEX=KIND entries separated by ';' (case-insensitive "
             "search, first match wins), tried before the built-in patterns for common inference "
             "span names. KIND: request, prefill, decode_step, kv_transfer, collective, other.",
             kRestart, &Config::span_kind_patterns,
             [](absl::string_view v) { return ParseSpanKindPatterns(v).status(); }),

      // Correlation.
      Duration("baseline-window",
               "Correlation baseline: a span's counter rates are compared with the DURATION "
               "before it.",
               kRestart, &Config::baseline_window),
      {"stall-thresholds", "LIST",
       "Per span name, the duration at which a span counts as a stall (besides "
       "fabricscope.stall=true), e.g. \"decode_step=200ms,kv_transfer=1s\"; wins over the "
       "learned bound for those names.",
       kRestart, [](const Config& c) { return StallPolicy::Format(c.stall_thresholds); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto t = StallPolicy::Parse(v);
         if (!t.ok()) return t.status();
         c->stall_thresholds = *std::move(t);
         return absl::OkStatus();
       }},
      Bool("stall-learning",
           "Learn which spans are stalls: per key (service and kind; GenAI requests: service "
           "and model, by time per output token; collectives: communicator, collective and "
           "message size, by time per byte) a span whose cost reaches max(median-factor x p50, "
           "p50 x (p75 / p50)^spread-factor) of the key's recent spans is a stall. "
           "--stall-thresholds still win for the names they list.",
           kRestart, &Config::stall_learning),
      Integer("stall-warmup",
              "Spans of a key learned before its learned stall bound applies (no stall is "
              "learned from fewer).",
              kRestart, &Config::stall_warmup, 10, 1000000),
      Integer("stall-window",
              "Spans per epoch of a key's sliding window (the bound is learned from the last "
              "N to 2N spans of the key).",
              kRestart, &Config::stall_window, 10, 1000000),
      Number("stall-median-factor", "FACTOR",
             "A learned stall costs at least FACTOR times its key's median.", kRestart,
             &Config::stall_median_factor, AtLeast(1, 1e6)),
      Number("stall-spread-factor", "FACTOR",
             "A learned stall costs at least the key's median times (p75 / p50)^FACTOR: FACTOR "
             "upper-quartile spreads above the median, in log terms.",
             kRestart, &Config::stall_spread_factor, AtLeast(0, 1e6)),
      Integer("stall-max-keys",
              "Keys the stall learner learns; spans of further keys are judged by "
              "fabricscope.stall and --stall-thresholds only (counted).",
              kRestart, &Config::stall_max_keys, 1, 100000),
      Integer("max-span-names",
              "Distinct span names in the name label of the span aggregates; further names count "
              "as name=\"other\".",
              kRestart, &Config::max_span_names, 1, 10000),
      Number("correlate-rate-factor", "FACTOR",
             "A congestion signal is anomalous in a span when its rate is at least FACTOR times "
             "its baseline rate (and above its floor).",
             kRestart, &Config::correlate_rate_factor, AtLeast(1, 1e6)),
      Number("correlate-pause-fraction", "FRACTION",
             "A port/priority paused for at least FRACTION of a span makes the span's verdict "
             "fabric.",
             kRestart, &Config::correlate_pause_fraction, Fraction()),
      {"correlate-floors", "LIST",
       "Per signal class, the rate (events per second) below which it is never anomalous: "
       "CLASS=RATE pairs overriding the defaults shown. Classes: pause, pause_frames, "
       "pause_storm, ecn, cnp, discards, drops, retransmits, port_errors, xmit_wait, fec.",
       kRestart,
       [](const Config& c) {
         auto floors = CorrelationOptions::DefaultFloors();
         (void)ParseFloors(c.correlate_floors, &floors);
         return FormatFloors(floors);
       },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto floors = CorrelationOptions::DefaultFloors();
         if (auto s = ParseFloors(v, &floors); !s.ok()) return s;
         c->correlate_floors = std::string(v);
         return absl::OkStatus();
       }},
      Number("correlate-min-coverage", "FRACTION",
             "A congestion series whose samples cover less than FRACTION of a span is blind for "
             "it: listed as a caveat, not judged (a span is unknown when nothing in its scope is "
             "sighted or a port's whole congestion group is blind).",
             kRestart, &Config::correlate_min_coverage, Fraction()),
      Integer("correlate-queue",
              "Spans waiting for their window to be polled before the correlation worker counts "
              "them in the span aggregates (bounded; the worker stops reading the span store when "
              "full).",
              kRestart, &Config::correlate_queue, 1, 10000000),

      // Detectors (Config::detect).
      List("detectors",
           absl::StrCat("Comma-separated detectors to run: ",
                        absl::StrJoin(BuiltinDetectorNames(), ", "), "; empty runs none."),
           kRestart, &DetectorOptions::enabled, ValidateDetectors),
      Number("pfc-storm-fraction", "NUMBER",
             "PFC storm: a poll interval counts as stormy when the priority was paused for at "
             "least this fraction of it.",
             kRestart, &DetectorOptions::pfc_storm_fraction, Between(0.01, 1)),
      Duration("pfc-storm-detection-time",
               "PFC storm: stormy intervals must last this long before a storm is declared.",
               kRestart, &DetectorOptions::pfc_storm_detection),
      Duration("pfc-storm-restoration-time",
               "PFC storm: calm intervals must last this long before a storm ends.", kRestart,
               &DetectorOptions::pfc_storm_restoration),
      Number("pause-role-fraction", "NUMBER",
             "Pause roles (fabricscope_pfc_pause_role): a priority's tx (originator) or rx "
             "(receiver) pause fraction of a poll interval at or above which the role holds.",
             kRestart, &DetectorOptions::pause_role_fraction, Between(0.01, 1)),
      Number("pause-role-clear-fraction", "NUMBER",
             "Pause roles: an originator's own rx pause fraction must stay below this (a port "
             "paused itself is a victim passing pause on, not an origin).",
             kRestart, &DetectorOptions::pause_role_clear_fraction, Between(0, 1)),
      Duration("pause-role-detection-time",
               "Pause roles: how long the condition must hold before the role is reported.",
               kRestart, &DetectorOptions::pause_role_detection),
      Duration("pause-role-restoration-time",
               "Pause roles: how long the condition must be gone before the role ends.", kRestart,
               &DetectorOptions::pause_role_restoration),
      List("microburst-signals",
           "Signals whose microbursts (see --burst-factor) the microburst detector reports as "
           "episodes (counter families without fabricscope_ and _total); one port's "
           "simultaneous bursts are one event. ECN-mark/CNP bursts (ecn_marked_packets, "
           "cnp_sent, cnp_handled) are DCQCN reacting: events only when the port's pause "
           "frames or discards rose with them.",
           kRestart, &DetectorOptions::microburst_signals, ValidateDetectors),
      Duration("microburst-gap",
               "Microbursts of one series closer than this belong to one episode.", kRestart,
               &DetectorOptions::microburst_gap),
      Duration("ecn-window", "ECN mistuning: the trailing window the rates are taken over.",
               kRestart, &DetectorOptions::ecn_window),
      Duration("ecn-detection-time",
               "ECN mistuning: how long a condition must hold before it is reported.", kRestart,
               &DetectorOptions::ecn_detection),
      Duration("ecn-restoration-time",
               "ECN mistuning: how long a condition must be gone before the report ends.", kRestart,
               &DetectorOptions::ecn_restoration),
      Number("ecn-drop-floor", "NUMBER",
             "ECN marking too late: discards per second on the port at or above which marking is "
             "judged.",
             kRestart, &DetectorOptions::ecn_drop_floor, Between(1e-3, 1e12)),
      Number("ecn-mark-ratio", "NUMBER",
             "ECN marking too late: ECN marks + CNPs per discard below which marking is flat.",
             kRestart, &DetectorOptions::ecn_mark_ratio, Between(0, 1e6)),
      Number("ecn-cnp-floor", "NUMBER",
             "ECN too aggressive: CNPs per second (sent + handled) at or above which the port is "
             "judged.",
             kRestart, &DetectorOptions::ecn_cnp_floor, Between(1e-3, 1e12)),
      Number("ecn-low-utilization", "NUMBER",
             "ECN too aggressive: link utilization (of the port's rate) below which CNPs are "
             "suspicious.",
             kRestart, &DetectorOptions::ecn_low_utilization, Between(0.001, 1)),
      Duration("retransmit-window", "Retransmit spike: the window of the judged rate.", kRestart,
               &DetectorOptions::retransmit_window),
      Duration("retransmit-baseline", "Retransmit spike: the trailing window of the baseline rate.",
               kRestart, &DetectorOptions::retransmit_baseline),
      Number("retransmit-floor", "NUMBER",
             "Retransmit spike: events per second at or above which a counter can spike.", kRestart,
             &DetectorOptions::retransmit_floor, Between(1e-3, 1e12)),
      Number("retransmit-factor", "NUMBER",
             "Retransmit spike: the rate must be at least this multiple of the baseline.", kRestart,
             &DetectorOptions::retransmit_factor, Between(1, 1e6)),
      Number("fec-corrected-factor", "NUMBER",
             "Link degradation: FEC corrected rate over 1s at least this multiple of its baseline "
             "(--fec-baseline) is fec_corrected_rising.",
             kRestart, &DetectorOptions::fec_corrected_factor, Between(1, 1e9)),
      Duration("fec-baseline", "Link degradation: the baseline window of the FEC rate.", kRestart,
               &DetectorOptions::fec_baseline),
      Duration("link-hold-time",
               "Link degradation: error-counter increases closer than this are one episode.",
               kRestart, &DetectorOptions::link_hold),
      Integer("max-events", "Detector events kept in the event ring (oldest go first).", kRestart,
              &DetectorOptions::max_events, 1, 1000000),

      // Transport security.
      String("grpc-tls-cert", "FILE",
             "PEM certificate (chain) of the gRPC server; with --grpc-tls-key, ingest and queries "
             "are served over TLS only. Empty: plain text.",
             kRestart, &Config::grpc_tls_cert),
      String("grpc-tls-key", "FILE", "PEM private key of --grpc-tls-cert.", kRestart,
             &Config::grpc_tls_key),
      String("grpc-tls-client-ca", "FILE",
             "PEM CA bundle: gRPC clients must present a certificate it signed (mutual TLS). "
             "Needs --grpc-tls-cert.",
             kRestart, &Config::grpc_tls_client_ca),
      String("web.config.file", "FILE",
             "Exporter-toolkit web config (YAML, as node_exporter's): tls_server_config "
             "(HTTPS, client certificates), basic_auth_users (bcrypt) and "
             "http_server_config.headers for /metrics, /healthz and /readyz (the probes need "
             "no credentials). SIGHUP re-reads the file; a bad file keeps the running "
             "settings. Empty: plain HTTP, no auth.",
             kRestart, &Config::web_config_file),
      String("metrics-auth-file", "FILE",
             "Deprecated (removed in the next release): use --web.config.file's "
             "basic_auth_users. \"user:password\" lines: /metrics requires HTTP basic auth. "
             "Empty: no auth.",
             kRestart, &Config::metrics_auth_file),

      // Privileges.
      Bool("allow-root",
           "Run as root. Without it the daemon refuses to start as root unless --user is given: "
           "no collector needs privileges (sysfs, rtnetlink and ethtool reads work unprivileged).",
           kRestart, &Config::allow_root),
      String(
          "user", "NAME",
          "Started as root: switch to this user (its group and its own supplementary groups) once "
          "the listeners are bound. Empty: stay who we are.",
          kRestart, &Config::run_as_user),

      // Replay.
      String("replay", "FILE",
             "Replay a JSON Lines recording (docs/recording.md) instead of polling: samples go "
             "through the store and detectors, spans through correlation. Empty: poll the host.",
             kRestart, &Config::replay_file),
      {"replay-speed", "X|max",
       "Replay pace: X times real time (a number > 0), or max (as fast as possible).", kRestart,
       [](const Config& c) {
         return c.replay_speed == 0 ? std::string("max") : absl::StrCat(c.replay_speed);
       },
       [](absl::string_view v, Config* c) -> absl::Status {
         if (v == "max") {
           c->replay_speed = 0;
           return absl::OkStatus();
         }
         double f;
         if (!absl::SimpleAtod(v, &f) || !(f > 0) || f > 1e6) {
           return absl::InvalidArgumentError("expected a number > 0 or max");
         }
         c->replay_speed = f;
         return absl::OkStatus();
       }},

      // State across restarts.
      String(
          "state-dir", "DIR",
          "Keep the store (samples, spans, detector events) across restarts: on SIGTERM it is "
          "written to DIR/snapshot and restored from there at the next start (a corrupt or "
          "truncated snapshot is reported, kept as DIR/snapshot.corrupt, and the daemon starts "
          "empty). DIR must be writable by the user the daemon runs as; it is created (0700) when "
          "missing. Empty: start empty.",
          kRestart, &Config::state_dir),
      Duration("state-save-timeout",
               "Longest time the snapshot on SIGTERM may take; past it the snapshot is abandoned "
               "(the previous one is not replaced) and the daemon exits.",
               kRestart, &Config::state_save_timeout),

      // Incident recordings.
      String("incident-dir", "DIR",
             "Write a recording (docs/recording.md) of every detector episode to DIR: its port's "
             "series and the spans in scope, from --incident-before before it started to "
             "--incident-after after it ended; overlapping episodes on one port share one. "
             "`fabricscope incidents --dir=DIR` lists them, `fabricscope analyze FILE` reads "
             "one. Created (0700) when missing; write errors are logged and counted, never "
             "fatal. Empty: none.",
             kRestart, &Config::incident_dir),
      Duration("incident-before", "How much before an episode's start its recording begins.",
               kRestart, &Config::incident_before),
      Duration("incident-after",
               "How much after an episode's end its recording ends (and so how long after the "
               "end it is written).",
               kRestart, &Config::incident_after),
      Duration("incident-max-duration",
               "An episode still active this long after it started is recorded then, up to that "
               "instant (once: its later end writes nothing more).",
               kRestart, &Config::incident_max_duration),
      ByteSize("incident-dir-max",
               "Most bytes of recordings kept in --incident-dir: after each write the oldest are "
               "deleted until the rest fit (counted in fabricscope_incidents_deleted_total).",
               kRestart, &Config::incident_dir_max_bytes, 1ull << 20),
  };
  return *options;
}

const Option* FindOption(absl::string_view name) {
  for (const Option& o : Options()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

// `origin` is where the setting came from: kFlagOrigin for the command line
// (the error then reads `invalid value "0" for flag --hot-interval: ...`),
// else "FILE:LINE: " (`FILE:LINE: invalid value "0" for hot-interval: ...`).
constexpr absl::string_view kFlagOrigin = "flag";

absl::Status SetOption(absl::string_view key, absl::string_view value, absl::string_view origin,
                       Config* config) {
  const bool flag = origin == kFlagOrigin;
  const std::string prefix = flag ? "" : std::string(origin);
  const std::string name = flag ? absl::StrCat("flag --", key) : std::string(key);
  const Option* opt = FindOption(key);
  if (opt == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "unknown option \"", name, "\""));
  }
  absl::Status s = opt->set(value, config);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "invalid value \"", value, "\" for ", name, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read config file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Splits "--key=value" / "--key value" flags; returns (key, value, has_value).
struct Flag {
  std::string key;
  std::string value;
  bool has_value = false;
};

constexpr const char* kBoolFlags[] = {"help", "version", "list-collectors",
                                      "dump-metrics-reference"};

bool IsBoolFlag(absl::string_view k) {
  for (const char* b : kBoolFlags) {
    if (k == b) return true;
  }
  return false;
}

absl::StatusOr<std::vector<Flag>> SplitFlags(const std::vector<std::string>& args) {
  std::vector<Flag> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view a = args[i];
    if (!absl::ConsumePrefix(&a, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", args[i], "\" (flags look like --name=value)"));
    }
    Flag f;
    size_t eq = a.find('=');
    if (eq != absl::string_view::npos) {
      f.key = std::string(a.substr(0, eq));
      f.value = std::string(a.substr(eq + 1));
      f.has_value = true;
    } else {
      f.key = std::string(a);
      if (!IsBoolFlag(f.key) && f.key != "config" && FindOption(f.key) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unknown flag --", f.key, " (see --help)"));
      }
      if (const Option* o = FindOption(f.key); o != nullptr && o->value_hint.empty()) {
        f.value = "true";  // a boolean option given bare: --allow-root
        f.has_value = true;
      } else if (!IsBoolFlag(f.key)) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrCat("flag --", f.key, " needs a value"));
        }
        f.value = args[++i];
        f.has_value = true;
      }
    }
    flags.push_back(std::move(f));
  }
  return flags;
}

absl::Status ApplyFlags(const std::vector<Flag>& flags, Config* config) {
  for (const Flag& f : flags) {
    if (IsBoolFlag(f.key) || f.key == "config") continue;
    if (FindOption(f.key) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", f.key, " (see --help)"));
    }
    if (auto s = SetOption(f.key, f.value, kFlagOrigin, config); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<Config> Build(const std::string& file, const std::vector<Flag>& flags) {
  Config config;
  if (!file.empty()) {
    auto text = ReadFile(file);
    if (!text.ok()) return text.status();
    if (auto s = ApplyConfigText(*text, file, &config); !s.ok()) return s;
  }
  if (auto s = ApplyFlags(flags, &config); !s.ok()) return s;
  config.config_file = file;
  return config;
}

}  // namespace

absl::StatusOr<CollectorOptions> CollectorOptionsFromConfig(const Config& config) {
  CollectorOptions options;
  options.sysfs_root = config.sysfs_root;
  options.ethtool_dir = config.ethtool_dir;
  options.dcb_dir = config.dcb_dir;
  absl::StatusOr<NetdevFilter> include = NetdevFilter::Compile(config.netdev_include);
  if (!include.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("netdev-include: ", include.status().message()));
  }
  options.netdev_include = *std::move(include);
  options.hot_counters = config.hot_counters;
  options.rdma_enable_optional_counters = config.rdma_enable_optional_counters;
  options.rdma_per_process = config.rdma_per_process;
  options.lldpd_socket = config.lldpd_socket;
  options.ib_mad_topology = config.ib_mad_topology;
  options.topology_file = config.topology_file;
  options.hwloc_xml = config.hwloc_xml;
  return options;
}

absl::Status ApplyConfigText(absl::string_view text, absl::string_view origin, Config* config) {
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    size_t sep = line.find_first_of("=:");
    if (sep == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ":", line_no, ": expected \"key = value\", got \"", line, "\""));
    }
    absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, sep));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(sep + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "config") {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ":", line_no, ": \"config\" is only valid as a flag"));
    }
    if (auto s = SetOption(key, value, absl::StrCat(origin, ":", line_no, ": "), config); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv) {
  CommandLine cl;
  for (int i = 1; i < argc; ++i) cl.flag_args.emplace_back(argv[i]);
  auto flags = SplitFlags(cl.flag_args);
  if (!flags.ok()) return flags.status();
  std::string file;
  for (const Flag& f : *flags) {
    if (f.key == "help") cl.help = true;
    if (f.key == "version") cl.version = true;
    if (f.key == "list-collectors") cl.list_collectors = true;
    if (f.key == "dump-metrics-reference") cl.dump_metrics_reference = true;
    if (IsBoolFlag(f.key) && f.has_value) {
      return absl::InvalidArgumentError(absl::StrCat("flag --", f.key, " takes no value"));
    }
    if (f.key == "config") {
      if (f.value.empty()) return absl::InvalidArgumentError("flag --config needs a file name");
      file = f.value;
    }
  }
  if (cl.help || cl.version) return cl;
  auto config = Build(file, *flags);
  if (!config.ok()) return config.status();
  cl.config = *std::move(config);
  return cl;
}

absl::StatusOr<Config> ReloadConfig(const std::string& file,
                                    const std::vector<std::string>& flag_args) {
  auto flags = SplitFlags(flag_args);
  if (!flags.ok()) return flags.status();
  return Build(file, *flags);
}

std::vector<std::string> RestartOnlyChanges(const Config& a, const Config& b) {
  std::vector<std::string> changed;
  for (const Option& o : Options()) {
    if (!o.reloadable && o.get(a) != o.get(b)) changed.push_back(o.name);
  }
  return changed;
}

std::string HelpText() {
  std::string out =
      "fabricscoped - per-host RDMA fabric telemetry daemon\n\n"
      "Usage: fabricscoped [--config=FILE] [--flag=value ...]\n\n"
      "Flags override the config file; the file takes the same names without dashes,\n"
      "one \"name = value\" per line. SIGHUP reloads the file (options marked\n"
      "[reloadable] take effect; others need a restart). SIGTERM stops the daemon.\n\n"
      "  --config=FILE\n      Config file to read (default: none).\n";
  Config defaults;
  for (const Option& o : Options()) {
    std::string def = o.get(defaults);
    absl::StrAppend(&out, "  --", o.name, o.value_hint.empty() ? "[=true|false]" : "=",
                    o.value_hint, "\n      ", o.help, o.reloadable ? " [reloadable]" : "",
                    "\n      (default: ", def.empty() ? "\"\"" : def, ")\n");
  }
  absl::StrAppend(&out,
                  "  --list-collectors\n      Print the registered collectors and exit.\n"
                  "  --dump-metrics-reference\n      Print the metric reference (Markdown) and "
                  "exit.\n"
                  "  --version\n      Print the version and exit.\n"
                  "  --help\n      Print this help and exit.\n");
  return out;
}

}  // namespace fabricscope
