#include "daemon/kubernetes/host_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fabricscope {
namespace {

bool AllHex(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
  });
}

// A pod UID in either spelling (dashes, or the systemd driver's
// underscores), returned with dashes; "" when `s` is not one.
std::string Uid(absl::string_view s) {
  if (s.size() != 36) return "";
  std::string uid(s);
  for (size_t i = 0; i < uid.size(); ++i) {
    const bool sep = i == 8 || i == 13 || i == 18 || i == 23;
    if (sep) {
      if (uid[i] != '-' && uid[i] != '_') return "";
      uid[i] = '-';
    } else if (!absl::ascii_isxdigit(uid[i])) {
      return "";
    }
  }
  return absl::AsciiStrToLower(uid);
}

// The pod UID a cgroup path segment names ("pod<uid>",
// "kubepods-burstable-pod<uid_>.slice"), else "".
std::string PodSegmentUid(absl::string_view seg) {
  absl::ConsumeSuffix(&seg, ".slice");
  if (seg.size() < 39) return "";
  const absl::string_view tail = seg.substr(seg.size() - 39);
  if (!absl::StartsWith(tail, "pod")) return "";
  if (seg.size() > 39 && seg[seg.size() - 40] != '-') return "";
  return Uid(tail.substr(3));
}

// The container id a segment below the pod's names: "<64 hex>" (cgroupfs),
// "<runtime>-<64 hex>.scope" (systemd); "" otherwise (crio's conmon too).
std::string ContainerSegmentId(absl::string_view seg) {
  absl::ConsumeSuffix(&seg, ".scope");
  if (absl::StrContains(seg, "conmon")) return "";
  const size_t dash = seg.rfind('-');
  if (dash != absl::string_view::npos) seg = seg.substr(dash + 1);
  return seg.size() == 64 && AllHex(seg) ? std::string(seg) : "";
}

std::string ReadLink(const std::string& path) {
  char target[512];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

// The names in `dir` (no dot entries), at most `max`.
std::vector<std::string> List(const std::string& dir, size_t max) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      if (names.size() >= max) break;
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  return names;
}

}  // namespace

std::string ReadHostFile(const std::string& path, size_t max_bytes) {
  // open/read, not an ifstream: a poll reads one cgroup file per process
  // on the host, and the stream's setup was most of it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out(max_bytes, '\0');
  size_t got = 0;
  while (got < max_bytes) {
    const ssize_t n = ::read(fd, out.data() + got, max_bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

bool ParsePodCgroup(absl::string_view file, CgroupPod* out) {
  bool found = false;
  for (absl::string_view line : absl::StrSplit(file, '\n')) {
    // hierarchy-ID:controllers:path; the path may itself hold ':'.
    const size_t a = line.find(':');
    const size_t b = a == absl::string_view::npos ? a : line.find(':', a + 1);
    if (b == absl::string_view::npos) continue;
    const absl::string_view path = line.substr(b + 1);
    std::vector<absl::string_view> segs = absl::StrSplit(path, '/', absl::SkipEmpty());
    for (size_t i = 0; i < segs.size(); ++i) {
      std::string uid = PodSegmentUid(segs[i]);
      if (uid.empty()) continue;
      CgroupPod pod{std::move(uid), i + 1 < segs.size() ? ContainerSegmentId(segs[i + 1]) : ""};
      // The first line naming a pod, or a later one that also names the container.
      if (!found || (out->container_id.empty() && !pod.container_id.empty())) *out = pod;
      found = true;
      break;
    }
    if (found && !out->container_id.empty()) return true;
  }
  return found;
}

std::vector<NvidiaGpu> ReadNvidiaGpus(const std::string& proc_root) {
  std::vector<NvidiaGpu> gpus;
  const std::string dir = absl::StrCat(proc_root, "/driver/nvidia/gpus");
  for (const std::string& bus : List(dir, 256)) {
    NvidiaGpu gpu;
    gpu.bus_id = absl::AsciiStrToLower(bus);
    std::istringstream info(ReadHostFile(absl::StrCat(dir, "/", bus, "/information"), 8192));
    std::string line;
    while (std::getline(info, line)) {
      absl::string_view l(line);
      if (absl::ConsumePrefix(&l, "GPU UUID:")) {
        gpu.uuid = std::string(absl::StripAsciiWhitespace(l));
      } else if (absl::ConsumePrefix(&l, "Device Minor:")) {
        if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(l), &gpu.minor)) gpu.minor = -1;
      }
    }
    gpus.push_back(std::move(gpu));
  }
  std::sort(gpus.begin(), gpus.end(),
            [](const NvidiaGpu& a, const NvidiaGpu& b) { return a.bus_id < b.bus_id; });
  return gpus;
}

ProcessDevices ReadProcessDevices(const std::string& proc_root, uint32_t pid, size_t max_fds) {
  ProcessDevices out;
  const std::string fd_dir = absl::StrCat(proc_root, "/", pid, "/fd");
  for (const std::string& fd : List(fd_dir, max_fds)) {
    const std::string target = ReadLink(absl::StrCat(fd_dir, "/", fd));
    absl::string_view t(target);
    int minor = 0;
    if (absl::ConsumePrefix(&t, "/dev/nvidia")) {
      if (!t.empty() && absl::c_all_of(t, absl::ascii_isdigit) && absl::SimpleAtoi(t, &minor) &&
          !absl::c_linear_search(out.nvidia_minors, minor)) {
        out.nvidia_minors.push_back(minor);
      }
    } else if (absl::ConsumePrefix(&t, "/dev/infiniband/") && absl::StartsWith(t, "uverbs")) {
      if (!absl::c_linear_search(out.uverbs, t)) out.uverbs.emplace_back(t);
    }
  }
  std::sort(out.nvidia_minors.begin(), out.nvidia_minors.end());
  std::sort(out.uverbs.begin(), out.uverbs.end());
  return out;
}

std::string UverbsDevice(const std::string& sysfs_root, absl::string_view uverbs) {
  std::string dev(absl::StripAsciiWhitespace(
      ReadHostFile(absl::StrCat(sysfs_root, "/class/infiniband_verbs/", uverbs, "/ibdev"), 256)));
  return dev;
}

bool IsPciAddress(absl::string_view id) {
  // dddd:bb:dd.f, hex digits.
  if (id.size() != 12 || id[4] != ':' || id[7] != ':' || id[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    if (!absl::ascii_isxdigit(id[i])) return false;
  }
  return true;
}

bool IsRdmaDevice(const std::string& sysfs_root, absl::string_view name) {
  if (name.empty() || absl::StrContains(name, '/') || name == "." || name == "..") return false;
  return ::access(absl::StrCat(sysfs_root, "/class/infiniband/", name).c_str(), F_OK) == 0;
}

PciDeviceView ReadPciDevice(const std::string& sysfs_root, absl::string_view address) {
  PciDeviceView view;
  if (!IsPciAddress(address)) return view;
  const std::string dir =
      absl::StrCat(sysfs_root, "/bus/pci/devices/", absl::AsciiStrToLower(address));
  view.exists = ::access(dir.c_str(), F_OK) == 0;
  if (!view.exists) return view;
  std::vector<std::string> devs = List(absl::StrCat(dir, "/infiniband"), 16);
  std::sort(devs.begin(), devs.end());
  if (!devs.empty()) view.rdma_device = devs.front();
  std::vector<std::string> parents = List(absl::StrCat(dir, "/physfn/infiniband"), 16);
  std::sort(parents.begin(), parents.end());
  if (!parents.empty()) view.parent_rdma_device = parents.front();
  return view;
}

PodLogTree ReadPodLogTree(const std::string& log_dir, size_t max_entries) {
  PodLogTree tree;
  // pods/<namespace>_<pod>_<uid>: namespaces and pod names hold no '_'.
  for (const std::string& name : List(absl::StrCat(log_dir, "/pods"), max_entries)) {
    std::vector<std::string> parts = absl::StrSplit(name, '_');
    if (parts.size() != 3 || parts[0].empty() || parts[1].empty()) continue;
    const std::string uid = Uid(parts[2]);
    if (uid.empty()) continue;
    tree.pods[uid] = {parts[0], parts[1]};
  }
  // containers/<pod>_<namespace>_<container>-<64 hex id>.log
  for (const std::string& name : List(absl::StrCat(log_dir, "/containers"), max_entries)) {
    absl::string_view n(name);
    if (!absl::ConsumeSuffix(&n, ".log") || n.size() < 66 || n[n.size() - 65] != '-') continue;
    const absl::string_view id = n.substr(n.size() - 64);
    if (!AllHex(id)) continue;
    n.remove_suffix(65);
    std::vector<absl::string_view> parts = absl::StrSplit(n, absl::MaxSplits('_', 2));
    if (parts.size() != 3 || parts[2].empty()) continue;
    tree.containers[std::string(id)] = std::string(parts[2]);
  }
  return tree;
}

}  // namespace fabricscope
