#include "collectors/topology_collector.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "collectors/ib_mad_source.h"
#include "collectors/lldp_source.h"
#include "collectors/pci_topology.h"
#include "collectors/sysfs_reader.h"
#include "collectors/topology_file.h"
#include "core/metrics.h"

namespace fabricscope {
namespace {

const MetricSpec& kSourceUp = DefineMetric(
    {.name = "fabricscope_topology_source_up",
     .type = MetricType::kGauge,
     .help = "1 when the topology source answered on the last config tick, 0 when it failed or "
             "is not available (lldpd not running, no umad device, topology file missing).",
     .labels = {"source"},
     .component = "topology"});

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

// Its options.
const OptionKey<std::string> kLldpdSocket{"lldpd-socket", "/run/lldpd.socket"};
const OptionKey<bool> kIbMadTopology{"ib-mad-topology", false};
const OptionKey<std::string> kTopologyFile{"topology-file", ""};
const OptionKey<std::string> kHwlocXml{"hwloc-xml", ""};

}  // namespace

std::vector<OptionSpec> TopologyCollector::Options() {
  return {
      option::Path(kLldpdSocket, "PATH",
                   "lldpd's control socket, read by the topology collector for LLDP neighbours "
                   "(the daemon's user must be able to connect: root or group _lldpd). Empty "
                   "disables LLDP.",
                   PathAccess::kSocket),
      option::Bool(kIbMadTopology,
                   "Ask each InfiniBand port's peer for its NodeDescription, NodeGUID and port "
                   "number with directed-route SMPs (needs read-write access to "
                   "/dev/infiniband/umad*)."),
      option::Path(kTopologyFile, "FILE",
                   "Link partners from a cabling inventory (docs/topology-file.md); re-read when "
                   "it changes. Live LLDP/SMP answers win over it.",
                   PathAccess::kReadFile),
      option::Path(kHwlocXml, "FILE",
                   "Load the PCI tree (GPU-NIC affinity) from this hwloc XML export instead of "
                   "discovering the host (tests, offline analysis).",
                   PathAccess::kReadFile),
  };
}

absl::StatusOr<std::unique_ptr<Collector>> TopologyCollector::Create(const CollectorContext& ctx) {
  if (ctx.options == nullptr || ctx.ports == nullptr) {
    return absl::InvalidArgumentError("topology needs options and a port inventory");
  }
  const CollectorOptions& o = *ctx.options;
  TopologySources sources;
  sources.errors = std::make_shared<TopologyErrorSink>();
  if (o.values.Get(kIbMadTopology)) {
    IbMadSourceOptions ib;
    ib.port_error = [sink = sources.errors](const absl::Status& status, absl::string_view key) {
      sink->Report(status, absl::StrCat("topology/ib_mad/", key));
    };
    sources.partners.push_back(MakeIbMadSource(std::move(ib)));
  }
  const std::string lldpd_socket = o.values.Get(kLldpdSocket);
  const std::string topology_file = o.values.Get(kTopologyFile);
  if (!lldpd_socket.empty()) sources.partners.push_back(MakeLldpSource(lldpd_socket));
  if (!topology_file.empty()) {
    sources.partners.push_back(
        std::make_unique<TopologyFileSource>(topology_file, o.sysfs_root, HostName()));
  }
  sources.pci = MakeHwlocPciSource(o.sysfs_root, o.values.Get(kHwlocXml));
  return std::make_unique<TopologyCollector>(ctx.ports, ctx.metrics, o.sysfs_root, o.netdev_include,
                                             std::move(sources));
}

TopologyCollector::TopologyCollector(PortInventory* ports, MetricsRegistry* metrics,
                                     std::string sysfs_root, NetdevFilter netdev_include,
                                     TopologySources sources)
    : ports_(ports),
      sysfs_root_(std::move(sysfs_root)),
      include_(std::move(netdev_include)),
      sources_(std::move(sources)) {
  if (metrics != nullptr) source_up_ = &metrics->Gauge(kSourceUp);
}

absl::Status TopologyCollector::Discover(PollContext&) {
  // Nothing to find up front: the config tier polls once as soon as the
  // scheduler starts, and that first tick builds the topology (asking lldpd,
  // the umad ports and hwloc here as well would do all of it twice at start).
  return absl::OkStatus();
}

void TopologyCollector::Report(PollContext& ctx, const std::string& source,
                               const absl::Status& status) {
  std::string& last = reported_[source];
  if (status.ok()) {
    last.clear();
    return;
  }
  std::string now = status.ToString();
  if (now == last) return;
  last = std::move(now);
  ctx.Error(status, absl::StrCat("topology/", source));
}

void TopologyCollector::SetUp(const std::string& source, bool up) {
  if (source_up_ != nullptr) source_up_->Add({{"source", source}}).Set(up ? 1 : 0);
}

std::vector<std::string> TopologyCollector::ExtraNetdevs() const {
  std::vector<std::string> out;
  if (include_.empty()) return out;
  absl::StatusOr<std::vector<std::string>> names = ListDir(sysfs_root_ + "/class/net");
  if (!names.ok()) return out;
  for (std::string& n : *names) {
    if (include_.Matches(n)) out.push_back(std::move(n));
  }
  return out;
}

absl::Status TopologyCollector::Poll(PollContext& ctx) {
  if (sources_.errors != nullptr) sources_.errors->ctx = &ctx;
  absl::Cleanup detach = [this] {
    if (sources_.errors != nullptr) sources_.errors->ctx = nullptr;
  };
  std::vector<PortInfo> ports = ports_->List();
  ports.erase(
      std::remove_if(ports.begin(), ports.end(), [](const PortInfo& p) { return !p.present; }),
      ports.end());
  const std::vector<std::string> extra = ExtraNetdevs();
  const absl::flat_hash_set<std::string> extra_set(extra.begin(), extra.end());

  HostTopology topo;
  // Ports (by index in `ports`) and extra netdevs that already have a partner.
  std::vector<bool> port_taken(ports.size(), false);
  absl::flat_hash_set<std::string> netdev_taken;
  for (const std::unique_ptr<LinkPartnerSource>& source : sources_.partners) {
    const std::string name(source->name());
    absl::StatusOr<std::vector<LinkPartner>> found = source->Partners(ports, extra);
    Report(ctx, name, found.status());
    SetUp(name, found.ok());
    if (absl::Status w = source->TakeWarning(); !w.ok()) {
      ctx.Error(w, absl::StrCat("topology/", name));
    }
    if (!found.ok()) continue;
    for (LinkPartner& p : *found) {
      p.source = name;
      // Resolve the local end: an RDMA port of the inventory by (device,
      // port) or by netdev, else a watched extra interface.
      size_t i = 0;
      for (; i < ports.size(); ++i) {
        const bool by_port =
            !p.device.empty() && ports[i].device == p.device && ports[i].port == p.port;
        const bool by_netdev = p.device.empty() && !p.netdev.empty() && ports[i].netdev == p.netdev;
        if (by_port || by_netdev) break;
      }
      if (i < ports.size()) {
        if (port_taken[i]) continue;
        port_taken[i] = true;
        p.device = ports[i].device;
        p.port = ports[i].port;
        p.netdev = ports[i].netdev;
      } else if (p.device.empty() && extra_set.contains(p.netdev)) {
        if (!netdev_taken.insert(p.netdev).second) continue;
        p.port = 0;
      } else {
        continue;  // not a port we watch
      }
      topo.partners.push_back(std::move(p));
    }
  }
  std::sort(topo.partners.begin(), topo.partners.end(),
            [](const LinkPartner& a, const LinkPartner& b) {
              return std::tie(a.device, a.port, a.netdev) < std::tie(b.device, b.port, b.netdev);
            });

  if (sources_.pci != nullptr) {
    absl::StatusOr<PciPlacement> placement = sources_.pci->Placement(ports);
    Report(ctx, sources_.pci_name, placement.status());
    SetUp(sources_.pci_name, placement.ok());
    // A failed source places nothing: no stale placement is exported.
    if (placement.ok()) {
      topo.ports = std::move(placement->ports);
      topo.gpus = std::move(placement->gpus);
      topo.affinity = std::move(placement->affinity);
    }
  }

  if (!(topo == ports_->Topology())) ports_->SetTopology(std::move(topo));
  return absl::OkStatus();
}

}  // namespace fabricscope
