// The port inventory: every RDMA port a collector (or a replayed recording)
// has discovered, with the attributes fabricscope_port_info renders.
//
// Who writes, who reads: the rdma_sysfs collector upserts a port at
// discovery and whenever its attributes change (hot-plug, link state);
// replay (daemon/recording) upserts the ports a recording names. The netdev,
// ethtool and dcb_config collectors read it at discovery to know which
// interfaces belong to RDMA ports, which is why the collector registry
// creates and discovers a collector that reads the inventory after the one
// that writes it (collectors/registry.h, CollectorDeps). The
// detectors (link rates), the correlator (span scope), the query engine and
// the Prometheus exporter read it too.
//
// Records are keyed by (device, port): Upsert replaces the record with the
// same key in place, else appends. A port that vanished is upserted with
// present = false; records are never removed.
//
// Thread-safety: all methods are thread-safe (one mutex, held only to copy
// or replace records). Readers get copies.
//
// Ownership: the daemon owns one PortInventory next to its Store (the CLI's
// analyze builds one per recording); users hold plain pointers that it
// outlives.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"

namespace fabricscope {

// An RDMA port as discovered by a collector (inventory, fabricscope_port_info).
struct PortInfo {
  std::string device;
  uint32_t port = 0;
  std::string netdev;
  std::string link_layer;  // "Ethernet" or "InfiniBand"
  std::string state;       // "ACTIVE", "DOWN", ...
  std::string rate;        // "100 Gb/sec (4X EDR)"
  bool present = true;
};

class PortInventory {
 public:
  PortInventory() = default;
  PortInventory(const PortInventory&) = delete;
  PortInventory& operator=(const PortInventory&) = delete;

  // Inserts `port`, or replaces the record with the same (device, port),
  // keeping its position.
  void Upsert(const PortInfo& port);

  // Every record, in first-insertion order.
  std::vector<PortInfo> List() const;

 private:
  mutable std::mutex mu_;
  std::vector<PortInfo> ports_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fabricscope
