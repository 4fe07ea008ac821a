// Fuzz target: netlink replies as they come off the socket, for the two
// netlink parsers of the collectors:
//  - the ethtool genl replies (collectors/ethtool_netlink.h): the same calls
//    EthtoolNetlink::Request makes on each receive buffer --
//    ScanNetlinkReplies (collectors/netlink_transaction.h, the message walk
//    of every netlink transaction: sequence numbers, NLMSG_ERROR, ACKs,
//    NLMSG_DONE, multipart, the family's reply) and EthtoolReplyStatsNest
//    (genlmsg_parse of the top-level attributes) -- then ParsePauseStatsNest /
//    ParseFecStatsNest on the stats nest. The sequence number and family the scan looks for are
//    those of the buffer's first message, so the fuzzer controls both sides;
//  - the dcbnl DCB_CMD_IEEE_GET reply (collectors/dcb_config_collector.h,
//    ParseDcbIeeeGetReply), fed each message that passes nlmsg_ok() like
//    KernelDcbSource::PfcEnabled does.
//  - the RDMA netlink replies (collectors/rdma_netlink.h): ScanNetlinkReplies
//    with the first message's sequence number and type (RdmaNetlinkTransport's
//    receive side), then every reply parser (device dump, STAT_GET,
//    STAT_GET_STATUS, the QP counter objects dump) on the gathered answer and
//    on the raw buffer; their bounds (entries per nest, name length) are
//    checked.
// The input is one receive buffer (one or more netlink messages). The genl
// and dcbnl family headers are both 4 bytes, so one corpus serves both; RDMA
// netlink messages have no family header.
#include <linux/dcbnl.h>
#include <linux/ethtool_netlink.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectors/dcb_config_collector.h"
#include "collectors/ethtool_netlink.h"
#include "collectors/netlink_transaction.h"
#include "collectors/rdma_netlink.h"
#include "fuzz/fuzz_check.h"

namespace {

// One receive buffer as nl_recv hands it out: malloc'ed (so aligned), n bytes.
std::vector<uint64_t> Buffer(const uint8_t* data, size_t size) {
  std::vector<uint64_t> storage((size + 7) / 8);
  if (size > 0) memcpy(storage.data(), data, size);
  return storage;
}

void Ethtool(const uint8_t* data, size_t size) {
  if (size < sizeof(nlmsghdr)) return;
  nlmsghdr first;
  memcpy(&first, data, sizeof first);
  for (int cmd : {0, 1}) {
    std::vector<uint64_t> buf = Buffer(data, size);
    std::vector<uint8_t> reply;
    fabricscope::NetlinkScan scan = fabricscope::ScanNetlinkReplies(
        reinterpret_cast<unsigned char*>(buf.data()), static_cast<int>(size), first.nlmsg_seq,
        first.nlmsg_type, "fuzz", &reply);
    if (scan.kind == fabricscope::NetlinkScan::kError) {
      FUZZ_CHECK(!scan.error.ok());
      return;
    }
    // The gathered messages (each padded to NLMSG_ALIGNTO) come from the
    // buffer: bounded by it, even when a multipart answer is still open.
    FUZZ_CHECK(reply.size() <= NLMSG_ALIGN(size));
    if (scan.kind != fabricscope::NetlinkScan::kComplete || reply.empty()) return;
    const int max_attr = cmd == 0 ? ETHTOOL_A_PAUSE_MAX : ETHTOOL_A_FEC_MAX;
    const int stats_attr = cmd == 0 ? ETHTOOL_A_PAUSE_STATS : ETHTOOL_A_FEC_STATS;
    absl::StatusOr<const nlattr*> nest =
        fabricscope::EthtoolReplyStatsNest(&reply, max_attr, stats_attr);
    if (!nest.ok() || *nest == nullptr) continue;
    if (cmd == 0) {
      auto pause = fabricscope::ParsePauseStatsNest(*nest);
      if (pause.ok()) FUZZ_CHECK(pause->tx_frames.has_value() || pause->rx_frames.has_value());
    } else {
      auto fec = fabricscope::ParseFecStatsNest(*nest);
      if (fec.ok()) {
        FUZZ_CHECK(!fec->corrected.empty() || !fec->uncorrectable.empty() ||
                   !fec->corrected_bits.empty());
        // Arrays come from the attribute payload: bounded by the message.
        FUZZ_CHECK(fec->corrected.size() * 8 <= reply.size());
      }
    }
  }
}

void RdmaParsers(const std::vector<uint8_t>& replies) {
  using fabricscope::kRdmaNlMaxCounters;
  using fabricscope::kRdmaNlMaxName;
  using fabricscope::kRdmaNlMaxObjects;
  if (auto d = fabricscope::ParseRdmaDeviceDump(replies); d.ok()) {
    FUZZ_CHECK(d->size() <= kRdmaNlMaxObjects);
    for (const auto& dev : *d) FUZZ_CHECK(!dev.name.empty() && dev.name.size() <= kRdmaNlMaxName);
  }
  if (auto st = fabricscope::ParseRdmaStatGet(replies); st.ok()) {
    FUZZ_CHECK(st->counters.size() <= kRdmaNlMaxCounters);
    for (const auto& c : st->counters)
      FUZZ_CHECK(!c.name.empty() && c.name.size() <= kRdmaNlMaxName);
  }
  if (auto status = fabricscope::ParseRdmaStatStatus(replies); status.ok()) {
    FUZZ_CHECK(status->size() <= kRdmaNlMaxCounters);
    for (const auto& c : *status) FUZZ_CHECK(c.optional || c.enabled);
  }
  if (auto qp = fabricscope::ParseRdmaQpCounterDump(replies); qp.ok()) {
    FUZZ_CHECK(qp->size() <= kRdmaNlMaxObjects);
    for (const auto& c : *qp) {
      FUZZ_CHECK(c.counters.size() <= kRdmaNlMaxCounters);
      FUZZ_CHECK(c.kern_name.size() <= kRdmaNlMaxName);
    }
  }
}

void Rdma(const uint8_t* data, size_t size) {
  std::vector<uint8_t> raw(data, data + size);
  RdmaParsers(raw);
  if (size < sizeof(nlmsghdr)) return;
  nlmsghdr first;
  memcpy(&first, data, sizeof first);
  std::vector<uint64_t> buf = Buffer(data, size);
  std::vector<uint8_t> reply;
  fabricscope::NetlinkScan scan = fabricscope::ScanNetlinkReplies(
      reinterpret_cast<unsigned char*>(buf.data()), static_cast<int>(size), first.nlmsg_seq,
      first.nlmsg_type, "fuzz", &reply);
  if (scan.kind == fabricscope::NetlinkScan::kComplete) RdmaParsers(reply);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  Ethtool(data, size);
  Rdma(data, size);
  std::vector<uint64_t> storage = Buffer(data, size);
  int n = static_cast<int>(size);
  for (nlmsghdr* h = reinterpret_cast<nlmsghdr*>(storage.data()); nlmsg_ok(h, n);
       h = nlmsg_next(h, &n)) {
    (void)fabricscope::ParseDcbIeeeGetReply(h);
  }
  return 0;
}
