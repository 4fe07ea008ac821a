#include "collectors/ethtool_stats_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "collectors/ethtool_text.h"
#include "collectors/sysfs_reader.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

// Room for names/values beyond the count we last saw: the kernel fills as
// many as the device has *now* (its count, not ours), so a count that grows
// between two calls must still fit.
size_t WithSlack(size_t n) { return std::max<size_t>(n * 4, n + 4096); }

// ---------------------------------------------------------------------------
// Kernel: SIOCETHTOOL.

// One SIOCETHTOOL request on `netdev` (shorter than IFNAMSIZ); `data` starts
// with the command word. Errors name the request (`what`) and the netdev.
absl::Status EthtoolIoctl(int fd, const std::string& netdev, void* data, absl::string_view what) {
  ifreq ifr{};
  memcpy(ifr.ifr_name, netdev.data(), netdev.size());
  ifr.ifr_data = static_cast<char*>(data);
  if (ioctl(fd, SIOCETHTOOL, &ifr) < 0) {
    return ErrnoToStatus(errno, absl::StrCat(what, " ", netdev));
  }
  return absl::OkStatus();
}

class IoctlReader final : public EthtoolStatsReader {
 public:
  IoctlReader(int fd, std::string netdev, absl::Duration refresh)
      : fd_(fd), netdev_(std::move(netdev)), refresh_(refresh) {}

  absl::Status Read(bool* names_changed) override {
    *names_changed = false;
    if (fd_ < 0) return absl::InternalError("no socket for SIOCETHTOOL");
    if (netdev_.size() >= IFNAMSIZ) return absl::NotFoundError("netdev name too long");
    const auto now = std::chrono::steady_clock::now();
    if (names_.empty() || now - resolved_at_ >= absl::ToChronoNanoseconds(refresh_)) {
      if (absl::Status s = Resolve(names_changed); !s.ok()) return s;
    }
    uint32_t n = 0;
    if (absl::Status s = Stats(&n); !s.ok()) return s;
    if (n != names_.size()) {
      // The string set changed under us (PFC toggled): resolve again and read
      // again; never export values under stale names.
      if (absl::Status s = Resolve(names_changed); !s.ok()) return s;
      if (absl::Status s = Stats(&n); !s.ok()) return s;
      if (n != names_.size()) return absl::InternalError("stat count keeps changing");
    }
    count_ = n;
    return absl::OkStatus();
  }

  const std::vector<std::string>& names() const override { return names_; }
  absl::Span<const uint64_t> values() const override {
    return absl::MakeConstSpan(stats_.data() + kHeaderWords, count_);
  }

 private:
  static constexpr size_t kHeaderWords = sizeof(ethtool_stats) / sizeof(uint64_t);

  absl::Status Ioctl(void* data, absl::string_view what) {
    return EthtoolIoctl(fd_, netdev_, data, what);
  }

  absl::Status Count(uint32_t* n) {
    alignas(ethtool_sset_info) uint8_t buf[sizeof(ethtool_sset_info) + sizeof(uint32_t)] = {};
    auto* sset = reinterpret_cast<ethtool_sset_info*>(buf);
    sset->cmd = ETHTOOL_GSSET_INFO;
    sset->sset_mask = uint64_t{1} << ETH_SS_STATS;
    absl::Status s = Ioctl(sset, "ETHTOOL_GSSET_INFO");
    if (s.ok()) {
      *n = (sset->sset_mask & (uint64_t{1} << ETH_SS_STATS)) != 0 ? sset->data[0] : 0;
      return absl::OkStatus();
    }
    if (!absl::IsUnimplemented(s)) return s;
    ethtool_drvinfo info{};  // old kernels: the count from GDRVINFO
    info.cmd = ETHTOOL_GDRVINFO;
    if (absl::Status d = Ioctl(&info, "ETHTOOL_GDRVINFO"); !d.ok()) return d;
    *n = info.n_stats;
    return absl::OkStatus();
  }

  absl::Status Resolve(bool* names_changed) {
    uint32_t n = 0;
    if (absl::Status s = Count(&n); !s.ok()) return s;
    if (n == 0) return absl::UnimplementedError(absl::StrCat(netdev_, " has no ethtool stats"));
    const size_t cap = WithSlack(n);
    std::vector<uint8_t> buf(sizeof(ethtool_gstrings) + cap * ETH_GSTRING_LEN);
    auto* gs = reinterpret_cast<ethtool_gstrings*>(buf.data());
    gs->cmd = ETHTOOL_GSTRINGS;
    gs->string_set = ETH_SS_STATS;
    gs->len = n;
    if (absl::Status s = Ioctl(gs, "ETHTOOL_GSTRINGS"); !s.ok()) return s;
    const size_t len = std::min<size_t>(gs->len, cap);
    std::vector<std::string> names;
    names.reserve(len);
    for (size_t i = 0; i < len; ++i) {
      names.push_back(TrimStatName(reinterpret_cast<const char*>(gs->data + i * ETH_GSTRING_LEN),
                                   ETH_GSTRING_LEN));
    }
    resolved_at_ = std::chrono::steady_clock::now();
    if (names != names_) {
      names_ = std::move(names);
      *names_changed = true;
    }
    stats_.assign(kHeaderWords + WithSlack(names_.size()), 0);
    return absl::OkStatus();
  }

  absl::Status Stats(uint32_t* n) {
    auto* st = reinterpret_cast<ethtool_stats*>(stats_.data());
    st->cmd = ETHTOOL_GSTATS;
    st->n_stats = static_cast<uint32_t>(names_.size());
    if (absl::Status s = Ioctl(st, "ETHTOOL_GSTATS"); !s.ok()) return s;
    *n = st->n_stats;
    if (*n > stats_.size() - kHeaderWords) {
      // Cannot happen within the slack; never read past the buffer.
      return absl::InternalError("stat count grew beyond the buffer");
    }
    return absl::OkStatus();
  }

  const int fd_;
  const std::string netdev_;
  const absl::Duration refresh_;
  std::vector<std::string> names_;
  std::vector<uint64_t> stats_;  // ethtool_stats header + values
  uint32_t count_ = 0;
  std::chrono::steady_clock::time_point resolved_at_{};
};

class KernelSource final : public EthtoolStatsSource {
 public:
  explicit KernelSource(absl::Duration refresh) : refresh_(refresh) {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  ~KernelSource() override {
    if (fd_ >= 0) close(fd_);
  }
  absl::StatusOr<std::vector<std::string>> ListNetdevs() override {
    return std::vector<std::string>{};
  }
  std::unique_ptr<EthtoolStatsReader> Open(const std::string& netdev) override {
    return std::make_unique<IoctlReader>(fd_, netdev, refresh_);
  }
  bool HasStandardStats() const override { return true; }
  absl::StatusOr<PauseStats> ReadPause(const std::string& netdev) override {
    return netlink_.GetPauseStats(netdev);
  }
  absl::StatusOr<FecStats> ReadFec(const std::string& netdev) override {
    return netlink_.GetFecStats(netdev);
  }
  absl::StatusOr<uint32_t> LinkSpeedMbps(const std::string& netdev) override;

 private:
  const absl::Duration refresh_;
  int fd_ = -1;
  EthtoolNetlink netlink_;
};

// ETHTOOL_GLINKSETTINGS asks for the size of the link-mode masks first: a
// request with link_mode_masks_nwords = 0 is answered with minus the number of
// 32-bit words the kernel uses, and the second request with that number gets
// the settings (the three masks follow the struct).
absl::StatusOr<uint32_t> KernelSource::LinkSpeedMbps(const std::string& netdev) {
  if (fd_ < 0) return absl::InternalError("no socket for SIOCETHTOOL");
  if (netdev.size() >= IFNAMSIZ) return absl::NotFoundError("netdev name too long");
  constexpr size_t kMaxWords = 127;  // link_mode_masks_nwords is an __s8
  alignas(ethtool_link_settings)
      uint8_t buf[sizeof(ethtool_link_settings) + 3 * kMaxWords * sizeof(uint32_t)];
  auto* req = reinterpret_cast<ethtool_link_settings*>(buf);
  auto ask = [&](int8_t nwords) -> absl::Status {
    memset(buf, 0, sizeof(buf));
    req->cmd = ETHTOOL_GLINKSETTINGS;
    req->link_mode_masks_nwords = nwords;
    return EthtoolIoctl(fd_, netdev, buf, "ETHTOOL_GLINKSETTINGS");
  };
  if (absl::Status s = ask(0); !s.ok()) return s;
  const int nwords = -req->link_mode_masks_nwords;
  if (nwords <= 0) {
    return absl::InternalError(
        absl::StrCat("ETHTOOL_GLINKSETTINGS ", netdev, ": no mask size in the handshake"));
  }
  if (absl::Status s = ask(static_cast<int8_t>(nwords)); !s.ok()) return s;
  if (req->link_mode_masks_nwords != nwords) {
    return absl::InternalError(
        absl::StrCat("ETHTOOL_GLINKSETTINGS ", netdev, ": mask size changed"));
  }
  const uint32_t speed = req->speed;
  return speed == static_cast<uint32_t>(SPEED_UNKNOWN) || speed > INT32_MAX ? 0 : speed;
}

// ---------------------------------------------------------------------------
// Directory of `ethtool -S` text files.
absl::Status ReadWholeFile(const std::string& path, std::string* out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path);
  out->clear();
  char buf[16384];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return ErrnoToStatus(err, path);
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return absl::OkStatus();
}

class FileReader final : public EthtoolStatsReader {
 public:
  explicit FileReader(std::string path) : path_(std::move(path)) {}

  absl::Status Read(bool* names_changed) override {
    *names_changed = false;
    if (absl::Status s = ReadWholeFile(path_, &text_); !s.ok()) return s;
    if (text_.empty()) return UnparsableError(absl::StrCat(path_, ": empty"));
    if (text_.back() != '\n') {
      return UnparsableError(
          absl::StrCat(path_, ": last line not terminated (truncated mid-write?)"));
    }
    if (!names_.empty()) {
      bool match = false;
      absl::Status s = ParseEthtoolStatsValues(text_, names_, &scratch_, &match);
      if (!s.ok()) return UnparsableError(absl::StrCat(path_, ": ", s.message()));
      if (match) {
        values_.swap(scratch_);
        return absl::OkStatus();
      }
    }
    EthtoolTextStats parsed;
    if (absl::Status s = ParseEthtoolStatsText(text_, &parsed); !s.ok()) {
      return UnparsableError(absl::StrCat(path_, ": ", s.message()));
    }
    names_ = std::move(parsed.names);
    values_ = std::move(parsed.values);
    *names_changed = true;
    return absl::OkStatus();
  }

  const std::vector<std::string>& names() const override { return names_; }
  absl::Span<const uint64_t> values() const override { return values_; }

 private:
  const std::string path_;
  std::string text_;
  std::vector<std::string> names_;
  std::vector<uint64_t> values_;
  std::vector<uint64_t> scratch_;
};

class DirSource final : public EthtoolStatsSource {
 public:
  DirSource(std::string dir, std::string sysfs_root)
      : dir_(std::move(dir)), sysfs_root_(std::move(sysfs_root)) {}

  absl::StatusOr<std::vector<std::string>> ListNetdevs() override {
    DIR* d = opendir(dir_.c_str());
    if (d == nullptr) return ErrnoToStatus(errno, dir_);
    std::vector<std::string> out;
    while (dirent* e = readdir(d)) {
      absl::string_view name = e->d_name;
      // Hidden files are a writer's temporaries (write + rename).
      if (name.empty() || name[0] == '.' || name.size() >= IFNAMSIZ) continue;
      struct stat st;
      std::string path = absl::StrCat(dir_, "/", name);
      if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      out.emplace_back(name);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::unique_ptr<EthtoolStatsReader> Open(const std::string& netdev) override {
    return std::make_unique<FileReader>(absl::StrCat(dir_, "/", netdev));
  }
  bool HasStandardStats() const override { return false; }
  absl::StatusOr<PauseStats> ReadPause(const std::string&) override {
    return absl::UnimplementedError("no ethtool netlink with --ethtool-dir");
  }
  absl::StatusOr<FecStats> ReadFec(const std::string&) override {
    return absl::UnimplementedError("no ethtool netlink with --ethtool-dir");
  }
  absl::StatusOr<uint32_t> LinkSpeedMbps(const std::string& netdev) override {
    if (netdev.empty() || netdev.size() >= IFNAMSIZ || netdev.find('/') != std::string::npos) {
      return absl::NotFoundError(absl::StrCat("no netdev named '", netdev, "'"));
    }
    const std::string path = absl::StrCat(sysfs_root_, "/class/net/", netdev, "/speed");
    absl::StatusOr<std::string> text = ReadAttribute(path);
    // The kernel refuses the read with EINVAL (Unimplemented) whenever it has
    // no link settings to show: the interface is down, or its driver has none.
    if (absl::IsUnimplemented(text.status())) return 0;
    if (!text.ok()) return text.status();
    absl::StatusOr<uint32_t> speed = ParseSysfsSpeed(*text);
    if (!speed.ok()) return UnparsableError(absl::StrCat(path, ": ", speed.status().message()));
    return speed;
  }

 private:
  const std::string dir_;
  const std::string sysfs_root_;
};

}  // namespace

std::string TrimStatName(const char* raw, size_t max_len) {
  size_t len = strnlen(raw, max_len);
  return std::string(absl::StripAsciiWhitespace(absl::string_view(raw, len)));
}

std::unique_ptr<EthtoolStatsSource> MakeKernelEthtoolSource(absl::Duration names_refresh) {
  return std::make_unique<KernelSource>(names_refresh);
}

std::unique_ptr<EthtoolStatsSource> MakeDirEthtoolSource(std::string dir, std::string sysfs_root) {
  return std::make_unique<DirSource>(std::move(dir), std::move(sysfs_root));
}

absl::StatusOr<uint32_t> ParseSysfsSpeed(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  if (t == "-1") return 0;
  uint32_t mbps = 0;
  if (t.empty() || t.size() > 10 || !absl::SimpleAtoi(t, &mbps) || t[0] == '+' ||
      mbps > INT32_MAX) {
    return UnparsableError(
        absl::StrCat("speed '", absl::CHexEscape(t.substr(0, 16)), "' is not a number of Mb/s"));
  }
  return mbps;
}

}  // namespace fabricscope
