#include "daemon/daemon.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/privileges.h"
#include "daemon/state/snapshot.h"
#include "daemon/version.h"

namespace fabricscope {
namespace {

const MetricSpec& kBuildInfo =
    DefineMetric({.name = "fabricscope_build_info",
                  .type = MetricType::kGauge,
                  .help = "Always 1; the daemon's version and source revision are labels.",
                  .labels = {"version", "revision"},
                  .component = "daemon"});
const MetricSpec& kStartTime = DefineMetric({.name = "fabricscope_start_time_seconds",
                                             .type = MetricType::kGauge,
                                             .help = "Unix time the daemon started.",
                                             .labels = {},
                                             .component = "daemon"});
const MetricSpec& kReloads = DefineMetric(
    {.name = "fabricscope_config_reloads_total",
     .type = MetricType::kCounter,
     .help = "SIGHUP config reloads by result (success, failure: the old config stays).",
     .labels = {"result"},
     .component = "daemon"});

const MetricSpec& kStateRestored = DefineMetric(
    {.name = "fabricscope_state_restored",
     .type = MetricType::kGauge,
     .help = "What the start restored from the --state-dir snapshot, by kind (series, samples, "
             "spans, events); 0 when nothing was restored.",
     .labels = {"kind"},
     .component = "daemon"});
const MetricSpec& kStateRejected = DefineMetric(
    {.name = "fabricscope_state_snapshot_rejected_total",
     .type = MetricType::kCounter,
     .help = "State snapshots refused at start (the daemon started empty), by reason: io, "
             "format, version, checksum, truncated, too_large.",
     .labels = {"reason"},
     .component = "daemon"});

std::string SnapshotPath(const std::string& dir) { return dir + "/snapshot"; }

}  // namespace

void BlockDaemonSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A scraper that disconnects must not kill the process.
  signal(SIGPIPE, SIG_IGN);
}

Daemon::Daemon(CommandLine command_line, Clock* clock)
    : command_line_(std::move(command_line)), config_(command_line_.config), clock_(clock) {}

Daemon::~Daemon() {
  if (grpc_server_) grpc_server_->Shutdown(absl::Milliseconds(100));
  if (scheduler_) scheduler_->Stop();
  exporter_.reset();
}

absl::Status Daemon::Init() {
  SetLogLevel(config_.log_level);
  metrics_.Gauge(kBuildInfo).Add({{"version", kVersion}, {"revision", kRevision}}).Set(1);
  metrics_.Gauge(kStartTime).Add({}).Set(static_cast<double>(clock_->RealtimeNs()) / 1e9);
  metrics_.Counter(kReloads).Add({{"result", "success"}});
  metrics_.Counter(kReloads).Add({{"result", "failure"}});

  StoreOptions store_options;
  store_options.memory_bytes = config_.store_memory_bytes;
  store_options.peak_window = config_.peak_window;
  store_options.burst_factor = config_.burst_factor;
  store_ = std::make_unique<Store>(store_options);
  if (auto s = config_.detect.Validate(); !s.ok()) return s;
  events_ = std::make_unique<EventLog>(config_.detect.max_events, &metrics_);
  detectors_ = std::make_unique<DetectorEngine>(config_.detect, &ports_, events_.get(), &metrics_);
  store_->SetObserver(detectors_.get());

  span_store_ = std::make_unique<SpanStore>(
      SpanStoreOptions{.memory_bytes = config_.span_memory_bytes, .max_age = config_.max_span_age},
      clock_, &metrics_);
  StallLearnerOptions learn;
  learn.enabled = config_.stall_learning;
  learn.warmup = config_.stall_warmup;
  learn.window = config_.stall_window;
  learn.median_factor = config_.stall_median_factor;
  learn.spread_factor = config_.stall_spread_factor;
  learn.max_keys = config_.stall_max_keys;
  learn.thresholds = config_.stall_thresholds;
  stall_learner_ = std::make_unique<StallLearner>(std::move(learn), &metrics_);
  if (!config_.incident_dir.empty()) {
    IncidentOptions iopt;
    iopt.dir = config_.incident_dir;
    iopt.before = config_.incident_before;
    iopt.after = config_.incident_after;
    iopt.max_duration = config_.incident_max_duration;
    iopt.dir_max_bytes = config_.incident_dir_max_bytes;
    incident_writer_ = std::make_unique<IncidentWriter>(iopt, store_.get(), span_store_.get(),
                                                        &ports_, clock_, &metrics_);
    events_->SetObserver(incident_writer_.get());
  }
  for (const char* kind : {"series", "samples", "spans", "events"}) {
    metrics_.Gauge(kStateRestored).Add({{"kind", kind}}).Set(0);
  }
  for (SnapshotError e :
       {SnapshotError::kIo, SnapshotError::kFormat, SnapshotError::kVersion,
        SnapshotError::kChecksum, SnapshotError::kTruncated, SnapshotError::kTooLarge}) {
    metrics_.Counter(kStateRejected).Add({{"reason", std::string(SnapshotErrorName(e))}});
  }
  if (!config_.state_dir.empty()) {
    if (!config_.replay_file.empty()) {
      return absl::InvalidArgumentError("--state-dir and --replay cannot be combined");
    }
    // Before any collector registers a series: restored series keep their ids.
    RestoreState();
  }

  if (auto s = RegisterAllCollectors(registry_); !s.ok()) return s;
  if (config_.replay_file.empty()) {
    absl::StatusOr<CollectorOptions> options = CollectorOptionsFromConfig(config_);
    if (!options.ok()) return options.status();
    collector_options_ = *std::move(options);
    CollectorContext ctx{&collector_options_, store_.get(), &ports_, clock_, &metrics_};
    auto collectors = registry_.Create(config_.collectors, ctx);
    if (!collectors.ok()) return collectors.status();
    collectors_ = *std::move(collectors);
  } else if (!std::ifstream(config_.replay_file)) {
    return absl::InvalidArgumentError(
        absl::StrCat("replay: cannot open '", config_.replay_file, "'"));
  }

  scheduler_ = std::make_unique<Scheduler>(
      clock_, store_.get(), &metrics_,
      std::array<absl::Duration, kNumTiers>{config_.hot_interval, config_.medium_interval,
                                            config_.slow_interval, config_.config_interval});
  std::vector<std::string> names;
  for (auto& c : collectors_) {
    scheduler_->Add(c.get());
    names.emplace_back(c->name());
  }
  // Detector episodes whose input stopped end even when no input is appended
  // (live only: a replay's samples carry the recording's time, not the tick's).
  if (config_.replay_file.empty()) {
    scheduler_->SetTickHook(Tier::kMedium,
                            [engine = detectors_.get()](int64_t ts) { engine->Sweep(ts); });
  }

  auto exporter = PrometheusExporter::Start(
      config_.metrics_listen, {config_.metrics_auth_file, config_.web_config_file}, &metrics_,
      store_.get(), &ports_,
      [this]() -> HealthStatus {
        const Scheduler::Health h = scheduler_->CheckHealth(clock_->SteadyNow());
        return {h.live, h.ready, h.detail};
      },
      config_.metrics_profile);
  if (!exporter.ok()) return exporter.status();
  exporter_ = *std::move(exporter);

  // Span ingest: the span store (created above), the ingester and its two
  // gRPC adapters.
  auto patterns = ParseSpanKindPatterns(config_.span_kind_patterns);
  if (!patterns.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("span-kind-patterns: ", patterns.status().message()));
  }
  auto classifier = SpanKindClassifier::Create(*std::move(patterns));
  if (!classifier.ok()) return classifier.status();
  IngestLimits limits;
  limits.max_spans_per_request = static_cast<uint32_t>(config_.max_spans_per_request);
  limits.max_attributes_per_span = static_cast<uint32_t>(config_.max_attributes_per_span);
  limits.max_attribute_bytes = static_cast<uint32_t>(config_.max_attribute_bytes);
  limits.max_span_age = config_.max_span_age;
  ingester_ = std::make_unique<SpanIngester>(limits, *std::move(classifier), span_store_.get(),
                                             clock_, &metrics_);
  ingester_->SetStallLearner(stall_learner_.get());
  if (!config_.nccl_inspector_dir.empty()) {
    NcclInspectorOptions nopt;
    nopt.dir = config_.nccl_inspector_dir;
    if (!config_.state_dir.empty()) {
      nopt.offsets_file = absl::StrCat(config_.state_dir, "/nccl-inspector.offsets");
    }
    nopt.proc_root = config_.proc_root;
    nccl_inspector_ =
        std::make_unique<NcclInspectorTailer>(std::move(nopt), ingester_.get(), clock_, &metrics_);
  }
  // Pods (daemon/kubernetes/kubernetes_source.h): when the kubelet's socket
  // is there, or a path other than the default was asked for.
  if (config_.replay_file.empty() && !config_.kubernetes_socket.empty()) {
    struct stat st {};
    const bool present =
        ::stat(config_.kubernetes_socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
    if (present || config_.kubernetes_socket != kDefaultKubeletSocket) {
      KubernetesOptions kopt;
      kopt.socket = config_.kubernetes_socket;
      kopt.proc_root = config_.proc_root;
      kopt.sysfs_root = config_.sysfs_root;
      kopt.log_dir = config_.kubernetes_log_dir;
      kopt.interval = config_.config_interval;
      kubernetes_ = std::make_unique<KubernetesSource>(std::move(kopt), &ports_, &metrics_);
    }
  }
  ingest_service_ =
      std::make_unique<IngestService>(ingester_.get(), config_.stream_idle_timeout, &metrics_);
  otlp_service_ = std::make_unique<OtlpTraceService>(ingester_.get());
  grpc_server_ = std::make_unique<GrpcServer>(
      config_.grpc_listen,
      GrpcTlsOptions{config_.grpc_tls_cert, config_.grpc_tls_key, config_.grpc_tls_client_ca});
  grpc_server_->AddService(ingest_service_.get());
  grpc_server_->AddService(otlp_service_.get());
  // Register further gRPC services here (before Start).
  {
    // Correlation (daemon/correlate/correlator.h). The slowest counter tier
    // bounds both how long a span waits for its window to be polled and the
    // longest interval between two samples that is not a gap.
    const absl::Duration slowest =
        std::max({config_.hot_interval, config_.medium_interval, config_.slow_interval});
    CorrelationOptions copt;
    copt.baseline_window = config_.baseline_window;
    copt.rate_factor = config_.correlate_rate_factor;
    copt.pause_fraction_threshold = config_.correlate_pause_fraction;
    copt.min_coverage = config_.correlate_min_coverage;
    copt.max_sample_gap = 2 * slowest + absl::Seconds(1);
    if (auto s = ParseFloors(config_.correlate_floors, &copt.floors); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("correlate-floors: ", s.message()));
    }
    correlator_ = std::make_unique<Correlator>(store_.get(), &ports_, copt,
                                               StallPolicy(config_.stall_thresholds));
    span_aggregates_ = std::make_unique<SpanAggregates>(&metrics_, config_.max_span_names);
    // Stalled spans' trace ids as exemplars on /metrics (OpenMetrics); the
    // exporter is stopped first in ~Daemon, before the aggregates go.
    exporter_->SetExemplarSource([agg = span_aggregates_.get()] { return agg->Exemplars(); });
    CorrelationWorkerOptions wopt;
    wopt.settle_delay = slowest + config_.hot_interval + absl::Milliseconds(100);
    wopt.queue_limit = config_.correlate_queue;
    wopt.skip_held_spans = true;  // restored spans were aggregated before the restart
    correlation_worker_ = std::make_unique<CorrelationWorker>(
        span_store_.get(), correlator_.get(), span_aggregates_.get(), clock_, &metrics_, wopt);
    query_engine_ = std::make_unique<QueryEngine>(span_store_.get(), correlator_.get(),
                                                  store_.get(), &ports_, events_.get(), clock_);
    // A recording says how the daemon that wrote it ran (`fabricscope
    // analyze` applies the options that verdicts and events depend on).
    query_service_ = std::make_unique<QueryService>(
        query_engine_.get(),
        [options = RenderedOptions(config_), learner = stall_learner_.get()](RecordingHeader* h) {
          h->version = absl::StrCat(kVersion, " (", kRevision, ")");
          h->options = options;
          h->stall_bounds = learner->Bounds();
        });
    grpc_server_->AddService(query_service_.get());
  }
  if (!config_.replay_file.empty()) {
    replay_ = std::make_unique<ReplayWorker>(config_.replay_file, config_.replay_speed,
                                             store_.get(), &ports_, span_store_.get(), clock_);
    replay_->SetStallLearner(stall_learner_.get());
  }
  if (auto s = grpc_server_->Start(); !s.ok()) return s;

  Log(LogLevel::kInfo, "daemon", "fabricscoped starting",
      {{"version", kVersion},
       {"revision", kRevision},
       {"config", command_line_.config.config_file},
       {"sysfs_root", config_.sysfs_root},
       {"replay", config_.replay_file},
       {"collectors", absl::StrJoin(names, ",")},
       {"hot_interval", absl::FormatDuration(config_.hot_interval)},
       {"store_memory_bytes", absl::StrCat(config_.store_memory_bytes)},
       {"span_memory_bytes", absl::StrCat(config_.span_memory_bytes)},
       {"state_dir", config_.state_dir},
       {"kubernetes", kubernetes_ ? config_.kubernetes_socket : std::string("off")}});
  if (config_.replay_file.empty()) WarnAboutSysfsRoot();
  if (!config_.metrics_auth_file.empty()) {
    Log(LogLevel::kWarn, "daemon",
        "--metrics-auth-file is deprecated and goes in the next release: use --web.config.file "
        "with basic_auth_users (bcrypt hashes, e.g. htpasswd -nBC 10 USER)",
        {});
  }
  Log(LogLevel::kInfo, "daemon", "serving metrics",
      {{"address", exporter_->address()}, {"path", "/metrics"}, {"scheme", exporter_->scheme()}});
  Log(LogLevel::kInfo, "daemon", "serving grpc", {{"address", grpc_server_->address()}});
  return absl::OkStatus();
}

void Daemon::RestoreState() {
  const std::string path = SnapshotPath(config_.state_dir);
  // A bound against absurd files only: a snapshot from larger budgets (the
  // operator lowered them) is still restored, its oldest samples dropped to
  // fit. The file is mapped, not copied.
  const uint64_t max_bytes =
      4 * (config_.store_memory_bytes + config_.span_memory_bytes) + (64ull << 20);
  const absl::Time started = absl::Now();
  bool missing = false;
  SnapshotCounts counts;
  SnapshotStatus st;
  {
    MappedSnapshot file;
    st = file.Open(path, max_bytes, &missing);
    // Checks the whole file before it restores anything (Open bounded its size).
    if (st.ok()) {
      st = RestoreSnapshot(file.data(), store_.get(), span_store_.get(), events_.get(), &counts,
                           /*threads=*/0, stall_learner_.get());
    }
  }
  if (missing) {
    Log(LogLevel::kInfo, "state", "no snapshot to restore; starting empty", {{"path", path}});
    return;
  }
  if (!st.ok()) {
    metrics_.Counter(kStateRejected)
        .Add({{"reason", std::string(SnapshotErrorName(st.error))}})
        .Increment();
    // Keep the bad file for inspection, out of the way of the next snapshot.
    const std::string kept = path + ".corrupt";
    const bool moved = std::rename(path.c_str(), kept.c_str()) == 0;
    Log(LogLevel::kError, "state", "snapshot rejected; starting empty",
        {{"path", path},
         {"reason", std::string(SnapshotErrorName(st.error))},
         {"detail", st.detail},
         {"kept_as", moved ? kept : "(could not move it)"}});
    return;
  }
  // Restored once: a crash before the next SIGTERM must not restore it again
  // on top of newer samples.
  const std::string done = path + ".restored";
  if (std::rename(path.c_str(), done.c_str()) != 0) {
    Log(LogLevel::kWarn, "state", "cannot move the restored snapshot aside",
        {{"path", path}, {"error", std::strerror(errno)}});
  }
  metrics_.Gauge(kStateRestored).Add({{"kind", "series"}}).Set(static_cast<double>(counts.series));
  metrics_.Gauge(kStateRestored)
      .Add({{"kind", "samples"}})
      .Set(static_cast<double>(counts.samples));
  metrics_.Gauge(kStateRestored).Add({{"kind", "spans"}}).Set(static_cast<double>(counts.spans));
  metrics_.Gauge(kStateRestored).Add({{"kind", "events"}}).Set(static_cast<double>(counts.events));
  const StoreStats ss = store_->Stats();
  Log(LogLevel::kInfo, "state", "restored snapshot",
      {{"path", path},
       {"series", absl::StrCat(counts.series)},
       {"samples", absl::StrCat(counts.samples)},
       {"spans", absl::StrCat(counts.spans)},
       {"spans_held", absl::StrCat(span_store_->Stats().spans)},
       {"events", absl::StrCat(counts.events)},
       {"series_unmapped", absl::StrCat(counts.series_unmapped)},
       {"samples_over_budget", absl::StrCat(ss.evicted_samples)},
       {"bytes", absl::StrCat(counts.bytes)},
       {"saved_ago",
        absl::FormatDuration(absl::Nanoseconds(clock_->RealtimeNs() - counts.saved_unix_nano))},
       {"took", absl::FormatDuration(absl::Now() - started)}});
}

void Daemon::SaveState() {
  const std::string path = SnapshotPath(config_.state_dir);
  const absl::Time started = absl::Now();
  SnapshotCounts counts;
  absl::Status s =
      WriteSnapshot(path, *store_, *span_store_, *events_, clock_->RealtimeNs(),
                    started + config_.state_save_timeout, &counts, stall_learner_.get());
  if (!s.ok()) {
    Log(LogLevel::kError, "state", "snapshot not written",
        {{"path", path}, {"error", std::string(s.message())}});
    return;
  }
  Log(LogLevel::kInfo, "state", "snapshot written",
      {{"path", path},
       {"series", absl::StrCat(counts.series)},
       {"samples", absl::StrCat(counts.samples)},
       {"spans", absl::StrCat(counts.spans)},
       {"events", absl::StrCat(counts.events)},
       {"bytes", absl::StrCat(counts.bytes)},
       {"took", absl::FormatDuration(absl::Now() - started)}});
}

void Daemon::WarnAboutSysfsRoot() const {
  // A mistyped --sysfs-root runs fine and finds nothing: say so once. The
  // daemon keeps running (a device may appear; the collectors rediscover).
  std::vector<std::string> missing;
  struct stat st {};
  for (const char* dir : {"class/infiniband", "class/net"}) {
    const std::string path = absl::StrCat(config_.sysfs_root, "/", dir);
    if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) missing.push_back(dir);
  }
  if (missing.empty()) return;
  Log(LogLevel::kWarn, "daemon",
      absl::StrCat("--sysfs-root ", config_.sysfs_root, " has no ",
                   absl::StrJoin(missing, " and no "),
                   ": is it a sysfs tree? (RDMA devices are found under class/infiniband, "
                   "interface attributes under class/net; polling goes on and finds devices that "
                   "appear later)"),
      {{"sysfs_root", config_.sysfs_root}, {"missing", absl::StrJoin(missing, ",")}});
}

absl::Status Daemon::CheckPaths() const {
  // After --user took effect: every path is checked as the user the daemon
  // runs as from now on (a checkout under root's 0700 home is readable by
  // root at start and by nobody never).
  const std::string user =
      absl::StrCat(CurrentUserDescription(), config_.run_as_user.empty() ? "" : ", set by --user");
  using Access = PathUse::Access;
  std::vector<PathUse> uses = {
      {"config", command_line_.config.config_file, Access::kReadFile},  // re-read on SIGHUP
      {"ethtool-dir", config_.ethtool_dir, Access::kReadDir},
      {"dcb-dir", config_.dcb_dir, Access::kReadDir},
      {"web.config.file", config_.web_config_file, Access::kReadFile},
      {"metrics-auth-file", config_.metrics_auth_file, Access::kReadFile},
      {"replay", config_.replay_file, Access::kReadFile},
      {"nccl-inspector-dir", config_.nccl_inspector_dir, Access::kReadDir},
      // Recordings that cannot be written are counted and the daemon goes on
      // (fabricscope_incident_write_errors_total): said now as well.
      {"incident-dir", config_.incident_dir, Access::kWriteDir},
  };
  if (config_.replay_file.empty()) {
    uses.push_back({"sysfs-root", config_.sysfs_root, Access::kReadDir});
  }
  // The paths the enabled collectors' own options name (OptionSpec::path);
  // sockets only when polling (a replay connects to none).
  for (const CollectorRegistry::Entry& e : BuiltinCollectors().entries()) {
    if (!config_.collectors.empty() &&
        std::find(config_.collectors.begin(), config_.collectors.end(), e.name) ==
            config_.collectors.end()) {
      continue;
    }
    for (const OptionSpec& spec : e.options) {
      if (spec.path == Access::kNone) continue;
      if (spec.path == Access::kSocket && !config_.replay_file.empty()) continue;
      uses.push_back({spec.name, config_.collector_values.Render(spec), spec.path});
    }
  }
  // Paths the user cannot use degrade the daemon (no topology, no web config
  // reload, a tree not polled, incidents not recorded) but everything else
  // works: said now, loudly, instead of at the first use.
  for (const std::string& problem : CheckPathAccess(uses)) {
    Log(LogLevel::kError, "daemon",
        absl::StrCat(problem, "; the daemon runs as ", user,
                     ": give that user access or use a path it can reach"),
        {{"user", user}});
  }
  if (config_.state_dir.empty()) return absl::OkStatus();
  // The state directory: an error that stops the start, as Prometheus does
  // with a storage path it cannot write (the snapshot on SIGTERM would
  // fail). One that does not exist yet is made (mode 0700, as the user the
  // daemon runs as), like Prometheus' storage path; then a file is written
  // in it as the test.
  struct stat st {};
  if (stat(config_.state_dir.c_str(), &st) != 0 && errno == ENOENT) {
    std::error_code ec;
    std::filesystem::create_directories(config_.state_dir, ec);
    if (!ec) {
      std::filesystem::permissions(config_.state_dir, std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::replace, ec);
    }
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat("--state-dir ", config_.state_dir,
                                                        " does not exist and cannot be created by ",
                                                        user, ": ", ec.message()));
    }
    Log(LogLevel::kInfo, "daemon", "created the state directory",
        {{"dir", config_.state_dir}, {"mode", "0700"}});
  }
  const std::string probe = config_.state_dir + "/.write-test";
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--state-dir ", config_.state_dir, " is not writable by ", user, ": ",
                     std::strerror(errno), " (the snapshot on SIGTERM would fail)"));
  }
  std::fclose(f);
  std::remove(probe.c_str());
  // A temporary file of a snapshot that a kill interrupted (SaveState writes
  // snapshot.tmp, then renames it): never restored, removed now.
  const std::string tmp = SnapshotPath(config_.state_dir) + ".tmp";
  if (std::remove(tmp.c_str()) == 0) {
    Log(LogLevel::kInfo, "state", "removed an interrupted snapshot's temporary file",
        {{"path", tmp}});
  }
  return absl::OkStatus();
}

void Daemon::Reload() {
  // The web config file's contents (its name is restart-only), reloaded
  // even when the config file is bad.
  if (absl::Status s = exporter_->ReloadWebConfig(); !s.ok()) {
    Log(LogLevel::kError, "daemon", "web config reload failed; keeping the running settings",
        {{"error", std::string(s.message())}});
  } else if (!config_.web_config_file.empty()) {
    Log(LogLevel::kInfo, "daemon", "web config reloaded", {{"file", config_.web_config_file}});
  }
  auto fresh = ReloadConfig(command_line_.config.config_file, command_line_.flag_args);
  if (!fresh.ok()) {
    metrics_.Counter(kReloads).Add({{"result", "failure"}}).Increment();
    Log(LogLevel::kError, "daemon", "config reload failed; keeping the running config",
        {{"error", std::string(fresh.status().message())}});
    return;
  }
  std::vector<std::string> restart_only = RestartOnlyChanges(config_, *fresh);
  if (!restart_only.empty()) {
    Log(LogLevel::kWarn, "daemon", "config reload: these options need a restart; keeping them",
        {{"options", absl::StrJoin(restart_only, ",")}});
  }
  // Apply the reloadable options.
  config_.log_level = fresh->log_level;
  config_.burst_factor = fresh->burst_factor;
  SetLogLevel(config_.log_level);
  metrics_.Counter(kReloads).Add({{"result", "success"}}).Increment();
  Log(LogLevel::kInfo, "daemon", "config reloaded",
      {{"file",
        command_line_.config.config_file.empty() ? "(none)" : command_line_.config.config_file}});
}

int Daemon::Run() {
  // After --user took effect: the directory is made as that user.
  if (incident_writer_) incident_writer_->Start();
  scheduler_->Start();
  correlation_worker_->Start();
  if (replay_) replay_->Start();
  if (nccl_inspector_) nccl_inspector_->Start();
  if (kubernetes_) kubernetes_->Start();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      Reload();
      continue;
    }
    Log(LogLevel::kInfo, "daemon", "stopping", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
    break;
  }
  // Each stage is timed: the stop's budget (2 s, README) is spent here.
  const absl::Time stop_start = absl::Now();
  absl::Time mark = stop_start;
  auto stage = [&mark]() {
    const absl::Time now = absl::Now();
    std::string took = absl::FormatDuration(absl::Trunc(now - mark, absl::Microseconds(100)));
    mark = now;
    return took;
  };
  // Bounded: calls still in flight after 200 ms are cancelled.
  grpc_server_->Shutdown(absl::Milliseconds(200));
  const std::string grpc_took = stage();
  if (replay_) replay_->Stop();
  if (nccl_inspector_) nccl_inspector_->Stop();
  if (kubernetes_) kubernetes_->Stop();
  correlation_worker_->Stop();
  scheduler_->Stop();
  const std::string workers_took = stage();
  exporter_.reset();
  const std::string http_took = stage();
  std::string incidents_took, snapshot_took;
  if (incident_writer_) {
    // No episode opens or closes any more: record what is still waiting,
    // cut at now, so a restart loses none (writes start within 1 s).
    incident_writer_->Stop();
    incident_writer_->Flush(absl::Seconds(1));  // SIGTERM stays within 2 s
    incidents_took = stage();
  }
  if (!config_.state_dir.empty()) {
    SaveState();
    snapshot_took = stage();
  }
  Log(LogLevel::kInfo, "daemon", "stopped",
      {{"took",
        absl::FormatDuration(absl::Trunc(absl::Now() - stop_start, absl::Microseconds(100)))},
       {"grpc", grpc_took},
       {"workers", workers_took},
       {"http", http_took},
       {"incidents", incidents_took},
       {"snapshot", snapshot_took}});
  return 0;
}

}  // namespace fabricscope
