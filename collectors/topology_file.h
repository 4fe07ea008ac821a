// The topology file (--topology-file): link partners exported from a site's
// cabling inventory (NetBox, UFM, ibnetdiscover output turned into lines),
// for ports whose partner LLDP or MADs cannot tell.
//
// Format (docs/topology-file.md): UTF-8 text, one link per line, `#` starts
// a comment (outside quotes), blank lines are ignored. A line is
// whitespace-separated key=value fields; a value with blanks is written in
// double quotes, where \" and \\ stand for " and \.
//
//   # host      this end                        the other end
//   host=gpu-17 netdev=ens1f0np0                system=leaf07 port=Ethernet1/12
//   host=gpu-17 port_guid=0x1070fd0300b2c3d4    system="QM9700 spine02" port=17
//   chassis=0x98039b0300a1b2c3 host=*      netdev=eth2                     system=leaf01 port=swp2
//   description="to gpu rack 3"
//
// Keys: host (required: the host name as gethostname(2) returns it, its
// short form before the first dot, or * for every host), exactly one of
// netdev and port_guid (an InfiniBand port GUID, 0x-prefixed hex or
// colon-grouped as sysfs prints GIDs; compared with the interface id of the
// port's GID 0), then the partner: system (its system name), port (its port
// id), chassis (its chassis id or node GUID), description (its port
// description). At least one of system and chassis is required. Unknown keys
// are an error (a typo must not silently drop a field).
//
// A bad line is skipped and reported with its line number; the other lines
// still count. A file longer than kMaxTopologyFileBytes is refused whole.
//
// Thread-safety: TopologyFileSource is used from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectors/topology_sources.h"

namespace fabricscope {

inline constexpr size_t kMaxTopologyFileBytes = 16 << 20;

// One parsed line: the local end and the partner (source "file").
struct TopologyFileEntry {
  std::string host;
  std::string netdev;      // empty when keyed by port GUID
  uint64_t port_guid = 0;  // 0 when keyed by netdev
  LinkPartner partner;     // source, chassis_id, system_name, port_id, port_description
  int line = 0;
};

struct ParsedTopologyFile {
  std::vector<TopologyFileEntry> entries;
  // One message per skipped line: "line 7: unknown key \"sytem\"".
  std::vector<std::string> errors;
};

// Parses the text of a topology file (the format above).
ParsedTopologyFile ParseTopologyFile(absl::string_view text);

// Parses "0x1070fd0300b2c3d4", "1070:fd03:00b2:c3d4" or a full GID
// "fe80:0000:0000:0000:1070:fd03:00b2:c3d4" (its low 64 bits) into a GUID.
absl::StatusOr<uint64_t> ParsePortGuid(absl::string_view text);

// Whether `pattern` (a host= value) names the host `hostname`.
bool TopologyHostMatches(absl::string_view pattern, absl::string_view hostname);

// The file as a LinkPartnerSource: re-read when its size or modification time
// changes (checked with one stat(2) per call), matched against `hostname` and
// the ports' GUIDs (read from <sysfs_root>/class/infiniband/<dev>/ports/<p>/
// gids/0). Errors: NotFound while the file does not exist or cannot be read
// (its partners go), ResourceExhausted when it is too large. Bad lines are a
// warning (TakeWarning: DataLoss naming the first bad line and how many),
// once per version of the file; the good lines are used.
class TopologyFileSource final : public LinkPartnerSource {
 public:
  TopologyFileSource(std::string path, std::string sysfs_root, std::string hostname);

  absl::string_view name() const override { return "file"; }
  absl::StatusOr<std::vector<LinkPartner>> Partners(
      const std::vector<PortInfo>& ports, const std::vector<std::string>& extra_netdevs) override;
  absl::Status TakeWarning() override;

 private:
  // Re-reads the file when its size or modification time changed.
  absl::Status Refresh();

  const std::string path_;
  const std::string sysfs_root_;
  const std::string hostname_;
  std::vector<TopologyFileEntry> entries_;  // this host's lines of the last good read
  int64_t mtime_ns_ = -1;
  int64_t size_ = -1;
  absl::Status warning_;
};

}  // namespace fabricscope
