// The default hot set: the mlx5 hw_counters the rdma_sysfs collector reads on
// every hot tick (10 ms) unless --hot-counters says otherwise. The congestion
// and retransmit signals a sub-second burst shows up in; everything else is
// read on the slow tier (reference/counters.md: what each read costs).
//
// One list: the daemon's default (CollectorOptions), fabricsim's hot files and
// the benchmarks read it from here. Header-only so that fabricsim, which links
// none of the daemon's libraries, can use it.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fabricscope {

inline constexpr std::array<absl::string_view, 12> kDefaultHotCounters = {
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
    "rp_cnp_handled",
    "rp_cnp_ignored",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "implied_nak_seq_err",
    "rnr_nak_retry_err",
};

inline std::vector<std::string> DefaultHotCounters() {
  return std::vector<std::string>(kDefaultHotCounters.begin(), kDefaultHotCounters.end());
}

}  // namespace fabricscope
