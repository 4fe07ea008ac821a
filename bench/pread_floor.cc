// pread_floor: the cost floor of reading counter files, for bench/run_all.
//
// Opens every counter file the rdma_sysfs collector reads under
// <root>/class/infiniband/*/ports/*/{hw_counters,counters,counters_ext}/*
// (not hw_counters/lifespan, a setting), keeps the descriptors open and then
// runs a plain loop: one pread(2) of each file at offset 0 into a stack
// buffer, nothing else but a byte sum so the reads cannot be elided. No
// parsing, no store, no threads, no sleeping: what a sweep of these files
// cannot go below on this kernel and filesystem.
//
//   pread_floor --root DIR [--sweeps N] [--interval-ms MS]
//
// --interval-ms > 0 sleeps (clock_nanosleep, absolute deadlines) between
// sweeps like the daemon's scheduler does (cold caches, one wake-up per sweep);
// 0 (default) runs the sweeps back to back.
//
// Prints one JSON object on stdout: files, sweeps, cpu_s (utime + stime of the
// process, getrusage), cpu_s_per_sweep, cpu_s_per_file, wall_s. Exit status 1 on
// a bad argument, an unreadable tree or a failed read.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    out.emplace_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double MonoSeconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

int Usage() {
  std::fprintf(stderr, "usage: pread_floor --root DIR [--sweeps N] [--interval-ms MS]\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string root;
  long sweeps = 1000;
  double interval_ms = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      if (a.rfind(prefix, 0) == 0) return argv[i] + prefix.size();
      if (a == name && i + 1 < argc) return argv[++i];
      return nullptr;
    };
    if (const char* v = value("--root")) {
      root = v;
    } else if (const char* v = value("--sweeps")) {
      sweeps = std::strtol(v, nullptr, 10);
    } else if (const char* v = value("--interval-ms")) {
      interval_ms = std::strtod(v, nullptr);
    } else {
      return Usage();
    }
  }
  if (root.empty() || sweeps <= 0 || sweeps > 100'000'000 || interval_ms < 0) return Usage();

  std::vector<int> fds;
  const std::string ib = root + "/class/infiniband";
  for (const std::string& dev : List(ib)) {
    const std::string ports = ib + "/" + dev + "/ports";
    for (const std::string& port : List(ports)) {
      for (const char* group : {"hw_counters", "counters", "counters_ext"}) {
        const std::string dir = ports + "/" + port + "/" + group;
        for (const std::string& name : List(dir)) {
          if (std::strcmp(group, "hw_counters") == 0 && name == "lifespan") continue;
          const int fd = open((dir + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
          if (fd < 0) {
            std::fprintf(stderr, "pread_floor: open %s/%s: %s\n", dir.c_str(), name.c_str(),
                         std::strerror(errno));
            return 1;
          }
          fds.push_back(fd);
        }
      }
    }
  }
  if (fds.empty()) {
    std::fprintf(stderr, "pread_floor: no counter files under %s\n", ib.c_str());
    return 1;
  }

  const long long interval_ns = static_cast<long long>(interval_ms * 1e6);
  timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  uint64_t sum = 0;
  const double c0 = CpuSeconds();
  const double w0 = MonoSeconds();
  for (long s = 0; s < sweeps; ++s) {
    for (int fd : fds) {
      char buf[64];
      const ssize_t n = pread(fd, buf, sizeof(buf), 0);
      if (n < 0) {
        std::fprintf(stderr, "pread_floor: pread: %s\n", std::strerror(errno));
        return 1;
      }
      for (ssize_t i = 0; i < n; ++i) sum += static_cast<unsigned char>(buf[i]);
    }
    if (interval_ns > 0) {
      next.tv_nsec += interval_ns % 1'000'000'000;
      next.tv_sec += interval_ns / 1'000'000'000 + next.tv_nsec / 1'000'000'000;
      next.tv_nsec %= 1'000'000'000;
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR) {
      }
    }
  }
  const double cpu = CpuSeconds() - c0;
  const double wall = MonoSeconds() - w0;
  for (int fd : fds) close(fd);
  std::printf(
      "{\"files\": %zu, \"sweeps\": %ld, \"interval_ms\": %g, \"cpu_s\": %.6f, "
      "\"cpu_s_per_sweep\": %.9f, \"cpu_s_per_file\": %.12f, \"wall_s\": %.6f, "
      "\"checksum\": %llu}\n",
      fds.size(), sweeps, interval_ms, cpu, cpu / static_cast<double>(sweeps),
      cpu / static_cast<double>(sweeps) / static_cast<double>(fds.size()), wall,
      static_cast<unsigned long long>(sum));
  return 0;
}
