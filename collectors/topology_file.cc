#include "collectors/topology_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "collectors/sysfs_reader.h"
#include "core/errors.h"

namespace fabricscope {
namespace {

struct Field {
  std::string key;
  std::string value;
};

// Splits one line into key=value fields; false with `error` set on bad syntax.
// A '#' outside quotes ends the line.
bool SplitFields(absl::string_view line, std::vector<Field>* fields, std::string* error) {
  size_t i = 0;
  const size_t n = line.size();
  while (true) {
    while (i < n && absl::ascii_isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i >= n || line[i] == '#') return true;
    size_t eq = i;
    while (eq < n && line[eq] != '=' &&
           !absl::ascii_isspace(static_cast<unsigned char>(line[eq]))) {
      ++eq;
    }
    if (eq >= n || line[eq] != '=') {
      *error = absl::StrCat("expected key=value at \"", line.substr(i, eq - i), "\"");
      return false;
    }
    Field f;
    f.key = std::string(line.substr(i, eq - i));
    if (f.key.empty()) {
      *error = "empty key before '='";
      return false;
    }
    i = eq + 1;
    if (i < n && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < n) {
        char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < n && (line[i] == '"' || line[i] == '\\')) c = line[i++];
        f.value.push_back(c);
      }
      if (!closed) {
        *error = absl::StrCat("unterminated quote in the value of ", f.key);
        return false;
      }
      if (i < n && !absl::ascii_isspace(static_cast<unsigned char>(line[i])) && line[i] != '#') {
        *error = absl::StrCat("text after the closing quote of ", f.key);
        return false;
      }
    } else {
      size_t end = i;
      while (end < n && !absl::ascii_isspace(static_cast<unsigned char>(line[end]))) ++end;
      f.value = std::string(line.substr(i, end - i));
      if (f.value.find('"') != std::string::npos) {
        *error = absl::StrCat("a quote inside the unquoted value of ", f.key);
        return false;
      }
      i = end;
    }
    fields->push_back(std::move(f));
  }
}

// Fills `entry` from `fields`; false with `error` set when they do not make a
// link.
bool BuildEntry(const std::vector<Field>& fields, TopologyFileEntry* entry, std::string* error) {
  bool have_guid = false;
  for (const Field& f : fields) {
    std::string* target = nullptr;
    if (f.key == "host") {
      target = &entry->host;
    } else if (f.key == "netdev") {
      target = &entry->netdev;
    } else if (f.key == "port_guid") {
      absl::StatusOr<uint64_t> guid = ParsePortGuid(f.value);
      if (!guid.ok()) {
        *error = absl::StrCat("port_guid: ", guid.status().message());
        return false;
      }
      if (have_guid) {
        *error = "port_guid given twice";
        return false;
      }
      entry->port_guid = *guid;
      have_guid = true;
      continue;
    } else if (f.key == "system") {
      target = &entry->partner.system_name;
    } else if (f.key == "port") {
      target = &entry->partner.port_id;
    } else if (f.key == "chassis") {
      target = &entry->partner.chassis_id;
    } else if (f.key == "description") {
      target = &entry->partner.port_description;
    } else {
      *error = absl::StrCat("unknown key \"", f.key, "\"");
      return false;
    }
    if (!target->empty()) {
      *error = absl::StrCat(f.key, " given twice");
      return false;
    }
    if (f.value.empty()) {
      *error = absl::StrCat(f.key, " is empty");
      return false;
    }
    *target = f.value;
  }
  if (entry->host.empty()) {
    *error = "host is missing";
    return false;
  }
  if (entry->netdev.empty() == !have_guid) {
    *error = "give exactly one of netdev and port_guid";
    return false;
  }
  if (entry->partner.system_name.empty() && entry->partner.chassis_id.empty()) {
    *error = "the partner needs system or chassis";
    return false;
  }
  entry->partner.source = "file";
  return true;
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

ParsedTopologyFile ParseTopologyFile(absl::string_view text) {
  ParsedTopologyFile out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    std::vector<Field> fields;
    std::string error;
    if (!SplitFields(line, &fields, &error)) {
      out.errors.push_back(absl::StrCat("line ", line_no, ": ", error));
      continue;
    }
    if (fields.empty()) continue;
    TopologyFileEntry entry;
    entry.line = line_no;
    if (!BuildEntry(fields, &entry, &error)) {
      out.errors.push_back(absl::StrCat("line ", line_no, ": ", error));
      continue;
    }
    out.entries.push_back(std::move(entry));
  }
  return out;
}

absl::StatusOr<uint64_t> ParsePortGuid(absl::string_view text) {
  std::string hex;
  if (absl::StartsWithIgnoreCase(text, "0x")) {
    hex = std::string(text.substr(2));
    if (hex.find(':') != std::string::npos) hex.clear();
  } else {
    std::vector<absl::string_view> groups = absl::StrSplit(text, ':');
    // 4 groups: a GUID as sysfs prints node_guid; 8 groups: a GID, whose low
    // 64 bits are the port GUID.
    if (groups.size() == 8) groups.erase(groups.begin(), groups.begin() + 4);
    if (groups.size() == 4) {
      for (absl::string_view g : groups) {
        if (g.size() != 4) {
          hex.clear();
          break;
        }
        absl::StrAppend(&hex, g);
      }
    }
  }
  uint64_t guid = 0;
  if (hex.empty() || hex.size() > 16 || !absl::SimpleHexAtoi(hex, &guid) ||
      hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
    return UnparsableError(absl::StrCat("not a port GUID: \"", text,
                                        "\" (expected 0x<16 hex digits> or xxxx:xxxx:xxxx:xxxx)"));
  }
  return guid;
}

bool TopologyHostMatches(absl::string_view pattern, absl::string_view hostname) {
  if (pattern == "*") return true;
  if (absl::EqualsIgnoreCase(pattern, hostname)) return true;
  // The short name matches the FQDN, and the other way round.
  const absl::string_view short_host = hostname.substr(0, hostname.find('.'));
  const absl::string_view short_pattern = pattern.substr(0, pattern.find('.'));
  return absl::EqualsIgnoreCase(short_pattern, short_host) &&
         (pattern.find('.') == absl::string_view::npos ||
          hostname.find('.') == absl::string_view::npos);
}

TopologyFileSource::TopologyFileSource(std::string path, std::string sysfs_root,
                                       std::string hostname)
    : path_(std::move(path)), sysfs_root_(std::move(sysfs_root)), hostname_(std::move(hostname)) {}

absl::Status TopologyFileSource::Refresh() {
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) {
    const int err = errno;
    entries_.clear();
    mtime_ns_ = size_ = -1;
    return ErrnoToStatus(err, absl::StrCat("topology file ", path_));
  }
  if (MtimeNs(st) == mtime_ns_ && st.st_size == size_) return absl::OkStatus();
  if (st.st_size > static_cast<off_t>(kMaxTopologyFileBytes)) {
    entries_.clear();
    mtime_ns_ = size_ = -1;
    return absl::ResourceExhaustedError(absl::StrCat("topology file ", path_, " is ", st.st_size,
                                                     " bytes; the limit is ",
                                                     kMaxTopologyFileBytes));
  }
  std::ifstream in(path_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    entries_.clear();
    mtime_ns_ = size_ = -1;
    return absl::NotFoundError(absl::StrCat("topology file ", path_, ": cannot read it"));
  }
  ParsedTopologyFile parsed = ParseTopologyFile(text.str());
  entries_.clear();
  for (TopologyFileEntry& e : parsed.entries) {
    if (TopologyHostMatches(e.host, hostname_)) entries_.push_back(std::move(e));
  }
  mtime_ns_ = MtimeNs(st);
  size_ = st.st_size;
  if (!parsed.errors.empty()) {
    warning_ = UnparsableError(absl::StrCat("topology file ", path_, ": ", parsed.errors.size(),
                                            " bad line(s) skipped; ", parsed.errors.front()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LinkPartner>> TopologyFileSource::Partners(
    const std::vector<PortInfo>& ports, const std::vector<std::string>& extra_netdevs) {
  if (absl::Status s = Refresh(); !s.ok()) return s;
  std::vector<LinkPartner> out;
  bool need_guids = false;
  for (const TopologyFileEntry& e : entries_) need_guids |= e.port_guid != 0;
  // The GUID of each InfiniBand port (GID 0's interface id), read only when a
  // line is keyed by GUID.
  std::vector<std::pair<uint64_t, const PortInfo*>> guids;
  if (need_guids) {
    for (const PortInfo& p : ports) {
      absl::StatusOr<std::string> gid = ReadAttribute(
          absl::StrCat(sysfs_root_, "/class/infiniband/", p.device, "/ports/", p.port, "/gids/0"));
      if (!gid.ok()) continue;
      absl::StatusOr<uint64_t> guid = ParsePortGuid(*gid);
      if (guid.ok() && *guid != 0) guids.emplace_back(*guid, &p);
    }
  }
  for (const TopologyFileEntry& e : entries_) {
    LinkPartner partner = e.partner;
    if (e.port_guid != 0) {
      for (const auto& [guid, port] : guids) {
        if (guid != e.port_guid) continue;
        partner.device = port->device;
        partner.port = port->port;
        partner.netdev = port->netdev;
        out.push_back(partner);
        break;
      }
    } else {
      partner.netdev = e.netdev;
      out.push_back(std::move(partner));
    }
  }
  (void)extra_netdevs;  // the collector drops partners of interfaces it does not watch
  return out;
}

absl::Status TopologyFileSource::TakeWarning() { return std::exchange(warning_, absl::OkStatus()); }

}  // namespace fabricscope
