// The kubernetes source (daemon/kubernetes/): the host's files (cgroups in
// the kubelet's layouts, fd links, /proc/driver/nvidia, sysfs PCI devices,
// the kubelet's log tree), the join with PodResources allocations, a fake
// kubelet on a unix socket (restart, slow, absent), and what the exporter
// and the correlator make of the table.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/signals.h"
#include "daemon/correlate/correlation.h"
#include "daemon/kubernetes/host_view.h"
#include "daemon/kubernetes/kubernetes_source.h"
#include "exporters/exposition.h"
#include "exporters/prometheus_exporter.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "store/port_inventory.h"
#include "store/store.h"
#include "tools/fabricsim/kubelet.h"

namespace fabricscope {
namespace kubernetes_source_test {
namespace {

namespace fs = std::filesystem;

constexpr char kUidA[] = "8f2c1d90-3e5a-4b17-9c2e-5da9abb51763";
constexpr char kUidB[] = "0b6f1a3e-77c4-4e0f-8a51-2f9d6c0e4b12";
const std::string kCid1 = std::string(64, 'a');
const std::string kCid2 = absl::StrCat(std::string(63, 'b'), "1");
const std::string kCid3 = absl::StrCat(std::string(63, 'c'), "2");

std::string Underscored(const std::string& uid) { return absl::StrReplaceAll(uid, {{"-", "_"}}); }

// A host: PROC, SYS and LOGS under one temporary directory.
class FakeHost {
 public:
  FakeHost() {
    root_ = fs::path(::testing::TempDir()) /
            absl::StrCat("k8s_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                         "_", ::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeHost() { fs::remove_all(root_); }

  KubernetesOptions Options() const {
    KubernetesOptions o;
    o.proc_root = root_ / "proc";
    o.sysfs_root = root_ / "sys";
    o.log_dir = root_ / "log";
    o.socket = root_ / "kubelet.sock";
    o.deadline = absl::Milliseconds(500);
    return o;
  }
  std::string path(const std::string& rel) const { return (root_ / rel).string(); }

  void Write(const std::string& rel, const std::string& content) const {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  void Link(const std::string& rel, const std::string& target) const {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    fs::create_symlink(target, p);
  }
  void Dir(const std::string& rel) const { fs::create_directories(root_ / rel); }

  // An NVIDIA GPU in /proc/driver/nvidia.
  void Gpu(const std::string& bus, const std::string& uuid, int minor) const {
    Write(absl::StrCat("proc/driver/nvidia/gpus/", bus, "/information"),
          absl::StrCat("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 180\nGPU UUID: \t ", uuid,
                       "\nVideo BIOS: \t 96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
                       "Device Minor: \t ",
                       minor, "\nBus Location: \t ", bus, "\n"));
  }
  // An RDMA device at a PCI address (a VF when `pf` is given), with uverbsN.
  void Rdma(const std::string& dev, const std::string& pci, int uverbs,
            const std::string& pf = "") const {
    Dir(absl::StrCat("sys/bus/pci/devices/", pci, "/infiniband/", dev));
    Dir(absl::StrCat("sys/class/infiniband/", dev));
    Write(absl::StrCat("sys/class/infiniband_verbs/uverbs", uverbs, "/ibdev"), dev + "\n");
    if (!pf.empty()) {
      Link(absl::StrCat("sys/bus/pci/devices/", pci, "/physfn"), path("sys/bus/pci/devices/" + pf));
    }
  }
  // A process: its cgroup file and fd links.
  void Process(int pid, const std::string& cgroup, const std::vector<std::string>& fds) const {
    Write(absl::StrCat("proc/", pid, "/cgroup"), cgroup);
    Dir(absl::StrCat("proc/", pid, "/fd"));
    int fd = 3;
    for (const std::string& t : fds) Link(absl::StrCat("proc/", pid, "/fd/", fd++), t);
  }
  // The kubelet's log tree entries of a pod's container.
  void Logs(const std::string& ns, const std::string& pod, const std::string& uid,
            const std::string& container, const std::string& cid) const {
    Dir(absl::StrCat("log/pods/", ns, "_", pod, "_", uid, "/", container));
    Link(absl::StrCat("log/containers/", pod, "_", ns, "_", container, "-", cid, ".log"),
         absl::StrCat("/var/log/pods/", ns, "_", pod, "_", uid, "/", container, "/0.log"));
  }

 private:
  fs::path root_;
};

// ---------------------------------------------------------------------------
// cgroups

struct CgroupCase {
  const char* layout;
  std::string file;
  std::string container_id;
};

TEST(ParsePodCgroup, EveryKubeletLayout) {
  const std::string u = kUidA;
  const std::string uu = Underscored(kUidA);
  const std::vector<CgroupCase> cases = {
      {"v1 cgroupfs",
       absl::StrCat("12:memory:/kubepods/burstable/pod", u, "/", kCid1, "\n11:cpuset:/kubepods/",
                    "burstable/pod", u, "/", kCid1, "\n1:name=systemd:/kubepods/burstable/pod", u,
                    "/", kCid1, "\n"),
       kCid1},
      {"v1 systemd containerd",
       absl::StrCat("12:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod", uu,
                    ".slice/cri-containerd-", kCid1, ".scope\n"),
       kCid1},
      {"v2 systemd containerd",
       absl::StrCat("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod", uu,
                    ".slice/cri-containerd-", kCid1, ".scope\n"),
       kCid1},
      {"v2 cgroupfs", absl::StrCat("0::/kubepods/besteffort/pod", u, "/", kCid1, "\n"), kCid1},
      {"v2 systemd guaranteed crio",
       absl::StrCat("0::/kubepods.slice/kubepods-pod", uu, ".slice/crio-", kCid1, ".scope\n"),
       kCid1},
      {"v2 systemd docker",
       absl::StrCat("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod", uu,
                    ".slice/docker-", kCid1, ".scope\n"),
       kCid1},
      {"v2 inside a cgroup namespace",
       absl::StrCat("0::/../../kubepods-besteffort-pod", uu, ".slice/cri-containerd-", kCid1,
                    ".scope\n"),
       kCid1},
      {"kind (kubelet.slice)",
       absl::StrCat("0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
                    "kubelet-kubepods-besteffort-pod",
                    uu, ".slice/cri-containerd-", kCid1, ".scope\n"),
       kCid1},
      {"crio conmon (no container)",
       absl::StrCat("0::/kubepods.slice/kubepods-pod", uu, ".slice/crio-conmon-", kCid1,
                    ".scope\n"),
       ""},
      {"the pod's own cgroup", absl::StrCat("0::/kubepods/pod", u, "\n"), ""},
  };
  for (const CgroupCase& c : cases) {
    CgroupPod pod;
    ASSERT_TRUE(ParsePodCgroup(c.file, &pod)) << c.layout;
    EXPECT_EQ(pod.uid, kUidA) << c.layout;
    EXPECT_EQ(pod.container_id, c.container_id) << c.layout;
  }
}

TEST(ParsePodCgroup, NotAPod) {
  CgroupPod pod;
  EXPECT_FALSE(ParsePodCgroup("0::/system.slice/sshd.service\n", &pod));
  EXPECT_FALSE(ParsePodCgroup("0::/user.slice/user-0.slice/session-4.scope\n", &pod));
  EXPECT_FALSE(ParsePodCgroup("12:memory:/docker/" + kCid1 + "\n", &pod));
  EXPECT_FALSE(ParsePodCgroup("0::/kubepods/burstable/podnot-a-uid/" + kCid1 + "\n", &pod));
  EXPECT_FALSE(ParsePodCgroup("garbage without colons", &pod));
  EXPECT_FALSE(ParsePodCgroup("", &pod));
  // "pod" inside a word is no pod segment.
  EXPECT_FALSE(ParsePodCgroup(absl::StrCat("0::/x/ipod", kUidA, "\n"), &pod));
}

// ---------------------------------------------------------------------------
// Host files

TEST(HostView, GpusDevicesAndLogs) {
  FakeHost host;
  host.Gpu("0000:1b:00.0", "GPU-11111111-2222-3333-4444-555555555555", 2);
  host.Gpu("0000:43:00.0", "GPU-66666666-7777-8888-9999-000000000000", 0);
  host.Rdma("mlx5_0", "0000:3b:00.0", 0);
  host.Rdma("mlx5_2", "0000:3b:00.2", 2, "0000:3b:00.0");
  host.Dir("sys/bus/pci/devices/0000:5e:00.0");  // a PCI device that is no RDMA device
  host.Process(4242, "0::/\n",
               {"/dev/nvidia2", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/infiniband/uverbs2",
                "/dev/infiniband/rdma_cm", "socket:[1234]", "/dev/nvidia2"});
  host.Logs("llm", "vllm-0", kUidA, "engine", kCid1);

  const KubernetesOptions o = host.Options();
  const std::vector<NvidiaGpu> gpus = ReadNvidiaGpus(o.proc_root);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].bus_id, "0000:1b:00.0");
  EXPECT_EQ(gpus[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(gpus[0].minor, 2);
  EXPECT_EQ(gpus[1].minor, 0);

  const ProcessDevices held = ReadProcessDevices(o.proc_root, 4242, 64);
  EXPECT_EQ(held.nvidia_minors, std::vector<int>{2});  // nvidiactl, nvidia-uvm are no GPU
  EXPECT_EQ(held.uverbs, std::vector<std::string>{"uverbs2"});
  EXPECT_EQ(UverbsDevice(o.sysfs_root, "uverbs2"), "mlx5_2");
  EXPECT_TRUE(ReadProcessDevices(o.proc_root, 999, 64).uverbs.empty());  // no such process

  const PciDeviceView vf = ReadPciDevice(o.sysfs_root, "0000:3b:00.2");
  EXPECT_TRUE(vf.exists);
  EXPECT_EQ(vf.rdma_device, "mlx5_2");
  EXPECT_EQ(vf.parent_rdma_device, "mlx5_0");
  const PciDeviceView plain = ReadPciDevice(o.sysfs_root, "0000:5e:00.0");
  EXPECT_TRUE(plain.exists);
  EXPECT_EQ(plain.rdma_device, "");
  EXPECT_FALSE(ReadPciDevice(o.sysfs_root, "0000:99:00.0").exists);
  EXPECT_FALSE(IsPciAddress("mlx5_0"));
  EXPECT_TRUE(IsRdmaDevice(o.sysfs_root, "mlx5_0"));
  EXPECT_FALSE(IsRdmaDevice(o.sysfs_root, "../class"));

  const PodLogTree logs = ReadPodLogTree(o.log_dir, 100);
  ASSERT_EQ(logs.pods.count(kUidA), 1u);
  EXPECT_EQ(logs.pods.at(kUidA).ns, "llm");
  EXPECT_EQ(logs.pods.at(kUidA).name, "vllm-0");
  ASSERT_EQ(logs.containers.count(kCid1), 1u);
  EXPECT_EQ(logs.containers.at(kCid1), "engine");
}

// ---------------------------------------------------------------------------
// The join

// Two pods: llm/vllm-0 (container engine: GPU 1b by UUID with a time-slicing
// suffix, VF 0000:3b:00.2) and llm/sglang-0 (container worker: a GPU, a
// shared-device id that names nothing).
std::vector<PodAllocation> Allocations() {
  return {
      {{"llm", "vllm-0", "engine", ""},
       "nvidia.com/gpu",
       {"GPU-11111111-2222-3333-4444-555555555555::3"}},
      {{"llm", "vllm-0", "engine", ""}, "nvidia.com/cx7_vf", {"0000:3b:00.2"}},
      {{"llm", "sglang-0", "worker", ""},
       "nvidia.com/gpu",
       {"GPU-66666666-7777-8888-9999-000000000000"}},
      {{"llm", "sglang-0", "worker", ""}, "rdma/hca_shared_devices_a", {"ib-shared-7"}},
      {{"llm", "sglang-0", "worker", ""}, "nvidia.com/mig-1g.10gb", {"MIG-0e5c2b8a-aaaa"}},
  };
}

void TwoPodHost(const FakeHost& host) {
  host.Gpu("0000:1b:00.0", "GPU-11111111-2222-3333-4444-555555555555", 2);
  host.Gpu("0000:43:00.0", "GPU-66666666-7777-8888-9999-000000000000", 0);
  host.Rdma("mlx5_0", "0000:3b:00.0", 0);
  host.Rdma("mlx5_1", "0000:86:00.0", 1);
  host.Rdma("mlx5_2", "0000:3b:00.2", 2, "0000:3b:00.0");
}

const PodDevice* FindDevice(const PodTable& t, const std::string& id) {
  for (const PodDevice& d : t.devices) {
    if (d.device_id == id) return &d;
  }
  return nullptr;
}

TEST(BuildPodTable, ResolvesEveryKindOfId) {
  FakeHost host;
  TwoPodHost(host);
  const PodTable t = BuildPodTable(Allocations(), host.Options());
  ASSERT_EQ(t.devices.size(), 5u);
  const PodDevice* gpu = FindDevice(t, "GPU-11111111-2222-3333-4444-555555555555::3");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->kind, PodDeviceKind::kGpu);
  EXPECT_EQ(gpu->bus_id, "0000:1b:00.0");
  EXPECT_EQ(gpu->owner.Name(), "llm/vllm-0/engine");
  const PodDevice* vf = FindDevice(t, "0000:3b:00.2");
  ASSERT_NE(vf, nullptr);
  EXPECT_EQ(vf->kind, PodDeviceKind::kRdma);
  EXPECT_EQ(vf->device, "mlx5_2");
  EXPECT_EQ(vf->parent_device, "mlx5_0");
  EXPECT_EQ(vf->bus_id, "0000:3b:00.2");
  EXPECT_EQ(FindDevice(t, "ib-shared-7")->kind, PodDeviceKind::kUnresolved);
  EXPECT_EQ(FindDevice(t, "MIG-0e5c2b8a-aaaa")->kind, PodDeviceKind::kUnresolved);
  EXPECT_EQ(FindDevice(t, "GPU-66666666-7777-8888-9999-000000000000")->bus_id, "0000:43:00.0");
}

TEST(BuildPodTable, ProcessesByDevicesThenByCgroup) {
  FakeHost host;
  TwoPodHost(host);
  const std::string uu = Underscored(kUidA);
  // 100: vllm's engine, holds its GPU and VF (v2 systemd); no log tree for it.
  host.Process(100,
               absl::StrCat("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod",
                            uu, ".slice/cri-containerd-", kCid1, ".scope\n"),
               {"/dev/nvidia2", "/dev/infiniband/uverbs2"});
  // 101: a sidecar of the same pod (same UID, other container), no device.
  host.Process(101,
               absl::StrCat("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod",
                            uu, ".slice/cri-containerd-", kCid3, ".scope\n"),
               {});
  // 200: sglang's worker on a shared RDMA device: holds mlx5_1 (named by no
  // allocation) and its GPU (v1 cgroupfs).
  host.Process(200,
               absl::StrCat("4:devices:/kubepods/besteffort/pod", kUidB, "/", kCid2,
                            "\n1:name=systemd:/kubepods/besteffort/pod", kUidB, "/", kCid2, "\n"),
               {"/dev/nvidia0", "/dev/infiniband/uverbs1"});
  // 300: a pod with no devices at all, named by the log tree alone.
  const std::string uid_c = "11111111-2222-4333-8444-555555555555";
  host.Process(
      300, absl::StrCat("0::/kubepods/besteffort/pod", uid_c, "/", kCid1.substr(0, 60), "dddd\n"),
      {});
  host.Logs("tools", "debug-0", uid_c, "shell", kCid1.substr(0, 60) + "dddd");
  // 400: no pod (a host daemon).
  host.Process(400, "0::/system.slice/lldpd.service\n", {"/dev/infiniband/uverbs0"});
  // 500: a privileged process holding both pods' GPUs: no single container.
  host.Process(500, absl::StrCat("0::/kubepods/pod", uid_c, "/", kCid1.substr(0, 60), "dddd\n"),
               {"/dev/nvidia0", "/dev/nvidia2"});

  size_t scanned = 0;
  const PodTable t = BuildPodTable(Allocations(), host.Options(), &scanned);
  EXPECT_EQ(scanned, 6u);
  ASSERT_EQ(t.processes.size(), 5u);  // 400 is in no pod
  const PodProcess* p100 = t.FindProcess(100);
  ASSERT_NE(p100, nullptr);
  EXPECT_EQ(p100->owner.Name(), "llm/vllm-0/engine");
  EXPECT_EQ(p100->owner.uid, kUidA);
  EXPECT_EQ(p100->via, "devices");
  // The sidecar: its pod named through 100's UID; its container unknown.
  const PodProcess* p101 = t.FindProcess(101);
  ASSERT_NE(p101, nullptr);
  EXPECT_EQ(p101->owner.Name(), "llm/vllm-0");
  EXPECT_EQ(p101->via, "cgroup");
  const PodProcess* p200 = t.FindProcess(200);
  ASSERT_NE(p200, nullptr);
  EXPECT_EQ(p200->owner.Name(), "llm/sglang-0/worker");
  EXPECT_EQ(p200->owner.uid, kUidB);
  EXPECT_EQ(p200->via, "devices");
  const PodProcess* p300 = t.FindProcess(300);
  ASSERT_NE(p300, nullptr);
  EXPECT_EQ(p300->owner.Name(), "tools/debug-0/shell");
  EXPECT_EQ(p300->via, "cgroup");
  // Two containers' GPUs: the cgroup names it (debug-0), not the devices.
  const PodProcess* p500 = t.FindProcess(500);
  ASSERT_NE(p500, nullptr);
  EXPECT_EQ(p500->owner.Name(), "tools/debug-0/shell");
  EXPECT_EQ(p500->via, "cgroup");
  EXPECT_EQ(t.FindProcess(400), nullptr);
  // The devices learn their pod's UID from the processes.
  EXPECT_EQ(FindDevice(t, "0000:3b:00.2")->owner.uid, kUidA);
  const PodRef* by_uid = t.FindUid(kUidB);
  ASSERT_NE(by_uid, nullptr);
  EXPECT_EQ(by_uid->pod, "sglang-0");
}

TEST(BuildPodTable, CgroupWinsOverAnotherPodsDevice) {
  FakeHost host;
  TwoPodHost(host);
  // A process of tools/debug-0 (named by the log tree) that opened vllm-0's
  // VF: the devices name one container, but of another pod.
  const std::string uid_c = "11111111-2222-4333-8444-555555555555";
  const std::string cid = kCid1.substr(0, 60) + "dddd";
  host.Process(600, absl::StrCat("0::/kubepods/pod", uid_c, "/", cid, "\n"),
               {"/dev/infiniband/uverbs2"});
  host.Logs("tools", "debug-0", uid_c, "shell", cid);
  const PodTable t = BuildPodTable(Allocations(), host.Options());
  const PodProcess* p = t.FindProcess(600);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->owner.Name(), "tools/debug-0/shell");
  EXPECT_EQ(p->via, "cgroup");
}

// ---------------------------------------------------------------------------
// The source against a fake kubelet

constexpr char kPods[] =
    "llm vllm-0 engine nvidia.com/gpu GPU-11111111-2222-3333-4444-555555555555\n"
    "llm vllm-0 engine nvidia.com/cx7_vf 0000:3b:00.2\n"
    "llm sglang-0 worker rdma/hca_shared_devices_a ib-shared-7\n";

std::string Text(const MetricsRegistry& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.registry()->Collect());
}

size_t CountLines(const std::string& log, const std::string& what) {
  size_t n = 0;
  for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
  return n;
}

TEST(KubernetesSource, ListsPublishesAndSurvivesARestart) {
  FakeHost host;
  TwoPodHost(host);
  FakeKubelet kubelet;
  ASSERT_TRUE(kubelet.SetFromText(kPods).ok());
  const KubernetesOptions o = host.Options();
  ASSERT_TRUE(kubelet.Start(o.socket).ok());
  PortInventory ports;
  MetricsRegistry metrics;
  std::string log;
  SetLogCaptureForTest(&log);
  KubernetesSource source(o, &ports, &metrics);
  ASSERT_TRUE(source.PollOnce().ok());
  ASSERT_EQ(ports.Pods()->devices.size(), 3u);
  EXPECT_EQ(FindDevice(*ports.Pods(), "0000:3b:00.2")->device, "mlx5_2");

  // The kubelet restarts: polls while it is gone fail, keep the last
  // allocations and say so once; it answers again with one more pod.
  kubelet.Stop();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(source.PollOnce().ok());
  EXPECT_EQ(ports.Pods()->devices.size(), 3u);
  ASSERT_TRUE(
      kubelet.SetFromText(absl::StrCat(kPods, "llm trt-0 main nvidia.com/cx7_vf 0000:86:00.0\n"))
          .ok());
  ASSERT_TRUE(kubelet.Start(o.socket).ok());
  absl::Status st;
  for (int i = 0; i < 100 && !(st = source.PollOnce()).ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(100));  // the channel reconnects (1 s backoff)
  }
  SetLogCaptureForTest(nullptr);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(ports.Pods()->devices.size(), 4u);
  EXPECT_EQ(CountLines(log, "kubelet PodResources unavailable"), 1u) << log;
  EXPECT_EQ(CountLines(log, "kubelet PodResources answers again"), 1u) << log;
  const std::string text = Text(metrics);
  EXPECT_NE(text.find("fabricscope_kubernetes_up 1"), std::string::npos) << text;
  EXPECT_NE(text.find("fabricscope_kubernetes_polls_total{result=\"unavailable\"}"),
            std::string::npos);
}

TEST(KubernetesSource, AbsentKubeletCostsOneLogLine) {
  FakeHost host;
  PortInventory ports;
  MetricsRegistry metrics;
  std::string log;
  SetLogCaptureForTest(&log);
  {
    KubernetesSource source(host.Options(), &ports, &metrics);  // nothing on the socket
    for (int i = 0; i < 20; ++i) EXPECT_FALSE(source.PollOnce().ok());
  }
  SetLogCaptureForTest(nullptr);
  EXPECT_EQ(CountLines(log, "\n"), 1u) << log;
  EXPECT_EQ(CountLines(log, "kubelet PodResources unavailable"), 1u) << log;
  EXPECT_NE(Text(metrics).find("fabricscope_kubernetes_up 0"), std::string::npos);
}

TEST(KubernetesSource, SlowKubeletMeetsTheDeadline) {
  FakeHost host;
  TwoPodHost(host);
  FakeKubelet kubelet;
  ASSERT_TRUE(kubelet.SetFromText(kPods).ok());
  kubelet.SetDelay(absl::Seconds(3));
  KubernetesOptions o = host.Options();
  o.deadline = absl::Milliseconds(200);
  ASSERT_TRUE(kubelet.Start(o.socket).ok());
  PortInventory ports;
  MetricsRegistry metrics;
  std::string log;
  SetLogCaptureForTest(&log);
  KubernetesSource source(o, &ports, &metrics);
  const absl::Time start = absl::Now();
  const absl::Status st = source.PollOnce();
  const absl::Duration took = absl::Now() - start;
  SetLogCaptureForTest(nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_LT(took, absl::Seconds(3));  // the deadline, not the kubelet, ended it
  EXPECT_NE(
      Text(metrics).find("fabricscope_kubernetes_polls_total{result=\"deadline_exceeded\"} 1"),
      std::string::npos)
      << Text(metrics);
  EXPECT_TRUE(ports.Pods()->devices.empty());
  kubelet.SetDelay(absl::ZeroDuration());
}

// ---------------------------------------------------------------------------
// What the table is for

Span PodSpan(const std::string& ns, const std::string& pod) {
  Span s;
  s.name = "decode";
  s.attributes = {{"k8s.namespace.name", ns}, {"k8s.pod.name", pod}};
  return s;
}

TEST(PodScope, ASpanIsJudgedOnItsPodsDevices) {
  FakeHost host;
  TwoPodHost(host);
  const PodTable t = BuildPodTable(Allocations(), host.Options());
  const std::vector<PortInfo> ports = {{"mlx5_0", 1, "eth0", "Ethernet", "ACTIVE", "200"},
                                       {"mlx5_1", 1, "eth1", "Ethernet", "ACTIVE", "200"},
                                       {"mlx5_2", 1, "eth0v2", "Ethernet", "ACTIVE", "200"}};
  // vllm-0: its VF and the VF's PF, not mlx5_1.
  const Span vllm = PodSpan("llm", "vllm-0");
  const SpanPod pod = ResolveSpanPod(vllm, t);
  EXPECT_EQ(pod.pod.Name(), "llm/vllm-0");
  EXPECT_EQ(pod.via, "span attributes");
  EXPECT_EQ(pod.rdma_devices, (std::vector<std::string>{"mlx5_2", "mlx5_0"}));
  const SpanScope scope(vllm, ports, nullptr, &pod);
  EXPECT_TRUE(scope.Contains({"rdma_sysfs", "port_xmit_wait", "mlx5_2", 1, ""}));
  EXPECT_TRUE(scope.Contains({"ethtool", "rx_prio3_pause", "", 0, "eth0"}));
  EXPECT_FALSE(scope.Contains({"rdma_sysfs", "port_xmit_wait", "mlx5_1", 1, ""}));
  EXPECT_EQ(scope.description(), "pod llm/vllm-0 devices: mlx5_2/1, mlx5_0/1");

  // sglang-0 has no RDMA device it can be judged on: the NICs nearest its GPU.
  HostTopology topo;
  topo.gpus = {{"0000:43:00.0", 1, "nvidia", "H100", 1}};
  topo.affinity = {{"0000:43:00.0", 1, "mlx5_0", PciRelation::kSys},
                   {"0000:43:00.0", 1, "mlx5_1", PciRelation::kPix}};
  const Span sglang = PodSpan("llm", "sglang-0");
  const SpanPod gpu_pod = ResolveSpanPod(sglang, t);
  EXPECT_TRUE(SpanScope::NeedsTopology(sglang, &gpu_pod));
  const SpanScope by_gpu(sglang, ports, &topo, &gpu_pod);
  EXPECT_TRUE(by_gpu.Contains({"rdma_sysfs", "port_xmit_wait", "mlx5_1", 1, ""}));
  EXPECT_FALSE(by_gpu.Contains({"rdma_sysfs", "port_xmit_wait", "mlx5_0", 1, ""}));

  // An explicit hint still wins; a pod the table does not know: every port.
  Span hinted = vllm;
  hinted.rdma_device = "mlx5_1";
  EXPECT_FALSE(SpanScope(hinted, ports, nullptr, &pod)
                   .Contains({"rdma_sysfs", "port_xmit_wait", "mlx5_2", 1, ""}));
  const Span other = PodSpan("llm", "nobody");
  const SpanPod none = ResolveSpanPod(other, t);
  EXPECT_TRUE(SpanScope(other, ports, nullptr, &none)
                  .Contains({"rdma_sysfs", "port_xmit_wait", "mlx5_1", 1, ""}));
}

TEST(PodScope, ASpanWithOnlyAPidGetsItsProcesssPod) {
  FakeHost host;
  TwoPodHost(host);
  host.Process(100, absl::StrCat("0::/kubepods/burstable/pod", kUidA, "/", kCid1, "\n"),
               {"/dev/infiniband/uverbs2"});
  const PodTable t = BuildPodTable(Allocations(), host.Options());
  Span s;
  s.pid = 100;
  const SpanPod pod = ResolveSpanPod(s, t);
  EXPECT_EQ(pod.pod.Name(), "llm/vllm-0/engine");
  EXPECT_EQ(pod.via, "process 100 (devices)");
  EXPECT_EQ(pod.rdma_devices, (std::vector<std::string>{"mlx5_2", "mlx5_0"}));
  // By UID alone (k8s.pod.uid): named through the table.
  Span by_uid;
  by_uid.attributes = {{"k8s.pod.uid", kUidA}};
  EXPECT_EQ(ResolveSpanPod(by_uid, t).pod.Name(), "llm/vllm-0");
}

TEST(PodScope, AContainersOwnPidFindsItsProcess) {
  FakeHost host;
  TwoPodHost(host);
  const std::string uid_c = "11111111-2222-4333-8444-555555555555";
  const std::string cid_c = kCid1.substr(0, 60) + "dddd";
  host.Logs("tools", "debug-0", uid_c, "shell", cid_c);
  // Host pid 100 is pid 1 in vllm-0's container; host pid 300 is pid 1 in
  // debug-0's; host pid 1 is init, in no pod.
  host.Process(100, absl::StrCat("0::/kubepods/burstable/pod", kUidA, "/", kCid1, "\n"),
               {"/dev/infiniband/uverbs2"});
  host.Write("proc/100/status", "Name:\tpython3\nTgid:\t100\nNSpid:\t100\t1\nPPid:\t9\n");
  host.Process(300, absl::StrCat("0::/kubepods/besteffort/pod", uid_c, "/", cid_c, "\n"), {});
  host.Write("proc/300/status", "Name:\tsh\nNSpid:\t300\t1\n");
  host.Write("proc/1/cgroup", "0::/init.scope\n");
  const PodTable t = BuildPodTable(Allocations(), host.Options());
  ASSERT_NE(t.FindProcess(100), nullptr);
  EXPECT_EQ(t.FindProcess(100)->ns_pid, 1u);
  // process.pid 1 with host.name (the pod's hostname) names one of the two.
  Span s;
  s.pid = 1;
  s.attributes = {{"host.name", "vllm-0"}};
  SpanPod pod = ResolveSpanPod(s, t);
  EXPECT_EQ(pod.pod.Name(), "llm/vllm-0/engine");
  EXPECT_EQ(pod.via, "process 1 in its container, 100 on the host (devices)");
  // Without it, pid 1 could be either: no pod.
  s.attributes.clear();
  EXPECT_FALSE(ResolveSpanPod(s, t).pod.named());
  // A host pid names its process.
  s.pid = 300;
  EXPECT_EQ(ResolveSpanPod(s, t).pod.Name(), "tools/debug-0/shell");
}

TEST(PodLabels, PerProcessSeriesCarryTheirPod) {
  FakeHost host;
  TwoPodHost(host);
  host.Process(100, absl::StrCat("0::/kubepods/burstable/pod", kUidA, "/", kCid1, "\n"),
               {"/dev/infiniband/uverbs2"});
  Store store;
  PortInventory ports;
  ports.SetPods(BuildPodTable(Allocations(), host.Options()));
  // Two per-process series as rdma_netlink appends them: pid 100 (in
  // vllm-0) and pid 7 (no pod).
  for (const char* name : {"out_of_sequence@100/vllm", "out_of_sequence@7/sshd"}) {
    const SeriesKey key{"rdma_process", name, "mlx5_2", 1, ""};
    std::optional<Signal> sig = MapCounter(key);
    ASSERT_TRUE(sig.has_value()) << name;
    store.Append(store.Register(key, *sig), 1'000'000'000, 5);
  }
  std::string text;
  ExpositionWriter writer(ExpositionFormat::kText, {}, &text);
  WriteStoreFamilies(store, &ports, 2'000'000'000, MetricsProfile::kFull, &writer);
  writer.Finish();
  EXPECT_NE(text.find("pid=\"100\",counter=\"out_of_sequence\",namespace=\"llm\",pod=\"vllm-0\","
                      "container=\"engine\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pid=\"7\",counter=\"out_of_sequence\",namespace=\"\",pod=\"\","
                      "container=\"\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fabricscope_pod_device_info{namespace=\"llm\",pod=\"vllm-0\","
                      "container=\"engine\",resource=\"nvidia.com/cx7_vf\","
                      "device_id=\"0000:3b:00.2\",kind=\"rdma\",device=\"mlx5_2\","
                      "parent_device=\"mlx5_0\",bus_id=\"0000:3b:00.2\",gpu_bus_id=\"\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("device_id=\"ib-shared-7\",kind=\"unresolved\""), std::string::npos);
}

}  // namespace
}  // namespace kubernetes_source_test
}  // namespace fabricscope
