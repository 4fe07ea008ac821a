// Daemon configuration: one table of options, settable from a config file and
// from flags; flags override the file.
//
// The config file holds one `key = value` per line (`key: value` is accepted
// too); keys are the flag names without the leading dashes; `#` starts a
// comment. Example:
//
//   # /etc/fabricscope/fabricscoped.conf
//   sysfs-root = /sys
//   hot-interval = 10ms
//   log-level = info
//
// Every option has a documented default (`fabricscoped --help`). An invalid
// value is an error that names the key and the allowed values; at startup it
// exits non-zero, on SIGHUP reload the old config stays in force.
//
// Options marked reloadable take effect on SIGHUP; the others need a restart
// and a reload that changes them logs so and keeps the running value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectors/collector.h"
#include "core/hot_counters.h"
#include "core/log.h"
#include "core/parse.h"
#include "daemon/detect/detector_options.h"
#include "exporters/metrics_profile.h"

namespace fabricscope {

// Where the kubelet serves PodResources v1 (its default --pod-resources path).
inline constexpr char kDefaultKubeletSocket[] = "/var/lib/kubelet/pod-resources/kubelet.sock";

struct Config {
  std::string config_file;  // --config (flag only)
  std::string sysfs_root = "/sys";
  std::string metrics_listen = "0.0.0.0:9478";
  std::string grpc_listen = "127.0.0.1:9479";
  // --metrics-profile: what /metrics exports (exporters/metrics_profile.h).
  MetricsProfile metrics_profile = MetricsProfile::kFull;
  LogLevel log_level = LogLevel::kInfo;

  // Scheduler tiers.
  absl::Duration hot_interval = absl::Milliseconds(10);
  absl::Duration medium_interval = absl::Milliseconds(100);
  absl::Duration slow_interval = absl::Seconds(1);
  absl::Duration config_interval = absl::Seconds(10);

  // Collectors: empty means every registered collector.
  std::vector<std::string> collectors;
  // rdma_sysfs hot set (hw_counters names read every hot tick).
  std::vector<std::string> hot_counters = DefaultHotCounters();  // core/hot_counters.h
  // netdev: extra interfaces (regex, full match) besides the RDMA netdevs.
  std::string netdev_include;
  // ethtool: read `ethtool -S` text files from this directory instead of the ioctl.
  std::string ethtool_dir;
  // dcb_config: read `dcb pfc show` text files from this directory instead of dcbnl.
  std::string dcb_dir;
  // The collectors' own options (--rdma-per-process, --lldpd-socket, ...:
  // each declares them with its registration, collectors/registry.h).
  OptionValues collector_values;

  // Store.
  uint64_t store_memory_bytes = 256ull << 20;
  absl::Duration peak_window = absl::Seconds(15);
  double burst_factor = 8.0;

  // Span ingest (daemon/ingest/span_validation.h documents the limits).
  absl::Duration max_span_age = absl::Hours(1);
  uint64_t span_memory_bytes = 64ull << 20;
  uint64_t max_spans_per_request = 10000;
  uint64_t max_attributes_per_span = 64;
  uint64_t max_attribute_bytes = 4096;
  std::string span_kind_patterns;
  absl::Duration stream_idle_timeout =
      absl::Seconds(10);  // "REGEX=KIND;..." tried before the defaults

  // Correlation (daemon/correlate/correlator.h documents the rules).
  absl::Duration baseline_window = absl::Seconds(10);
  std::vector<std::pair<std::string, absl::Duration>> stall_thresholds;
  // Learned stall detection (daemon/correlate/stall_learner.h).
  bool stall_learning = true;
  uint64_t stall_warmup = 200;
  uint64_t stall_window = 1000;
  double stall_median_factor = 2.0;
  double stall_spread_factor = 4.0;
  uint64_t stall_max_keys = 1024;
  // NCCL Inspector dump directory (daemon/ingest/nccl_inspector.h); empty: off.
  std::string nccl_inspector_dir;
  // The kubernetes source (daemon/kubernetes/kubernetes_source.h).
  std::string proc_root = "/proc";
  std::string kubernetes_socket = std::string(kDefaultKubeletSocket);
  std::string kubernetes_log_dir = "/var/log";
  uint64_t max_span_names = 100;
  double correlate_rate_factor = 3.0;
  double correlate_pause_fraction = 0.05;
  std::string correlate_floors;  // "class=rate,..." overrides of the built-in floors
  double correlate_min_coverage = 0.9;
  uint64_t correlate_queue = 65536;

  // Detectors (defaults: daemon/detect/detector_options.h; the detectors: detectors.h).
  DetectorOptions detect;

  // Transport security (empty: plain text, no auth).
  std::string grpc_tls_cert;
  std::string grpc_tls_key;
  std::string grpc_tls_client_ca;
  std::string metrics_auth_file;  // deprecated: web_config_file's basic_auth_users
  std::string web_config_file;

  // Privileges (daemon/privileges.h): refuse root unless allowed; or switch
  // to run_as_user after binding.
  bool allow_root = false;
  std::string run_as_user;

  // Replay (--replay FILE): feed a JSON Lines recording instead of polling.
  std::string replay_file;
  double replay_speed = 1.0;  // 0: as fast as possible ("max")

  // State across restarts (daemon/state/snapshot.h): empty: none.
  std::string state_dir;
  absl::Duration state_save_timeout = absl::Seconds(20);

  // Incident recordings (daemon/recording/incident_writer.h): empty: none.
  std::string incident_dir;
  absl::Duration incident_before = absl::Seconds(30);
  absl::Duration incident_after = absl::Seconds(30);
  absl::Duration incident_max_duration = absl::Minutes(5);
  uint64_t incident_dir_max_bytes = 1ull << 30;
};

// What the command line asked for besides configuration.
struct CommandLine {
  Config config;
  bool help = false;
  bool version = false;
  bool list_collectors = false;
  bool explain_cost = false;  // --explain-cost (daemon/explain_cost.h)
  bool dump_metrics_reference = false;
  bool dump_options_reference = false;
  // The raw flags, kept so that a SIGHUP reload can re-apply them over the
  // reloaded file (flags keep overriding the file).
  std::vector<std::string> flag_args;
};

// The options the collectors take, from the daemon's config; compiles the
// --netdev-include filter once. InvalidArgument naming `netdev-include` when
// it does not compile (only for a Config not built by ParseCommandLine).
absl::StatusOr<CollectorOptions> CollectorOptionsFromConfig(const Config& config);

// Parses argv: defaults, then the --config file if given, then the flags.
absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv);

// Re-reads `file` and re-applies `flag_args` over it (SIGHUP).
absl::StatusOr<Config> ReloadConfig(const std::string& file,
                                    const std::vector<std::string>& flag_args);

// Parses config-file text into `config` (exposed for tests).
absl::Status ApplyConfigText(absl::string_view text, absl::string_view origin, Config* config);

// The --help text, with every flag, its default and allowed values.
std::string HelpText();

// docs/options.md (--dump-options-reference): every option as a Markdown
// table row (name, value, default, reload class, who declares it, help).
std::string OptionsReference();

// Names of options whose value differs between `a` and `b` but that cannot
// change without a restart.
std::vector<std::string> RestartOnlyChanges(const Config& a, const Config& b);

// Every option (daemon, collector, detector) and its value in `config`,
// rendered as its flag takes it, in --help order (a recording's header).
std::vector<std::pair<std::string, std::string>> RenderedOptions(const Config& config);

}  // namespace fabricscope
