// Fuzz target: netlink replies as they come off the socket, for the two
// netlink parsers of the collectors:
//  - the ethtool genl replies (collectors/ethtool_netlink.h): the message walk
//    and top-level genlmsg_parse done by EthtoolNetlink::Request (private, tied
//    to the socket, so mirrored here line for line), then the public
//    ParsePauseStatsNest / ParseFecStatsNest on the stats nest;
//  - the dcbnl DCB_CMD_IEEE_GET reply (collectors/dcb_config_collector.h,
//    ParseDcbIeeeGetReply), fed each message that passes nlmsg_ok() like
//    KernelDcbSource::PfcEnabled does.
// The input is one receive buffer (one or more netlink messages). Every
// message is given to every parser: the genl and dcbnl family headers are
// both 4 bytes, so one corpus serves both.
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
#include "fuzz/fuzz_check.h"

namespace {

// What EthtoolNetlink::Request does with the reply (genlmsg_parse of the
// top-level attributes), then the public nest parser.
const nlattr* StatsNest(nlmsghdr* h, int max_attr, int stats_attr) {
  std::vector<nlattr*> tb(max_attr + 1, nullptr);
  if (genlmsg_parse(h, 0, tb.data(), max_attr, nullptr) < 0) return nullptr;
  return tb[stats_attr];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  // nl_recv hands out a malloc'ed (so aligned) buffer of exactly n bytes.
  std::vector<uint64_t> storage((size + 7) / 8);
  if (size > 0) memcpy(storage.data(), data, size);
  int n = static_cast<int>(size);
  for (nlmsghdr* h = reinterpret_cast<nlmsghdr*>(storage.data()); nlmsg_ok(h, n);
       h = nlmsg_next(h, &n)) {
    if (const nlattr* nest = StatsNest(h, ETHTOOL_A_PAUSE_MAX, ETHTOOL_A_PAUSE_STATS)) {
      auto pause = fabricscope::ParsePauseStatsNest(nest);
      if (pause.ok()) FUZZ_CHECK(pause->tx_frames.has_value() || pause->rx_frames.has_value());
    }
    if (const nlattr* nest = StatsNest(h, ETHTOOL_A_FEC_MAX, ETHTOOL_A_FEC_STATS)) {
      auto fec = fabricscope::ParseFecStatsNest(nest);
      if (fec.ok()) {
        FUZZ_CHECK(!fec->corrected.empty() || !fec->uncorrectable.empty() ||
                   !fec->corrected_bits.empty());
        // Arrays come from the attribute payload: bounded by the message.
        FUZZ_CHECK(fec->corrected.size() * 8 <= h->nlmsg_len);
      }
    }
    (void)fabricscope::ParseDcbIeeeGetReply(h);
  }
  return 0;
}
