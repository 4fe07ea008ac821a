#include "daemon/config.h"

#include <fstream>
#include <regex>
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

struct Option {
  std::string name;
  std::string value_hint;  // e.g. "DURATION"; empty for a boolean flag
  std::string help;        // includes the allowed values
  bool reloadable;
  std::function<std::string(const Config&)> get;  // default rendering
  std::function<absl::Status(absl::string_view, Config*)> set;
};

std::string DurationText(absl::Duration d) { return absl::FormatDuration(d); }

std::string FormatBytes(uint64_t b) {
  if (b % (1ull << 30) == 0) return absl::StrCat(b >> 30, "GiB");
  if (b % (1ull << 20) == 0) return absl::StrCat(b >> 20, "MiB");
  if (b % (1ull << 10) == 0) return absl::StrCat(b >> 10, "KiB");
  return absl::StrCat(b);
}

std::vector<std::string> SplitList(absl::string_view v) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return out;
}

template <typename Field>
std::function<absl::Status(absl::string_view, Config*)> DurationSetter(Field field) {
  return [field](absl::string_view v, Config* c) -> absl::Status {
    auto d = ParsePositiveDuration(v);
    if (!d.ok()) return d.status();
    c->*field = *d;
    return absl::OkStatus();
  };
}

template <typename Field>
std::function<absl::Status(absl::string_view, Config*)> StringSetter(Field field) {
  return [field](absl::string_view v, Config* c) -> absl::Status {
    c->*field = std::string(v);
    return absl::OkStatus();
  };
}

// Detector options (Config::detect): a number within [lo, hi] or a duration.
Option DetectNumber(const char* name, const char* help, double DetectorOptions::*field, double lo,
                    double hi) {
  return {name,
          "NUMBER",
          absl::StrCat(help, " From ", lo, " to ", hi, "."),
          false,
          [field](const Config& c) { return absl::StrCat(c.detect.*field); },
          [field, lo, hi](absl::string_view v, Config* c) -> absl::Status {
            double f;
            if (!absl::SimpleAtod(v, &f) || !(f >= lo) || !(f <= hi)) {
              return absl::InvalidArgumentError(
                  absl::StrCat("expected a number from ", lo, " to ", hi));
            }
            c->detect.*field = f;
            return absl::OkStatus();
          }};
}

Option DetectDuration(const char* name, const char* help, absl::Duration DetectorOptions::*field) {
  return {name,
          "DURATION",
          help,
          false,
          [field](const Config& c) { return DurationText(c.detect.*field); },
          [field](absl::string_view v, Config* c) -> absl::Status {
            auto d = ParsePositiveDuration(v);
            if (!d.ok()) return d.status();
            c->detect.*field = *d;
            return absl::OkStatus();
          }};
}

Option DetectList(const char* name, const char* help,
                  std::vector<std::string> DetectorOptions::*field) {
  return {name,
          "LIST",
          help,
          false,
          [field](const Config& c) { return absl::StrJoin(c.detect.*field, ","); },
          [field](absl::string_view v, Config* c) -> absl::Status {
            DetectorOptions d = c->detect;
            d.*field = SplitList(v);
            if (auto s = d.Validate(); !s.ok()) return s;
            c->detect.*field = d.*field;
            return absl::OkStatus();
          }};
}

const std::vector<Option>& Options() {
  static const auto* options = new std::vector<Option>{
      {"sysfs-root", "DIR",
       "Root of the sysfs tree to read (a fake tree for tests and the simulator).", false,
       [](const Config& c) { return c.sysfs_root; },
       [](absl::string_view v, Config* c) -> absl::Status {
         if (v.empty()) return absl::InvalidArgumentError("must not be empty (a directory)");
         c->sysfs_root = std::string(v);
         return absl::OkStatus();
       }},
      {"metrics-listen", "HOST:PORT",
       "Address of the Prometheus /metrics endpoint. Port 0 picks a free port (logged).", false,
       [](const Config& c) { return c.metrics_listen; },
       [](absl::string_view v, Config* c) -> absl::Status {
         if (auto s = ValidateListenAddress(v); !s.ok()) return s;
         c->metrics_listen = std::string(v);
         return absl::OkStatus();
       }},
      {"grpc-listen", "HOST:PORT",
       "Address of the gRPC span ingest and query server. Loopback by default. Port 0 picks a "
       "free port (logged).",
       false, [](const Config& c) { return c.grpc_listen; },
       [](absl::string_view v, Config* c) -> absl::Status {
         if (auto s = ValidateListenAddress(v); !s.ok()) return s;
         c->grpc_listen = std::string(v);
         return absl::OkStatus();
       }},
      {"log-level", "LEVEL", "Log level: debug, info, warn or error.", true,
       [](const Config& c) { return std::string(LogLevelName(c.log_level)); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto l = ParseLogLevel(v);
         if (!l.ok()) return l.status();
         c->log_level = *l;
         return absl::OkStatus();
       }},
      {"hot-interval", "DURATION",
       "Hot tier poll interval (congestion hw_counters, netdev stats), e.g. 10ms.", false,
       [](const Config& c) { return DurationText(c.hot_interval); },
       DurationSetter(&Config::hot_interval)},
      {"medium-interval", "DURATION",
       "Medium tier poll interval (other hw_counters, ethtool). Equal to --hot-interval merges "
       "the two tiers.",
       false, [](const Config& c) { return DurationText(c.medium_interval); },
       DurationSetter(&Config::medium_interval)},
      {"slow-interval", "DURATION",
       "Slow tier poll interval (IB PMA counters/: one firmware command per file on mlx5).", false,
       [](const Config& c) { return DurationText(c.slow_interval); },
       DurationSetter(&Config::slow_interval)},
      {"config-interval", "DURATION",
       "Config tier poll interval (PFC/ECN configuration, hw_counters lifespan).", false,
       [](const Config& c) { return DurationText(c.config_interval); },
       DurationSetter(&Config::config_interval)},
      {"collectors", "LIST",
       "Comma-separated collectors to enable; empty enables all (see --list-collectors).", false,
       [](const Config& c) { return absl::StrJoin(c.collectors, ","); },
       [](absl::string_view v, Config* c) -> absl::Status {
         c->collectors = SplitList(v);
         return absl::OkStatus();
       }},
      {"hot-counters", "LIST",
       "Comma-separated hw_counters names read in the hot tier; the rest of hw_counters is read "
       "in the medium tier.",
       false, [](const Config& c) { return absl::StrJoin(c.hot_counters, ","); },
       [](absl::string_view v, Config* c) -> absl::Status {
         c->hot_counters = SplitList(v);
         return absl::OkStatus();
       }},
      {"netdev-include", "REGEX",
       "Extra network interfaces for the netdev collector (ECMAScript regex, full match), "
       "besides the netdevs of RDMA ports.",
       false, [](const Config& c) { return c.netdev_include; },
       [](absl::string_view v, Config* c) -> absl::Status {
         if (auto s = CheckRegexBounds(v); !s.ok()) return s;
         // The same compile the collectors' filter gets (collectors/netdev_filter.h).
         if (auto f = NetdevFilter::Compile(v); !f.ok()) return f.status();
         c->netdev_include = std::string(v);
         return absl::OkStatus();
       }},
      {"ethtool-dir", "DIR",
       "Read `ethtool -S` text files DIR/<netdev> instead of the ETHTOOL_GSTATS ioctl (tests, "
       "simulator). Empty uses the kernel.",
       false, [](const Config& c) { return c.ethtool_dir; }, StringSetter(&Config::ethtool_dir)},
      {"store-memory", "BYTES",
       "Memory budget of the sample store, e.g. 256MiB; never exceeded (oldest chunks are "
       "evicted).",
       false, [](const Config& c) { return FormatBytes(c.store_memory_bytes); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto b = ParseByteSize(v);
         if (!b.ok()) return b.status();
         if (*b < (1ull << 20)) return absl::InvalidArgumentError("must be at least 1MiB");
         c->store_memory_bytes = *b;
         return absl::OkStatus();
       }},
      {"peak-window", "DURATION",
       "Trailing window of the peak-rate and peak-pause-fraction gauges.", false,
       [](const Config& c) { return DurationText(c.peak_window); },
       DurationSetter(&Config::peak_window)},
      {"burst-factor", "FACTOR",
       "A poll interval is a microburst when its rate exceeds FACTOR times the trailing 1s mean "
       "(and the signal's floor). A number > 1.",
       true, [](const Config& c) { return absl::StrCat(c.burst_factor); },
       [](absl::string_view v, Config* c) -> absl::Status {
         double f;
         if (!absl::SimpleAtod(v, &f) || !(f > 1.0) || f > 1e6) {
           return absl::InvalidArgumentError("expected a number > 1");
         }
         c->burst_factor = f;
         return absl::OkStatus();
       }},
      {"max-span-age", "DURATION",
       "Spans that ended longer ago than DURATION are rejected at ingest (too_old) and evicted "
       "from the span store.",
       false, [](const Config& c) { return DurationText(c.max_span_age); },
       DurationSetter(&Config::max_span_age)},
      {"span-memory", "BYTES",
       "Memory budget of the span store, e.g. 64MiB; when full the oldest spans are evicted "
       "(counted). At least 1MiB.",
       false, [](const Config& c) { return FormatBytes(c.span_memory_bytes); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto b = ParseByteSize(v);
         if (!b.ok()) return b.status();
         if (*b < (1ull << 20)) return absl::InvalidArgumentError("must be at least 1MiB");
         c->span_memory_bytes = *b;
         return absl::OkStatus();
       }},
      {"max-spans-per-request", "N",
       "Spans in one ingest request (or stream message); a larger request fails with "
       "INVALID_ARGUMENT. 1 to 1000000.",
       false, [](const Config& c) { return absl::StrCat(c.max_spans_per_request); },
       [](absl::string_view v, Config* c) -> absl::Status {
         uint64_t n;
         if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 1000000) {
           return absl::InvalidArgumentError("expected an integer from 1 to 1000000");
         }
         c->max_spans_per_request = n;
         return absl::OkStatus();
       }},
      {"max-attributes-per-span", "N",
       "Attributes of one span; a span with more is rejected (too_many_attributes). 1 to 10000.",
       false, [](const Config& c) { return absl::StrCat(c.max_attributes_per_span); },
       [](absl::string_view v, Config* c) -> absl::Status {
         uint64_t n;
         if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 10000) {
           return absl::InvalidArgumentError("expected an integer from 1 to 10000");
         }
         c->max_attributes_per_span = n;
         return absl::OkStatus();
       }},
      {"max-attribute-bytes", "BYTES",
       "Key plus value length of one span attribute (and the span name); a span with a longer "
       "one is rejected (attribute_too_large). 16B to 1MiB.",
       false, [](const Config& c) { return FormatBytes(c.max_attribute_bytes); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto b = ParseByteSize(v);
         if (!b.ok()) return b.status();
         if (*b < 16 || *b > (1ull << 20)) {
           return absl::InvalidArgumentError("must be from 16 bytes to 1MiB");
         }
         c->max_attribute_bytes = *b;
         return absl::OkStatus();
       }},
      {"ingest-stream-idle-timeout", "DURATION",
       "An ingest stream that sends nothing for this long is cancelled (its slot freed).", false,
       [](const Config& c) { return DurationText(c.stream_idle_timeout); },
       DurationSetter(&Config::stream_idle_timeout)},
      {"span-kind-patterns", "LIST",
       "Span kind from the span name for spans without an explicit kind or fabricscope.kind "
       "attribute: REGEX=KIND entries separated by ';' (case-insensitive search, first match "
       "wins), tried before the built-in patterns for common inference span names. KIND: "
       "request, prefill, decode_step, kv_transfer, collective, other.",
       false, [](const Config& c) { return c.span_kind_patterns; },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto p = ParseSpanKindPatterns(v);
         if (!p.ok()) return p.status();
         c->span_kind_patterns = std::string(v);
         return absl::OkStatus();
       }},
      {"baseline-window", "DURATION",
       "Correlation baseline: a span's counter rates are compared with the DURATION before it.",
       false, [](const Config& c) { return DurationText(c.baseline_window); },
       DurationSetter(&Config::baseline_window)},
      {"stall-thresholds", "LIST",
       "Per span name, the duration at which a span counts as a stall (besides "
       "fabricscope.stall=true), e.g. \"decode_step=200ms,kv_transfer=1s\".",
       false, [](const Config& c) { return StallPolicy::Format(c.stall_thresholds); },
       [](absl::string_view v, Config* c) -> absl::Status {
         auto t = StallPolicy::Parse(v);
         if (!t.ok()) return t.status();
         c->stall_thresholds = *std::move(t);
         return absl::OkStatus();
       }},
      {"max-span-names", "N",
       "Distinct span names in the name label of the span aggregates; further names count as "
       "name=\"other\". 1 to 10000.",
       false, [](const Config& c) { return absl::StrCat(c.max_span_names); },
       [](absl::string_view v, Config* c) -> absl::Status {
         uint64_t n;
         if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 10000) {
           return absl::InvalidArgumentError("expected an integer from 1 to 10000");
         }
         c->max_span_names = n;
         return absl::OkStatus();
       }},
      {"correlate-rate-factor", "FACTOR",
       "A congestion signal is anomalous in a span when its rate is at least FACTOR times its "
       "baseline rate (and above its floor). A number >= 1.",
       false, [](const Config& c) { return absl::StrCat(c.correlate_rate_factor); },
       [](absl::string_view v, Config* c) -> absl::Status {
         double f;
         if (!absl::SimpleAtod(v, &f) || !(f >= 1.0) || f > 1e6) {
           return absl::InvalidArgumentError("expected a number >= 1");
         }
         c->correlate_rate_factor = f;
         return absl::OkStatus();
       }},
      {"correlate-pause-fraction", "FRACTION",
       "A port/priority paused for at least FRACTION of a span makes the span's verdict fabric. "
       "A number in (0, 1].",
       false, [](const Config& c) { return absl::StrCat(c.correlate_pause_fraction); },
       [](absl::string_view v, Config* c) -> absl::Status {
         double f;
         if (!absl::SimpleAtod(v, &f) || !(f > 0) || f > 1) {
           return absl::InvalidArgumentError("expected a number in (0, 1]");
         }
         c->correlate_pause_fraction = f;
         return absl::OkStatus();
       }},
      {"correlate-floors", "LIST",
       "Per signal class, the rate (events per second) below which it is never anomalous: "
       "CLASS=RATE pairs overriding the defaults shown. Classes: pause, pause_frames, "
       "pause_storm, ecn, cnp, discards, drops, retransmits, port_errors, xmit_wait, fec.",
       false,
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
      {"correlate-min-coverage", "FRACTION",
       "A span is clean only when every congestion series in its scope has samples covering at "
       "least FRACTION of it; otherwise unknown. A number in (0, 1].",
       false, [](const Config& c) { return absl::StrCat(c.correlate_min_coverage); },
       [](absl::string_view v, Config* c) -> absl::Status {
         double f;
         if (!absl::SimpleAtod(v, &f) || !(f > 0) || f > 1) {
           return absl::InvalidArgumentError("expected a number in (0, 1]");
         }
         c->correlate_min_coverage = f;
         return absl::OkStatus();
       }},
      {"correlate-queue", "N",
       "Spans waiting for their window to be polled before the correlation worker counts them in "
       "the span aggregates (bounded; the worker stops reading the span store when full). 1 to "
       "10000000.",
       false, [](const Config& c) { return absl::StrCat(c.correlate_queue); },
       [](absl::string_view v, Config* c) -> absl::Status {
         uint64_t n;
         if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 10000000) {
           return absl::InvalidArgumentError("expected an integer from 1 to 10000000");
         }
         c->correlate_queue = n;
         return absl::OkStatus();
       }},
      DetectList("detectors",
                 "Comma-separated detectors to run: pfc_storm, ecn_mistuning, microburst, "
                 "retransmit_spike, link_degradation; empty runs none.",
                 &DetectorOptions::enabled),
      DetectNumber("pfc-storm-fraction",
                   "PFC storm: a poll interval counts as stormy when the priority was paused for "
                   "at least this fraction of it.",
                   &DetectorOptions::pfc_storm_fraction, 0.01, 1),
      DetectDuration("pfc-storm-detection-time",
                     "PFC storm: stormy intervals must last this long before a storm is declared.",
                     &DetectorOptions::pfc_storm_detection),
      DetectDuration("pfc-storm-restoration-time",
                     "PFC storm: calm intervals must last this long before a storm ends.",
                     &DetectorOptions::pfc_storm_restoration),
      DetectList("microburst-signals",
                 "Signals whose microbursts (see --burst-factor) the microburst detector reports "
                 "as episodes (counter families without fabricscope_ and _total).",
                 &DetectorOptions::microburst_signals),
      DetectDuration("microburst-gap",
                     "Microbursts of one series closer than this belong to one episode.",
                     &DetectorOptions::microburst_gap),
      DetectDuration("ecn-window", "ECN mistuning: the trailing window the rates are taken over.",
                     &DetectorOptions::ecn_window),
      DetectDuration("ecn-detection-time",
                     "ECN mistuning: how long a condition must hold before it is reported.",
                     &DetectorOptions::ecn_detection),
      DetectDuration("ecn-restoration-time",
                     "ECN mistuning: how long a condition must be gone before the report ends.",
                     &DetectorOptions::ecn_restoration),
      DetectNumber("ecn-drop-floor",
                   "ECN marking too late: discards per second on the port at or above which "
                   "marking is judged.",
                   &DetectorOptions::ecn_drop_floor, 1e-3, 1e12),
      DetectNumber("ecn-mark-ratio",
                   "ECN marking too late: ECN marks + CNPs per discard below which marking is "
                   "flat.",
                   &DetectorOptions::ecn_mark_ratio, 0, 1e6),
      DetectNumber("ecn-cnp-floor",
                   "ECN too aggressive: CNPs per second (sent + handled) at or above which the "
                   "port is judged.",
                   &DetectorOptions::ecn_cnp_floor, 1e-3, 1e12),
      DetectNumber("ecn-low-utilization",
                   "ECN too aggressive: link utilization (of the port's rate) below which CNPs "
                   "are suspicious.",
                   &DetectorOptions::ecn_low_utilization, 0.001, 1),
      DetectDuration("retransmit-window", "Retransmit spike: the window of the judged rate.",
                     &DetectorOptions::retransmit_window),
      DetectDuration("retransmit-baseline",
                     "Retransmit spike: the trailing window of the baseline rate.",
                     &DetectorOptions::retransmit_baseline),
      DetectNumber("retransmit-floor",
                   "Retransmit spike: events per second at or above which a counter can spike.",
                   &DetectorOptions::retransmit_floor, 1e-3, 1e12),
      DetectNumber("retransmit-factor",
                   "Retransmit spike: the rate must be at least this multiple of the baseline.",
                   &DetectorOptions::retransmit_factor, 1, 1e6),
      DetectNumber("fec-corrected-factor",
                   "Link degradation: FEC corrected rate over 1s at least this multiple of its "
                   "baseline (--fec-baseline) is fec_corrected_rising.",
                   &DetectorOptions::fec_corrected_factor, 1, 1e9),
      DetectDuration("fec-baseline", "Link degradation: the baseline window of the FEC rate.",
                     &DetectorOptions::fec_baseline),
      DetectDuration("link-hold-time",
                     "Link degradation: error-counter increases closer than this are one episode.",
                     &DetectorOptions::link_hold),
      {"max-events", "N", "Detector events kept in the event ring (oldest go first). 1 to 1000000.",
       false, [](const Config& c) { return absl::StrCat(c.detect.max_events); },
       [](absl::string_view v, Config* c) -> absl::Status {
         uint64_t n;
         if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 1000000) {
           return absl::InvalidArgumentError("expected an integer from 1 to 1000000");
         }
         c->detect.max_events = n;
         return absl::OkStatus();
       }},
      {"grpc-tls-cert", "FILE",
       "PEM certificate (chain) of the gRPC server; with --grpc-tls-key, ingest and queries "
       "are served over TLS only. Empty: plain text.",
       false, [](const Config& c) { return c.grpc_tls_cert; },
       StringSetter(&Config::grpc_tls_cert)},
      {"grpc-tls-key", "FILE", "PEM private key of --grpc-tls-cert.", false,
       [](const Config& c) { return c.grpc_tls_key; }, StringSetter(&Config::grpc_tls_key)},
      {"grpc-tls-client-ca", "FILE",
       "PEM CA bundle: gRPC clients must present a certificate it signed (mutual TLS). Needs "
       "--grpc-tls-cert.",
       false, [](const Config& c) { return c.grpc_tls_client_ca; },
       StringSetter(&Config::grpc_tls_client_ca)},
      {"metrics-auth-file", "FILE",
       "\"user:password\" lines: /metrics requires HTTP basic auth (/healthz and /readyz stay "
       "open). Plain HTTP: terminate TLS in front of the daemon (see deploy/README.md). Empty: "
       "no auth.",
       false, [](const Config& c) { return c.metrics_auth_file; },
       StringSetter(&Config::metrics_auth_file)},
      {"allow-root", "",
       "Run as root. Without it the daemon refuses to start as root unless --user is given: "
       "no collector needs privileges (sysfs, rtnetlink and ethtool reads work unprivileged).",
       false, [](const Config& c) { return c.allow_root ? "true" : "false"; },
       [](absl::string_view v, Config* c) -> absl::Status {
         if (v == "true" || v.empty()) {
           c->allow_root = true;
         } else if (v == "false") {
           c->allow_root = false;
         } else {
           return absl::InvalidArgumentError("expected true or false");
         }
         return absl::OkStatus();
       }},
      {"user", "NAME",
       "Started as root: switch to this user (and its group, no supplementary groups) once the "
       "listeners are bound. Empty: stay who we are.",
       false, [](const Config& c) { return c.run_as_user; }, StringSetter(&Config::run_as_user)},
      {"replay", "FILE",
       "Replay a JSON Lines recording (docs/recording.md) instead of polling: samples go through "
       "the store and detectors, spans through correlation. Empty: poll the host.",
       false, [](const Config& c) { return c.replay_file; }, StringSetter(&Config::replay_file)},
      {"replay-speed", "X|max",
       "Replay pace: X times real time (a number > 0), or max (as fast as possible).", false,
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
      {"state-dir", "DIR",
       "Keep the store (samples, spans, detector events) across restarts: on SIGTERM it is "
       "written to DIR/snapshot and restored from there at the next start (a corrupt or "
       "truncated snapshot is reported, kept as DIR/snapshot.corrupt, and the daemon starts "
       "empty). DIR must be writable by the user the daemon runs as. Empty: start empty.",
       false, [](const Config& c) { return c.state_dir; }, StringSetter(&Config::state_dir)},
      {"state-save-timeout", "DURATION",
       "Longest time the snapshot on SIGTERM may take; past it the snapshot is abandoned (the "
       "previous one is not replaced) and the daemon exits.",
       false, [](const Config& c) { return DurationText(c.state_save_timeout); },
       DurationSetter(&Config::state_save_timeout)},
  };
  return *options;
}

const Option* FindOption(absl::string_view name) {
  for (const Option& o : Options()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

absl::Status SetOption(absl::string_view key, absl::string_view value, absl::string_view origin,
                       Config* config) {
  const Option* opt = FindOption(key);
  if (opt == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(origin, "unknown option \"", key, "\""));
  }
  absl::Status s = opt->set(value, config);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, "invalid value \"", value, "\" for ", key, ": ", s.message()));
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
    if (auto s = SetOption(f.key, f.value, "flag --", config); !s.ok()) return s;
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
  absl::StatusOr<NetdevFilter> include = NetdevFilter::Compile(config.netdev_include);
  if (!include.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("netdev-include: ", include.status().message()));
  }
  options.netdev_include = *std::move(include);
  options.hot_counters = config.hot_counters;
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
