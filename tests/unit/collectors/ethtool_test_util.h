// Helpers shared by the ethtool/dcb_config collector tests: a recording
// PollContext, a temporary directory, fixture access.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "collectors/collector.h"
#include "store/store.h"

namespace fabricscope::ethtool_test {

class RecordingContext final : public PollContext {
 public:
  struct Err {
    CollectorErrorCode code;
    std::string key;
    std::string detail;
  };
  explicit RecordingContext(Store* store) : store_(store) {}
  Tier tier() const override { return Tier::kMedium; }
  int64_t ts_ns() const override { return ts_ns_; }
  void Append(SeriesId id, uint64_t raw) override {
    store_->Append(id, ts_ns_, raw);
    ++appends;
  }
  void RecordError(CollectorErrorCode code, absl::string_view key,
                   absl::string_view detail) override {
    errors.push_back({code, std::string(key), std::string(detail)});
  }
  void Advance() { ts_ns_ += 100'000'000; }
  int Count(CollectorErrorCode code) const {
    int n = 0;
    for (const auto& e : errors) n += e.code == code;
    return n;
  }
  std::string ErrorsText() const {
    std::string out;
    for (const auto& e : errors) {
      absl::StrAppend(&out, CollectorErrorCodeName(e.code), " ", e.key, ": ", e.detail, "\n");
    }
    return out;
  }
  std::vector<Err> errors;
  uint64_t appends = 0;

 private:
  Store* store_;
  int64_t ts_ns_ = 1'700'000'000'000'000'000;
};

inline std::string SourceDir() {
  const char* src = std::getenv("FABRICSCOPE_SOURCE_DIR");
  return src ? src : ".";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  std::filesystem::rename(tmp, path);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fs-ethtool-XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = mkdtemp(buf.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// "family{label="v",...} raw_name value" for every present series of `source`.
inline std::vector<std::string> ExportedLines(const Store& store, absl::string_view netdev) {
  std::vector<std::string> out;
  for (const SeriesSnapshot& s : store.Snapshot()) {
    if (!s.state.present || !s.state.has_value || s.key->netdev != netdev) continue;
    std::vector<std::string> labels;
    for (size_t i = 0; i < s.signal->family->labels.size(); ++i) {
      labels.push_back(
          absl::StrCat(s.signal->family->labels[i], "=\"", s.signal->label_values[i], "\""));
    }
    out.push_back(absl::StrCat(s.signal->family->name, "{", absl::StrJoin(labels, ","), "} ",
                               s.key->source, "/", s.key->name, " raw=", s.state.last_raw,
                               " value=", absl::StrFormat("%.12g", s.state.total)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace fabricscope::ethtool_test
