#include "daemon/kubernetes/kubernetes_source.h"

#include <dirent.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/log.h"
#include "daemon/kubernetes/host_view.h"
#include "grpcpp/grpcpp.h"
#include "kubelet/podresources/v1/api.grpc.pb.h"

namespace fabricscope {
namespace {

const MetricSpec& kUp = DefineMetric(
    {.name = "fabricscope_kubernetes_up",
     .type = MetricType::kGauge,
     .help = "Whether the kubelet's PodResources List answered the last poll (1) or not (0: the "
             "last allocations it gave are kept; processes are still attributed from their "
             "cgroups).",
     .labels = {},
     .component = "kubernetes"});
const MetricSpec& kPolls = DefineMetric(
    {.name = "fabricscope_kubernetes_polls_total",
     .type = MetricType::kCounter,
     .help = "PodResources List calls by result: ok, unavailable (no kubelet on the socket, "
             "restarting, or the socket not ours to connect to), unsupported (a kubelet without "
             "PodResources v1, before Kubernetes 1.20), deadline_exceeded (no answer within 2s), "
             "error (anything else).",
     .labels = {"result"},
     .component = "kubernetes"});
const MetricSpec& kPodProcesses = DefineMetric(
    {.name = "fabricscope_pod_processes",
     .type = MetricType::kGauge,
     .help = "Processes attributed to a named pod at the last poll, by how: devices (the GPUs "
             "and RDMA devices it has open, joined with the kubelet's allocations) or cgroup "
             "(its cgroup's pod UID and container id, named by the kubelet's log tree).",
     .labels = {"via"},
     .component = "kubernetes"});
const MetricSpec& kPodDevices = DefineMetric(
    {.name = "fabricscope_pod_devices",
     .type = MetricType::kGauge,
     .help = "Device ids the kubelet allocated to containers on this host at the last poll that "
             "answered, by kind (gpu, rdma, pci, unresolved).",
     .labels = {"kind"},
     .component = "kubernetes"});

constexpr size_t kMaxCgroupBytes = 16 << 10;

// A GPU allocation id without time-slicing's "::N" replica suffix.
std::string GpuUuid(const std::string& id) {
  const size_t sep = id.find("::");
  return sep == std::string::npos ? id : id.substr(0, sep);
}

PodDevice Resolve(const PodAllocation& a, const std::string& id, const std::vector<NvidiaGpu>& gpus,
                  const KubernetesOptions& options) {
  PodDevice d;
  d.owner = a.owner;
  d.resource = a.resource;
  d.device_id = id;
  if (absl::StartsWith(id, "GPU-")) {
    const std::string uuid = GpuUuid(id);
    for (const NvidiaGpu& g : gpus) {
      if (absl::EqualsIgnoreCase(g.uuid, uuid)) {
        d.kind = PodDeviceKind::kGpu;
        d.bus_id = g.bus_id;
      }
    }
    return d;
  }
  if (IsPciAddress(id)) {
    const PciDeviceView pci = ReadPciDevice(options.sysfs_root, id);
    if (!pci.exists) return d;
    d.bus_id = absl::AsciiStrToLower(id);
    d.kind = pci.rdma_device.empty() ? PodDeviceKind::kPci : PodDeviceKind::kRdma;
    d.device = pci.rdma_device;
    d.parent_device = pci.parent_rdma_device;
    return d;
  }
  if (IsRdmaDevice(options.sysfs_root, id)) {
    d.kind = PodDeviceKind::kRdma;
    d.device = id;
  }
  return d;
}

struct Candidate {
  uint32_t pid = 0;
  CgroupPod cgroup;
};

// The pod processes of PROC: those whose cgroup names a pod.
std::vector<Candidate> ScanProcesses(const KubernetesOptions& options, size_t* scanned) {
  std::vector<Candidate> out;
  DIR* d = ::opendir(options.proc_root.c_str());
  if (d == nullptr) return out;
  size_t n = 0;
  while (const dirent* e = ::readdir(d)) {
    uint32_t pid = 0;
    if (!absl::ascii_isdigit(e->d_name[0]) || !absl::SimpleAtoi(e->d_name, &pid)) continue;
    if (++n > options.max_pids_scanned) break;
    Candidate c;
    c.pid = pid;
    const std::string file =
        ReadHostFile(absl::StrCat(options.proc_root, "/", pid, "/cgroup"), kMaxCgroupBytes);
    if (!ParsePodCgroup(file, &c.cgroup)) continue;
    out.push_back(std::move(c));
    if (out.size() >= kMaxPodProcesses) break;
  }
  ::closedir(d);
  if (scanned != nullptr) *scanned = std::min(n, options.max_pids_scanned);
  std::sort(out.begin(), out.end(),
            [](const Candidate& a, const Candidate& b) { return a.pid < b.pid; });
  return out;
}

// The pid of `pid` in its innermost pid namespace (the last NSpid field of
// PROC/<pid>/status), 0 when that is the host's own or unknown.
uint32_t NamespacePid(const std::string& proc_root, uint32_t pid) {
  const std::string status = ReadHostFile(absl::StrCat(proc_root, "/", pid, "/status"), 8192);
  const size_t at = status.find("\nNSpid:");
  if (at == std::string::npos) return 0;
  const size_t end = status.find('\n', at + 1);
  std::vector<std::string> fields = absl::StrSplit(
      absl::string_view(status).substr(at + 8, end == std::string::npos ? end : end - at - 8),
      absl::ByAnyChar(" \t"), absl::SkipEmpty());
  uint32_t inner = 0;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields.back(), &inner) || inner == pid) return 0;
  return inner;
}

bool SameContainer(const PodRef& a, const PodRef& b) {
  return a.ns == b.ns && a.pod == b.pod && a.container == b.container;
}

}  // namespace

PodTable BuildPodTable(const std::vector<PodAllocation>& allocations,
                       const KubernetesOptions& options, size_t* processes_scanned) {
  PodTable table;
  const std::vector<NvidiaGpu> gpus = ReadNvidiaGpus(options.proc_root);
  for (const PodAllocation& a : allocations) {
    for (const std::string& id : a.device_ids) {
      if (table.devices.size() >= kMaxPodDevices) break;
      table.devices.push_back(Resolve(a, id, gpus, options));
    }
  }
  const PodLogTree logs = ReadPodLogTree(options.log_dir, options.max_log_entries);
  // The log tree names pods by UID: the devices' owners get theirs.
  std::map<std::pair<std::string, std::string>, std::string> uid_of;
  for (const auto& [uid, pod] : logs.pods) uid_of[{pod.ns, pod.name}] = uid;
  for (PodDevice& d : table.devices) {
    auto it = uid_of.find({d.owner.ns, d.owner.pod});
    if (it != uid_of.end()) d.owner.uid = it->second;
  }

  size_t scanned = 0;
  const std::vector<Candidate> candidates = ScanProcesses(options, &scanned);
  if (processes_scanned != nullptr) *processes_scanned = scanned;
  std::vector<PodProcess> pending;  // named by neither devices nor the log tree (yet)
  // uverbsN -> RDMA device, read once a poll (every process of a pod holds the same).
  std::map<std::string, std::string> uverbs_devices;
  for (const Candidate& c : candidates) {
    // The cgroup's pod and container, as far as the log tree names them.
    PodRef by_cgroup;
    by_cgroup.uid = c.cgroup.uid;
    if (auto it = logs.pods.find(c.cgroup.uid); it != logs.pods.end()) {
      by_cgroup.ns = it->second.ns;
      by_cgroup.pod = it->second.name;
    }
    if (auto it = logs.containers.find(c.cgroup.container_id); it != logs.containers.end()) {
      by_cgroup.container = it->second;
    }
    // The containers whose allocations the process has open.
    std::vector<PodRef> owners;
    if (!table.devices.empty()) {
      const ProcessDevices held =
          ReadProcessDevices(options.proc_root, c.pid, options.max_fds_per_process);
      std::vector<std::string> rdma;
      for (const std::string& u : held.uverbs) {
        auto [it, added] = uverbs_devices.try_emplace(u);
        if (added) it->second = UverbsDevice(options.sysfs_root, u);
        rdma.push_back(it->second);
      }
      for (const PodDevice& d : table.devices) {
        bool holds = false;
        if (d.kind == PodDeviceKind::kGpu) {
          for (const NvidiaGpu& g : gpus) {
            holds |= g.bus_id == d.bus_id && absl::c_linear_search(held.nvidia_minors, g.minor);
          }
        } else if (d.kind == PodDeviceKind::kRdma) {
          holds = absl::c_linear_search(rdma, d.device);
        }
        if (holds && std::none_of(owners.begin(), owners.end(),
                                  [&](const PodRef& o) { return SameContainer(o, d.owner); })) {
          owners.push_back(d.owner);
        }
      }
    }
    PodProcess p;
    p.pid = c.pid;
    p.ns_pid = NamespacePid(options.proc_root, c.pid);
    if (owners.size() == 1 && (!by_cgroup.named() || by_cgroup.SamePod(owners[0]))) {
      p.owner = owners[0];
      p.owner.uid = c.cgroup.uid;
      p.via = "devices";
      table.processes.push_back(std::move(p));
    } else if (by_cgroup.named()) {
      p.owner = std::move(by_cgroup);
      p.via = "cgroup";
      table.processes.push_back(std::move(p));
    } else {
      p.owner = std::move(by_cgroup);
      p.owner.container.clear();
      p.via = "cgroup";
      pending.push_back(std::move(p));
    }
  }
  // A pod UID named by another of its processes (attributed by devices).
  for (PodProcess& p : pending) {
    if (const PodProcess* named = [&]() -> const PodProcess* {
          for (const PodProcess& q : table.processes) {
            if (q.owner.uid == p.owner.uid && q.via == "devices") return &q;
          }
          return nullptr;
        }()) {
      p.owner.ns = named->owner.ns;
      p.owner.pod = named->owner.pod;
    }
    table.processes.push_back(std::move(p));
  }
  std::sort(table.processes.begin(), table.processes.end(),
            [](const PodProcess& a, const PodProcess& b) { return a.pid < b.pid; });
  // Devices whose pod a process named by UID.
  for (PodDevice& d : table.devices) {
    if (!d.owner.uid.empty()) continue;
    for (const PodProcess& p : table.processes) {
      if (p.owner.named() && p.owner.ns == d.owner.ns && p.owner.pod == d.owner.pod) {
        d.owner.uid = p.owner.uid;
        break;
      }
    }
  }
  return table;
}

// The PodResources client: one channel, reconnecting by itself (the socket's
// directory is what is mounted, so a restarted kubelet's new socket is found
// under the same path).
class KubeletClient {
 public:
  explicit KubeletClient(const std::string& socket) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
    args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 16 << 20);
    channel_ = grpc::CreateCustomChannel(absl::StrCat("unix:", socket),
                                         grpc::InsecureChannelCredentials(), args);
    stub_ = v1::PodResourcesLister::NewStub(channel_);
  }

  grpc::Status List(absl::Duration deadline, std::vector<PodAllocation>* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
      active_ = &ctx;
    }
    v1::ListPodResourcesRequest req;
    v1::ListPodResourcesResponse resp;
    grpc::Status st = stub_->List(&ctx, req, &resp);
    {
      std::lock_guard lock(mu_);
      active_ = nullptr;
    }
    if (!st.ok()) return st;
    out->clear();
    size_t ids = 0;
    for (const v1::PodResources& pod : resp.pod_resources()) {
      for (const v1::ContainerResources& c : pod.containers()) {
        for (const v1::ContainerDevices& dev : c.devices()) {
          PodAllocation a;
          a.owner.ns = pod.namespace_();
          a.owner.pod = pod.name();
          a.owner.container = c.name();
          a.resource = dev.resource_name();
          for (const std::string& id : dev.device_ids()) {
            if (ids++ >= kMaxPodDevices) break;
            a.device_ids.push_back(id);
          }
          if (!a.device_ids.empty()) out->push_back(std::move(a));
        }
      }
    }
    return st;
  }

  // Cancels the call in flight and every later one (the daemon is stopping).
  void Cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (active_ != nullptr) active_->TryCancel();
  }

 private:
  std::mutex mu_;
  grpc::ClientContext* active_ = nullptr;  // guarded by mu_
  bool cancelled_ = false;                 // guarded by mu_
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub_;
};

KubernetesSource::KubernetesSource(KubernetesOptions options, PortInventory* ports,
                                   MetricsRegistry* metrics)
    : options_(std::move(options)),
      ports_(ports),
      client_(std::make_unique<KubeletClient>(options_.socket)) {
  up_gauge_ = &metrics->Gauge(kUp).Add({});
  polls_ok_ = &metrics->Counter(kPolls).Add({{"result", "ok"}});
  polls_unavailable_ = &metrics->Counter(kPolls).Add({{"result", "unavailable"}});
  polls_unsupported_ = &metrics->Counter(kPolls).Add({{"result", "unsupported"}});
  polls_deadline_ = &metrics->Counter(kPolls).Add({{"result", "deadline_exceeded"}});
  polls_error_ = &metrics->Counter(kPolls).Add({{"result", "error"}});
  by_devices_ = &metrics->Gauge(kPodProcesses).Add({{"via", "devices"}});
  by_cgroup_ = &metrics->Gauge(kPodProcesses).Add({{"via", "cgroup"}});
  for (PodDeviceKind kind : {PodDeviceKind::kGpu, PodDeviceKind::kRdma, PodDeviceKind::kPci,
                             PodDeviceKind::kUnresolved}) {
    devices_gauge_[static_cast<size_t>(kind)] =
        &metrics->Gauge(kPodDevices).Add({{"kind", PodDeviceKindName(kind)}});
  }
}

KubernetesSource::~KubernetesSource() { Stop(); }

void KubernetesSource::Start() {
  thread_ = std::thread([this] { Run(); });
}

void KubernetesSource::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  client_->Cancel();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KubernetesSource::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    PollOnce();
    lock.lock();
    cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.interval), [this] { return stop_; });
  }
}

absl::Status KubernetesSource::PollOnce() {
  std::vector<PodAllocation> listed;
  const grpc::Status st = client_->List(options_.deadline, &listed);
  if (st.error_code() == grpc::StatusCode::CANCELLED) return absl::CancelledError("stopping");
  if (st.ok()) {
    allocations_ = std::move(listed);
    polls_ok_->Increment();
    if (!up_) {
      Log(LogLevel::kInfo, "kubernetes", "kubelet PodResources answers again",
          {{"socket", options_.socket},
           {"containers_with_devices", absl::StrCat(allocations_.size())}});
    }
    up_ = true;
  } else {
    switch (st.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
        polls_unavailable_->Increment();
        break;
      case grpc::StatusCode::UNIMPLEMENTED:
        polls_unsupported_->Increment();
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        polls_deadline_->Increment();
        break;
      default:
        polls_error_->Increment();
    }
    if (up_) {
      Log(LogLevel::kWarn, "kubernetes",
          "kubelet PodResources unavailable; keeping the last allocations, processes from their "
          "cgroups, until it answers (said once)",
          {{"socket", options_.socket},
           {"code", absl::StrCat(static_cast<int>(st.error_code()))},
           {"error", st.error_message()}});
    }
    up_ = false;
  }
  up_gauge_->Set(up_ ? 1 : 0);
  PodTable table = BuildPodTable(allocations_, options_);
  size_t devices = 0, cgroup = 0;
  for (const PodProcess& p : table.processes) {
    if (!p.owner.named()) continue;
    (p.via == "devices" ? devices : cgroup)++;
  }
  by_devices_->Set(static_cast<double>(devices));
  by_cgroup_->Set(static_cast<double>(cgroup));
  double by_kind[4] = {0, 0, 0, 0};
  for (const PodDevice& d : table.devices) by_kind[static_cast<size_t>(d.kind)] += 1;
  for (size_t k = 0; k < 4; ++k) devices_gauge_[k]->Set(by_kind[k]);
  ports_->SetPods(std::move(table));
  if (st.ok()) return absl::OkStatus();
  return absl::UnavailableError(st.error_message());
}

}  // namespace fabricscope
