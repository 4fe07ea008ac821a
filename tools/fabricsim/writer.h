// fabricsim output: the counter file sets of a modelled port (shared by the
// live tree and the recording, so both always agree), the live fake
// sysfs/ethtool tree, the JSON Lines recording, spans and ground truth as JSON.
//
// Thread-safety: none; one thread drives each writer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tools/fabricsim/model.h"
#include "tools/fabricsim/scenario.h"

namespace fabricsim {

struct CounterValue {
  std::string name;
  uint64_t value;
};

// The counter files of one port, in the driver's names, units and widths
// (Q-counters wrap at 32 bits, IB PMA error counters saturate).
std::vector<CounterValue> HwCounters(const PortCounters& c);   // hw_counters/* (no lifespan)
std::vector<CounterValue> PmaCounters(const PortCounters& c);  // counters/*
// `ethtool -S` names, in mlx5 order; per-priority pause names only for the
// PFC-enabled priority.
std::vector<CounterValue> EthtoolCounters(const PortCounters& c, int pfc_priority);
// ethtool netlink FEC statistics (total only).
std::vector<CounterValue> FecCounters(const PortCounters& c);
// The `ethtool -S` text of a port: "NIC statistics:" then 5-space indented lines.
std::string EthtoolText(const PortCounters& c, int pfc_priority);

// The text of iproute2's `dcb pfc show dev <netdev>` for a port with PFC on
// `pfc_priority` only (what fabricscoped --dcb-dir reads).
std::string DcbPfcShowText(int pfc_priority);

// The hw_counters names read on the daemon's hot tier (recorded every sample):
// core/hot_counters.h, the daemon's own default.
const std::vector<std::string>& HotCounterNames();

// Writes `content` to `path` atomically: a temporary file in `tmp_dir` (same
// file system, a directory readers do not list) renamed over `path`.
absl::Status WriteFileAtomic(const std::string& tmp_dir, const std::string& path,
                             absl::string_view content);

// The live tree: `sysfs_root` laid out like /sys for mlx5 RoCE ports
// (class/infiniband/<dev>/..., class/net/<netdev>/...) and `ethtool_dir` with
// one `ethtool -S` file per netdev. Either may be empty (not written).
// set_dcb_dir() adds a directory with one `dcb pfc show` file per netdev
// (DcbPfcShowText; PFC configuration that dcbnl cannot give for netdevs the
// kernel does not have), written once.
//
// Counter files (hw_counters/*, counters/*) are updated in place (pwrite at
// offset 0, like a sysfs file's content changes under an open descriptor):
// fabricscoped keeps them open and preads them, and would never see a renamed
// replacement. A value that gets shorter (a 32-bit wrap) is truncated after
// the write. Every other file (state, ethtool -S text, ...) is replaced
// atomically (WriteFileAtomic), since readers open those per read.
// Only files whose content changed are rewritten; the IB PMA counters/ files
// (a slow-tier read) only on every 10th Write().
// What the tree writer reads of one host: its ports with their counters and
// status (pointers into the model, valid for the call).
struct TreeSource {
  int pfc_priority = 3;
  double line_rate_gbps = 200;
  std::vector<PortInfo> ports;
  std::vector<const PortCounters*> counters;  // per port
  std::vector<const PortStatus*> status;      // per port
};
TreeSource SourceOf(const Fabric& fabric);

class TreeWriter {
 public:
  // `host_index` varies the node GUIDs between hosts of a fleet (0: the
  // single-host values).
  TreeWriter(std::string sysfs_root, std::string ethtool_dir, int host_index = 0)
      : sysfs_root_(std::move(sysfs_root)),
        ethtool_dir_(std::move(ethtool_dir)),
        host_index_(host_index) {}
  ~TreeWriter();
  // Where to write the `dcb pfc show` files (empty: not written). Before the
  // first Write().
  void set_dcb_dir(std::string dcb_dir) { dcb_dir_ = std::move(dcb_dir); }
  TreeWriter(const TreeWriter&) = delete;
  TreeWriter& operator=(const TreeWriter&) = delete;
  absl::Status Write(const Fabric& fabric) { return Write(SourceOf(fabric)); }
  absl::Status Write(const TreeSource& source);
  // Files written (not skipped as unchanged) so far.
  uint64_t files_written() const { return files_written_; }

 private:
  absl::Status Put(const std::string& tmp_dir, const std::string& path, const std::string& content);
  absl::Status PutInPlace(const std::string& path, const std::string& content);
  absl::Status WriteStatic(const TreeSource& source);

  std::string sysfs_root_, ethtool_dir_, dcb_dir_;
  int host_index_ = 0;
  bool static_done_ = false;
  uint64_t writes_ = 0;
  std::map<std::string, std::string> last_;
  std::map<std::string, int> fds_;  // counter files, kept open
  uint64_t files_written_ = 0;
};

// A span as one JSON object (the `fabricscope push` input line, and the value
// of {"span": ...} in a recording).
// A decode step's all-reduce as NCCL's Inspector profiler plugin dumps it
// (one verbose coll_perf object a line, daemon/ingest/nccl_inspector.h): the
// step's communication phase, communicator "tp<port>" of 8 ranks, process
// `pid`, collective sequence number `sn`.
std::string InspectorJson(const SpanRecord& step, int port_index, int64_t start_unix_ns,
                          uint64_t sn, int pid);

std::string SpanJson(const SpanRecord& span, const PortInfo& port, int64_t start_unix_ns,
                     absl::string_view scenario);

// The ground-truth document. `end_unix_ns` < 0 writes null (run in progress);
// events still running at `now_ns` get "end_unix_nano": null too.
std::string GroundTruthJson(const Scenario& scenario, uint64_t seed, const Fabric& fabric,
                            int64_t start_unix_ns, int64_t now_ns, bool finished);

// JSON Lines recording (docs/recording.md). Every `interval` of model time it
// writes the hot hw_counters; every 10 intervals the other hw_counters, the
// ethtool and FEC counters; every 100 intervals the IB PMA counters/.
class RecordingWriter {
 public:
  RecordingWriter(std::FILE* out, int64_t start_unix_ns)
      : out_(out), start_unix_ns_(start_unix_ns) {}
  void Sample(const Fabric& fabric);
  void Span(const std::string& span_json);
  bool ok() const { return ok_; }

 private:
  void Line(const std::string& line);
  std::FILE* out_;
  int64_t start_unix_ns_;
  uint64_t samples_ = 0;
  bool ok_ = true;
};

}  // namespace fabricsim
