#include "tools/fabricsim/fleet_output.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/json.h"

namespace fabricsim {
namespace {

using fabricscope::JsonString;

std::string Fraction(double v) { return absl::StrFormat("%.4f", v); }

std::string HostPortJson(const Fleet& fleet, int h) {
  const FleetTopology& t = fleet.topology();
  const PortInfo& info = fleet.port_info();
  return absl::StrCat(
      "{\"host\":", JsonString(t.HostName(h)), ",\"netdev\":", JsonString(info.netdev),
      ",\"device\":", JsonString(info.device), ",\"port\":", info.port,
      ",\"leaf\":", JsonString(FleetTopology::LeafName(t.LeafOf(h))),
      ",\"leaf_port\":", JsonString(FleetTopology::LeafDownPort(t.SlotOf(h))),
      ",\"leaf_chassis\":", JsonString(FleetTopology::LeafChassis(t.LeafOf(h))), "}");
}

std::string PortRefFields(const SwitchPortRef& ref) {
  return absl::StrCat("\"switch\":", JsonString(ref.switch_name),
                      ",\"port\":", JsonString(ref.port), ",\"toward\":", JsonString(ref.toward));
}

std::string EpisodeJson(const Fleet& fleet, const FleetScenario& scenario, int i,
                        int64_t start_unix_ns) {
  const FleetTopology& t = fleet.topology();
  const FleetTally* from = fleet.EpisodeStartTally(i);  // not null (the caller checks)
  const FleetTally* to = fleet.EpisodeEndTally(i);
  if (to == nullptr) to = &fleet.tally();
  const int64_t start = scenario.EpisodeStart(i);
  const int64_t end = scenario.EpisodeEnd(i);
  const bool running = fleet.now_ns() < end;
  const double elapsed =
      static_cast<double>(std::max<int64_t>(1, std::min(fleet.now_ns(), end) - start));
  const int target = scenario.TargetOf(i);
  auto frac = [&](const std::vector<double>& a, const std::vector<double>& b, size_t k) {
    return std::min(1.0, (b[k] - a[k]) / elapsed);
  };
  std::string out = absl::StrCat(
      "{\"index\":", i, ",\"kind\":", JsonString(scenario.name()),
      ",\"start_unix_nano\":", start_unix_ns + start,
      ",\"end_unix_nano\":", running ? std::string("null") : absl::StrCat(start_unix_ns + end),
      ",\"origin\":", scenario.target_is_origin() ? HostPortJson(fleet, target) : "null",
      ",\"target\":", HostPortJson(fleet, target), ",\"congested\":[");
  // Congested: egress queues paused or over Kmin for a share of the episode,
  // most congested first.
  struct Item {
    int index;
    double a, b;
  };
  std::vector<Item> items;
  for (int q = 0; q < fleet.egress_count(); ++q) {
    double paused = frac(from->egress_paused_ns, to->egress_paused_ns, q);
    double marking = frac(from->egress_marking_ns, to->egress_marking_ns, q);
    if (std::max(paused, marking) >= kCongestedFraction) items.push_back({q, paused, marking});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    return std::max(x.a, x.b) > std::max(y.a, y.b);
  });
  for (size_t k = 0; k < items.size(); ++k) {
    absl::StrAppend(&out, k ? "," : "", "{", PortRefFields(fleet.egress_ref(items[k].index)),
                    ",\"paused_fraction\":", Fraction(items[k].a),
                    ",\"marking_fraction\":", Fraction(items[k].b), "}");
  }
  absl::StrAppend(&out, "],\"pausing\":[");
  items.clear();
  for (int p = 0; p < fleet.ingress_count(); ++p) {
    double xoff = frac(from->ingress_xoff_ns, to->ingress_xoff_ns, p);
    if (xoff >= kPausingFraction) items.push_back({p, xoff, 0});
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& x, const Item& y) { return x.a > y.a; });
  for (size_t k = 0; k < items.size(); ++k) {
    absl::StrAppend(&out, k ? "," : "", "{", PortRefFields(fleet.ingress_ref(items[k].index)),
                    ",\"xoff_fraction\":", Fraction(items[k].a), "}");
  }
  absl::StrAppend(&out, "],\"victims\":[");
  bool first = true;
  std::string hosts;
  for (int h = 0; h < t.hosts; ++h) {
    double rx = frac(from->host_rx_paused_ns, to->host_rx_paused_ns, h);
    double tx = frac(from->host_tx_paused_ns, to->host_tx_paused_ns, h);
    if (rx >= kVictimRxPauseFraction && !(scenario.target_is_origin() && h == target)) {
      absl::StrAppend(&out, first ? "" : ",", JsonString(t.HostName(h)));
      first = false;
    }
    if (rx > 0 || tx > 0) {
      absl::StrAppend(&hosts, hosts.empty() ? "" : ",", "{\"host\":", JsonString(t.HostName(h)),
                      ",\"rx_pause_fraction\":", Fraction(rx),
                      ",\"tx_pause_fraction\":", Fraction(tx), "}");
    }
  }
  absl::StrAppend(&out, "],\"host_pause\":[", hosts, "]}");
  return out;
}

}  // namespace

std::string FleetTopologyFile(const Fleet& fleet, int host) {
  const FleetTopology& t = fleet.topology();
  const int leaf = t.LeafOf(host);
  return absl::StrCat(
      "# fabricsim ", t.HostName(host),
      ": its one RoCE port and the leaf port it is cabled to.\n"
      "# host=* because every simulated host's daemon runs on one machine (one hostname).\n",
      "host=* netdev=", fleet.port_info().netdev, " system=", FleetTopology::LeafName(leaf),
      " port=", FleetTopology::LeafDownPort(t.SlotOf(host)),
      " chassis=", FleetTopology::LeafChassis(leaf), "\n");
}

TreeSource FleetTreeSource(const Fleet& fleet, int host) {
  TreeSource source;
  source.pfc_priority = fleet.options().pfc_priority;
  source.line_rate_gbps = fleet.options().host_gbps;
  source.ports = {fleet.port_info()};
  source.counters = {&fleet.counters(host)};
  source.status = {&fleet.status(host)};
  return source;
}

std::string FleetGroundTruthJson(const Fleet& fleet, const FleetScenario& scenario,
                                 int64_t start_unix_ns, bool finished) {
  const FleetTopology& t = fleet.topology();
  const FleetEpisodeTiming& timing = scenario.timing();
  std::string out = absl::StrCat(
      "{\"scenario\":", JsonString(scenario.name()), ",\"seed\":", fleet.options().seed,
      ",\"fabric\":", JsonString(t.Describe()), ",\"hosts\":", t.hosts, ",\"leaves\":", t.leaves,
      ",\"spines\":", t.spines, ",\"pfc_priority\":", fleet.options().pfc_priority,
      ",\"step_ns\":", fleet.options().step_ns, ",\"start_unix_nano\":", start_unix_ns,
      ",\"now_unix_nano\":", start_unix_ns + fleet.now_ns(), ",\"end_unix_nano\":",
      finished ? absl::StrCat(start_unix_ns + fleet.now_ns()) : std::string("null"),
      ",\"episode_timing\":{\"first_start_ns\":", timing.first_start_ns,
      ",\"length_ns\":", timing.length_ns, ",\"period_ns\":", timing.period_ns, "}",
      ",\"thresholds\":{\"victim_rx_pause_fraction\":", kVictimRxPauseFraction,
      ",\"congested_fraction\":", kCongestedFraction, ",\"pausing_fraction\":", kPausingFraction,
      "},\n\"topology\":[");
  for (int h = 0; h < t.hosts; ++h) {
    absl::StrAppend(&out, h ? ",\n" : "\n", HostPortJson(fleet, h));
  }
  absl::StrAppend(&out, "],\n\"episodes\":[");
  const int started = scenario.EpisodesStartedBy(fleet.now_ns());
  for (int i = 0; i < started; ++i) {
    // Recorded at the first step of the episode: not yet when the run stops
    // exactly at its start.
    if (fleet.EpisodeStartTally(i) == nullptr) continue;
    absl::StrAppend(&out, i ? ",\n" : "\n", EpisodeJson(fleet, scenario, i, start_unix_ns));
  }
  absl::StrAppend(&out, "]}\n");
  return out;
}

FleetWriter::FleetWriter(std::string out_dir, int64_t start_unix_ns)
    : out_dir_(std::move(out_dir)), start_unix_ns_(start_unix_ns) {}

FleetWriter::~FleetWriter() {
  for (std::FILE* f : spans_) {
    if (f != nullptr) std::fclose(f);
  }
  for (std::FILE* f : inspector_) {
    if (f != nullptr) std::fclose(f);
  }
}

absl::Status FleetWriter::Init(const Fleet& fleet) {
  const FleetTopology& t = fleet.topology();
  std::error_code ec;
  std::filesystem::create_directories(out_dir_ + "/.fabricsim-tmp", ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", out_dir_, ": ", ec.message()));
  for (int h = 0; h < t.hosts; ++h) {
    const std::string dir = absl::StrCat(out_dir_, "/", t.HostName(h));
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
    if (auto s = WriteFileAtomic(out_dir_ + "/.fabricsim-tmp", dir + "/topology",
                                 FleetTopologyFile(fleet, h));
        !s.ok()) {
      return s;
    }
    trees_.push_back(std::make_unique<TreeWriter>(dir + "/sys", dir + "/ethtool", h + 1));
    std::FILE* f = std::fopen((dir + "/spans.jsonl").c_str(), "we");
    if (f == nullptr) return absl::InternalError(absl::StrCat("open ", dir, "/spans.jsonl"));
    spans_.push_back(f);
    std::filesystem::create_directories(dir + "/nccl-inspector", ec);
    if (ec)
      return absl::InternalError(absl::StrCat("mkdir ", dir, "/nccl-inspector: ", ec.message()));
    const std::string log =
        absl::StrCat(dir, "/nccl-inspector/fabricsim-pid", kFleetInspectorPid, ".log");
    std::FILE* in = std::fopen(log.c_str(), "we");
    if (in == nullptr) return absl::InternalError(absl::StrCat("open ", log));
    inspector_.push_back(in);
    inspector_sn_.push_back(0);
  }
  return absl::OkStatus();
}

absl::Status FleetWriter::WriteTrees(const Fleet& fleet) {
  for (int h = 0; h < static_cast<int>(trees_.size()); ++h) {
    if (auto s = trees_[h]->Write(FleetTreeSource(fleet, h)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status FleetWriter::WriteSpans(Fleet& fleet, const std::string& scenario) {
  for (int h = 0; h < static_cast<int>(spans_.size()); ++h) {
    for (const SpanRecord& span : fleet.TakeSpans(h)) {
      std::string line = SpanJson(span, fleet.port_info(), start_unix_ns_, scenario);
      line += '\n';
      if (std::fputs(line.c_str(), spans_[h]) < 0) {
        return absl::InternalError("writing spans.jsonl failed");
      }
      if (span.request) continue;  // a request has no collective of its own
      line = InspectorJson(span, 0, start_unix_ns_, ++inspector_sn_[h], kFleetInspectorPid);
      line += '\n';
      if (std::fputs(line.c_str(), inspector_[h]) < 0) {
        return absl::InternalError("writing the Inspector dump failed");
      }
    }
    if (std::fflush(spans_[h]) != 0) return absl::InternalError("writing spans.jsonl failed");
    if (std::fflush(inspector_[h]) != 0) {
      return absl::InternalError("writing the Inspector dump failed");
    }
  }
  return absl::OkStatus();
}

absl::Status FleetWriter::WriteGroundTruth(const Fleet& fleet, const FleetScenario& scenario,
                                           bool finished) {
  // Signature: episodes started plus episodes ended.
  int64_t sig = 0;
  const int started = scenario.EpisodesStartedBy(fleet.now_ns());
  for (int i = 0; i < started; ++i) sig += 1 + (fleet.EpisodeEndTally(i) != nullptr ? 1 : 0);
  const bool running = scenario.EpisodeAt(fleet.now_ns()) >= 0;
  const bool refresh = running && fleet.now_ns() - gt_written_ns_ >= 1'000'000'000;
  if (!finished && sig == gt_signature_ && !refresh) return absl::OkStatus();
  gt_signature_ = sig;
  gt_written_ns_ = fleet.now_ns();
  return WriteFileAtomic(out_dir_ + "/.fabricsim-tmp", out_dir_ + "/ground_truth.json",
                         FleetGroundTruthJson(fleet, scenario, start_unix_ns_, finished));
}

uint64_t FleetWriter::files_written() const {
  uint64_t n = 0;
  for (const auto& t : trees_) n += t->files_written();
  return n;
}

}  // namespace fabricsim
