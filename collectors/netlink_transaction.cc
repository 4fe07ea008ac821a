#include "collectors/netlink_transaction.h"

#include <netlink/msg.h>
#include <netlink/netlink.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "collectors/netlink_util.h"
#include "core/errors.h"

namespace fabricscope {

NetlinkScan ScanNetlinkReplies(unsigned char* buf, int n, uint32_t seq, int reply_type,
                               absl::string_view what, std::vector<uint8_t>* replies) {
  NetlinkScan scan;
  for (nlmsghdr* h = reinterpret_cast<nlmsghdr*>(buf); nlmsg_ok(h, n); h = nlmsg_next(h, &n)) {
    if (h->nlmsg_seq != seq) continue;
    if (h->nlmsg_type == NLMSG_ERROR) {
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) continue;  // too short to say
      const auto* e = static_cast<const nlmsgerr*>(nlmsg_data(h));
      if (e->error == 0) continue;  // an ACK
      scan.kind = NetlinkScan::kError;
      scan.error = fabricscope::ErrnoToStatus(NetlinkErrno(e->error), what);
      return scan;
    }
    if (h->nlmsg_type == NLMSG_DONE) {
      scan.kind = NetlinkScan::kComplete;
      return scan;
    }
    if (h->nlmsg_type == reply_type) {
      const auto* p = reinterpret_cast<const uint8_t*>(h);
      replies->insert(replies->end(), p, p + h->nlmsg_len);
      replies->resize(NLMSG_ALIGN(replies->size()), 0);
      if ((h->nlmsg_flags & NLM_F_MULTI) == 0) {
        scan.kind = NetlinkScan::kComplete;
        return scan;
      }
    }
  }
  return scan;
}

absl::Status NetlinkTransact(nl_sock* sock, nl_msg* request, int reply_type, absl::string_view what,
                             std::vector<uint8_t>* replies) {
  replies->clear();
  const int sent = nl_send_auto(sock, request);
  if (sent < 0)
    return absl::InternalError(absl::StrCat(what, ": netlink send: ", nl_geterror(sent)));
  const uint32_t seq = nlmsg_hdr(request)->nlmsg_seq;
  for (int attempt = 0; attempt < kNetlinkMaxReceives; ++attempt) {
    sockaddr_nl peer{};
    unsigned char* buf = nullptr;
    const int n = nl_recv(sock, &peer, &buf, nullptr);
    if (n <= 0) {
      free(buf);
      return absl::InternalError(
          absl::StrCat(what, ": netlink receive: ", n == 0 ? "no data" : nl_geterror(n)));
    }
    NetlinkScan scan = ScanNetlinkReplies(buf, n, seq, reply_type, what, replies);
    free(buf);
    if (scan.kind == NetlinkScan::kError) return scan.error;
    if (scan.kind == NetlinkScan::kComplete) return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(what, ": no complete netlink answer"));
}

}  // namespace fabricscope
