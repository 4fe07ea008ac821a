#include "daemon/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "collectors/registry.h"
#include "core/errors.h"
#include "core/options.h"
#include "daemon/correlate/correlator.h"
#include "daemon/detect/detector_registry.h"
#include "daemon/spans/span_kind.h"

namespace fabricscope {
namespace {

// One option as the parser and --help see it: its name (flag and config key),
// the value it takes, its help, who declares it, how its current value is
// rendered (the --help default; RestartOnlyChanges compares these) and how a
// value is parsed into a Config. The daemon's own options bind a spec
// (core/options.h) to a Config field; a plugin's (PluginOption) to the
// plugin's OptionValues in the Config.
struct Option {
  std::string name;
  std::string value_hint;  // e.g. "DURATION"; empty for a boolean flag
  std::string help;        // includes the allowed values
  bool reloadable;
  std::function<std::string(const Config&)> get;  // default rendering
  std::function<absl::Status(absl::string_view, Config*)> set;
  std::string owner = "daemon";  // or "detector NAME", "collector NAME"
};

constexpr bool kReloadable = true;  // takes effect on SIGHUP
constexpr bool kRestart = false;    // a reload keeps the running value

OptionReload ReloadOf(bool reloadable) {
  return reloadable ? OptionReload::kReloadable : OptionReload::kRestart;
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

// A daemon option: the spec's parser and renderer over a Config field (its
// default is the field's in a default Config: what `get` renders for
// Config{}).
template <typename Field>
Option Bind(Field field, OptionSpec spec) {
  using T = std::decay_t<decltype(Ref(std::declval<const Config&>(), field))>;
  return {
      spec.name,
      spec.hint,
      spec.help,
      spec.reloadable(),
      [field, render = spec.render](const Config& c) { return render(OptionValue(Ref(c, field))); },
      [field, parse = spec.parse](absl::string_view v, Config* c) -> absl::Status {
        absl::StatusOr<OptionValue> value = parse(v);
        if (!value.ok()) return value.status();
        Ref(*c, field) = std::get<T>(*std::move(value));
        return absl::OkStatus();
      }};
}

// A plugin's option: its spec over the plugin's values in the Config (a
// pointer to an OptionValues member of Config or of DetectorOptions).
template <typename Field>
Option PluginOption(const OptionSpec& spec, Field values, std::string owner) {
  return {spec.name,
          spec.hint,
          spec.help,
          spec.reloadable(),
          [spec, values](const Config& c) { return Ref(c, values).Render(spec); },
          [spec, values](absl::string_view v, Config* c) { return Ref(*c, values).Set(spec, v); },
          std::move(owner)};
}

// Every registered collector's options, in registration order.
std::vector<Option> CollectorPluginOptions() {
  std::vector<Option> out;
  for (const CollectorRegistry::Entry& e : BuiltinCollectors().entries()) {
    for (const OptionSpec& spec : e.options) {
      out.push_back(
          PluginOption(spec, &Config::collector_values, absl::StrCat("collector ", e.name)));
    }
  }
  return out;
}

// Every registered detector's options, in registration order.
std::vector<Option> DetectorPluginOptions() {
  std::vector<Option> out;
  for (const DetectorRegistry::Entry& e : BuiltinDetectors().entries()) {
    for (const OptionSpec& spec : e.detector.options) {
      out.push_back(
          PluginOption(spec, &DetectorOptions::values, absl::StrCat("detector ", e.name)));
    }
  }
  return out;
}

// The typed daemon options: the core/options.h builders bound to a Config
// field (a pointer to a member of Config or of DetectorOptions). Options with
// a syntax of their own (log-level, stall-thresholds, correlate-floors,
// replay-speed) are written out as an Option.
template <typename Field>
Option String(const char* name, const char* hint, std::string help, bool reloadable, Field field,
              OptionCheck<std::string> check = nullptr) {
  return Bind(field, option::String({name, {}}, hint, std::move(help), std::move(check),
                                    ReloadOf(reloadable)));
}
template <typename Field>
Option ListenAddress(const char* name, std::string help, bool reloadable, Field field) {
  return String(name, "HOST:PORT", std::move(help), reloadable, field,
                [](const std::string& v) { return ValidateListenAddress(v); });
}
template <typename Field>
Option Bool(const char* name, std::string help, bool reloadable, Field field) {
  return Bind(field, option::Bool({name, {}}, std::move(help), ReloadOf(reloadable)));
}
template <typename Field>
Option List(const char* name, std::string help, bool reloadable, Field field,
            OptionCheck<std::vector<std::string>> check = nullptr) {
  return Bind(field,
              option::List({name, {}}, std::move(help), std::move(check), ReloadOf(reloadable)));
}
template <typename Field>
Option Duration(const char* name, std::string help, bool reloadable, Field field) {
  return Bind(field, option::Duration({name, {}}, std::move(help), ReloadOf(reloadable)));
}
template <typename Field>
Option Integer(const char* name, absl::string_view help, bool reloadable, Field field, uint64_t lo,
               uint64_t hi) {
  return Bind(field, option::Integer({name, {}}, help, lo, hi, ReloadOf(reloadable)));
}
template <typename Field>
Option ByteSize(const char* name, std::string help, bool reloadable, Field field, uint64_t min,
                uint64_t max = UINT64_MAX) {
  return Bind(field, option::ByteSize({name, {}}, std::move(help), min, max, ReloadOf(reloadable)));
}
template <typename Field>
Option Number(const char* name, const char* hint, absl::string_view help, bool reloadable,
              Field field, NumberRange range) {
  return Bind(field,
              option::Number({name, {}}, hint, help, std::move(range), ReloadOf(reloadable)));
}

absl::Status CheckDetectorNames(const std::vector<std::string>& names) {
  DetectorOptions d;
  d.enabled = names;
  return d.Validate();
}

const std::vector<Option>& Options() {
  static const auto* options = [] {
    auto* list = new std::vector<Option>{
        String("sysfs-root", "DIR",
               "Root of the sysfs tree to read (a fake tree for tests and the simulator).",
               kRestart, &Config::sysfs_root,
               [](absl::string_view v) -> absl::Status {
                 if (v.empty())
                   return absl::InvalidArgumentError("must not be empty (a directory)");
                 return absl::OkStatus();
               }),
        ListenAddress(
            "metrics-listen",
            "Address of the Prometheus /metrics endpoint. Port 0 picks a free port (logged).",
            kRestart, &Config::metrics_listen),
        {"metrics-profile", "NAME",
         "What /metrics exports: full (every series) or fleet (only what the shipped Prometheus "
         "rules and Grafana dashboard read; deploy/README.md, Fleet scale).",
         kRestart,
         [](const Config& c) { return std::string(MetricsProfileName(c.metrics_profile)); },
         [](absl::string_view v, Config* c) -> absl::Status {
           auto p = ParseMetricsProfile(v);
           if (!p.ok()) return p.status();
           c->metrics_profile = *p;
           return absl::OkStatus();
         }},
        ListenAddress(
            "grpc-listen",
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
        Duration(
            "slow-interval",
            "Slow tier poll interval (IB PMA counters/: one firmware command per file on mlx5).",
            kRestart, &Config::slow_interval),
        Duration("config-interval",
                 "Config tier poll interval (PFC/ECN configuration, hw_counters lifespan).",
                 kRestart, &Config::config_interval),

        // Collectors.
        List("collectors",
             "Comma-separated collectors to enable; empty enables all (see --list-collectors).",
             kRestart, &Config::collectors),
        List("hot-counters",
             "Comma-separated hw_counters names read in the hot tier; the rest of hw_counters is "
             "read in the medium tier.",
             kRestart, &Config::hot_counters),
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
        // (Each collector's own options follow --dcb-dir: CollectorPluginOptions.)

        // Store.
        ByteSize(
            "store-memory",
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
        String(
            "nccl-inspector-dir", "DIR",
            "Tail the NCCL Inspector profiler plugin's dump files in DIR "
            "(NCCL_INSPECTOR_DUMP_DIR): every collective record becomes a collective span of its "
            "process (and its GPU, from the process's open /dev/nvidiaN), judged and correlated "
            "like any other; offsets are kept in --state-dir. Empty: off.",
            kRestart, &Config::nccl_inspector_dir),
        String("proc-root", "DIR",
               "Where processes are read (the host's /proc: a DaemonSet needs hostPID): their "
               "open /dev/nvidiaN and /dev/infiniband/uverbsN, their cgroups, and "
               "DIR/driver/nvidia/gpus/*/information (GPU UUIDs and minors).",
               kRestart, &Config::proc_root),
        String("kubernetes-socket", "PATH",
               "The kubelet's PodResources v1 socket: which pod and container holds which GPU, "
               "RDMA device and SR-IOV VF, polled every --config-interval (2s deadline); "
               "processes and spans are then attributed to pods. Runs when the socket exists at "
               "start, or when PATH is not the default; empty: off.",
               kRestart, &Config::kubernetes_socket),
        String("kubernetes-log-dir", "DIR",
               "The kubelet's log tree: DIR/pods/<namespace>_<pod>_<uid>/ and "
               "DIR/containers/<pod>_<namespace>_<container>-<id>.log name the pod and container "
               "behind a process's cgroup (pod UID, container id).",
               kRestart, &Config::kubernetes_log_dir),
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
        Integer(
            "correlate-queue",
            "Spans waiting for their window to be polled before the correlation worker counts "
            "them in the span aggregates (bounded; the worker stops reading the span store when "
            "full).",
            kRestart, &Config::correlate_queue, 1, 10000000),

        // Detectors (Config::detect).
        List("detectors",
             absl::StrCat("Comma-separated detectors to run: ",
                          absl::StrJoin(BuiltinDetectorNames(), ", "), "; empty runs none."),
             kRestart, &DetectorOptions::enabled, CheckDetectorNames),
        // (Each detector's own options follow --detectors: DetectorPluginOptions.)
        Integer("max-events", "Detector events kept in the event ring (oldest go first).", kRestart,
                &DetectorOptions::max_events, 1, 1000000),

        // Transport security.
        String(
            "grpc-tls-cert", "FILE",
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
        Bool(
            "allow-root",
            "Run as root. Without it the daemon refuses to start as root unless --user is given: "
            "no collector needs privileges (sysfs, rtnetlink and ethtool reads work unprivileged).",
            kRestart, &Config::allow_root),
        String("user", "NAME",
               "Started as root: switch to this user (its group and its own supplementary groups) "
               "once the listeners are bound. Empty: stay who we are.",
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
            "empty). DIR must be writable by the user the daemon runs as; it is created (0700) "
            "when missing. Empty: start empty.",
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
    // The plugins' options, each after the daemon option it belongs with.
    auto insert_after = [list](absl::string_view name, std::vector<Option> plugin) {
      auto at = std::find_if(list->begin(), list->end(),
                             [name](const Option& o) { return o.name == name; });
      list->insert(at + 1, plugin.begin(), plugin.end());
    };
    insert_after("dcb-dir", CollectorPluginOptions());
    insert_after("detectors", DetectorPluginOptions());
    return list;
  }();
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
  errno = 0;
  std::ifstream in(path);
  const std::string context = absl::StrCat("cannot read config file ", path);
  if (!in) {
    // The OS reason (No such file or directory, Permission denied, ...) and,
    // for a permission, which user asked.
    const int err = errno;
    absl::Status st = ErrnoToStatus(err, context);
    if (err != EACCES) return st;
    return absl::Status(st.code(),
                        absl::StrCat(st.message(), " (reading as uid ", ::geteuid(), ")"));
  }
  // A directory opens, and reads as nothing: not a config.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return ErrnoToStatus(EISDIR, context);
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return ErrnoToStatus(errno, context);
  return ss.str();
}

// Splits "--key=value" / "--key value" flags; returns (key, value, has_value).
struct Flag {
  std::string key;
  std::string value;
  bool has_value = false;
};

constexpr const char* kBoolFlags[] = {
    "help",        "version", "list-collectors", "dump-metrics-reference", "dump-options-reference",
    "explain-cost"};

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
  options.intervals = {config.hot_interval, config.medium_interval, config.slow_interval,
                       config.config_interval};
  options.values = config.collector_values;
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
    if (f.key == "dump-options-reference") cl.dump_options_reference = true;
    if (f.key == "explain-cost") cl.explain_cost = true;
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

std::vector<std::pair<std::string, std::string>> RenderedOptions(const Config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Option& o : Options()) out.emplace_back(o.name, o.get(config));
  return out;
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
                  "  --explain-cost\n      Discover the RDMA devices as the daemon would (with "
                  "the same flags), print the read plan and what each read costs the device "
                  "(queries and syscalls per second), and exit.\n"
                  "  --dump-metrics-reference\n      Print the metric reference (Markdown) and "
                  "exit.\n"
                  "  --dump-options-reference\n      Print the option reference (Markdown) and "
                  "exit.\n"
                  "  --version\n      Print the version and exit.\n"
                  "  --help\n      Print this help and exit.\n");
  return out;
}

std::string OptionsReference() {
  std::string out =
      "# Option reference\n\n"
      "Generated from the option declarations in the code by\n"
      "`fabricscoped --dump-options-reference`; do not edit by hand (a test fails when\n"
      "this file is stale; regenerate with `tools/update-metrics-reference.sh`).\n\n"
      "Every option is a flag (`--name=value`) and a config file key (`name = value`);\n"
      "flags win over the file. \"reload\" options take effect on SIGHUP, the others at\n"
      "the next start. \"declared by\" is where the option lives in the code: the\n"
      "daemon's own (daemon/config.cc), or a collector's or detector's, declared next\n"
      "to its code and registered with it (ARCHITECTURE.md, \"Adding a collector or a\n"
      "detector\").\n\n"
      "| option | value | default | reload | declared by | description |\n"
      "|---|---|---|---|---|---|\n";
  auto cell = [](absl::string_view text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); };
  Config defaults;
  for (const Option& o : Options()) {
    const std::string def = o.get(defaults);
    absl::StrAppend(
        &out, "| `--", o.name, "` | ", o.value_hint.empty() ? "true\\|false" : o.value_hint, " | ",
        def.empty() ? "\"\"" : absl::StrCat("`", cell(def), "`"), " | ",
        o.reloadable ? "reload" : "restart", " | ", o.owner, " | ", cell(o.help), " |\n");
  }
  return out;
}

}  // namespace fabricscope
