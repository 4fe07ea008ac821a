#include "collectors/sysfs_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/errors.h"

namespace fabricscope {

absl::StatusOr<uint64_t> ParseCounter(absl::string_view text) {
  if (absl::StartsWith(text, "N/A")) {
    return absl::UnimplementedError("counter not available (N/A)");
  }
  if (text.empty()) return UnparsableError("empty counter file");
  // The kernel always ends a counter attribute with a newline: a value
  // without one is a truncated or torn read ("742" of "742114\n"), and taking
  // it would fake a reset and then a huge jump.
  if (text.back() != '\n') {
    return UnparsableError(absl::StrCat("counter value without its newline (truncated?): \"",
                                        absl::CEscape(text.substr(0, 32)), "\""));
  }
  text.remove_suffix(1);
  if (text.empty()) return UnparsableError("empty counter file");
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return UnparsableError(
          absl::StrCat("not a decimal counter: \"", absl::CEscape(text.substr(0, 32)), "\""));
    }
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) {
      return UnparsableError(absl::StrCat("counter overflows 64 bits: ", text.substr(0, 32)));
    }
    v = v * 10 + d;
  }
  return v;
}

CounterFile::CounterFile(CounterFile&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

CounterFile& CounterFile::operator=(CounterFile&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

absl::StatusOr<CounterFile> CounterFile::Open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  return CounterFile(fd);
}

absl::StatusOr<uint64_t> CounterFile::Read() const {
  char buf[kBufferSize];
  ssize_t n;
  do {
    n = ::pread(fd_, buf, sizeof(buf), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoToStatus(errno, absl::StrCat("read fd ", fd_));
  if (static_cast<size_t>(n) == sizeof(buf)) {
    return UnparsableError(absl::StrCat("counter file longer than ", sizeof(buf), " bytes"));
  }
  return ParseCounter(absl::string_view(buf, static_cast<size_t>(n)));
}

void CounterFile::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

absl::StatusOr<std::string> ReadAttribute(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  char buf[4096];
  ssize_t n;
  do {
    n = ::pread(fd, buf, sizeof(buf), 0);
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoToStatus(err, absl::StrCat("read ", path));
  absl::string_view text(buf, static_cast<size_t>(n));
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

absl::StatusOr<uint64_t> ReadUintAttribute(const std::string& path) {
  absl::StatusOr<std::string> text = ReadAttribute(path);
  if (!text.ok()) return text.status();
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) {
    return UnparsableError(absl::StrCat(
        path, ": not a number: \"", absl::CEscape(absl::string_view(*text).substr(0, 32)), "\""));
  }
  return v;
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return ErrnoToStatus(errno, absl::StrCat("opendir ", path));
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(dir)) {
    absl::string_view name(e->d_name);
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return ErrnoToStatus(err, absl::StrCat("readdir ", path));
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace fabricscope
