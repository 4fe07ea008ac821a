#include "collectors/lldp_source.h"

#include <errno.h>
#include <lldp-const.h>
#include <lldpctl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/errors.h"
#include "core/log.h"

namespace fabricscope {
namespace {

using SteadyClock = std::chrono::steady_clock;

// liblldpctl's log lines (mostly developer diagnostics) go to our log at debug
// level instead of stderr.
void LogFromLldpctl(int severity, const char* msg) {
  Log(LogLevel::kDebug, "lldp", msg == nullptr ? "" : msg, {{"severity", absl::StrCat(severity)}});
}

void RouteLldpctlLogOnce() {
  static std::once_flag once;
  std::call_once(once, [] { lldpctl_log_callback(LogFromLldpctl); });
}

// The socket under one Partners() call and what went wrong on it; the
// user_data of the liblldpctl callbacks.
struct Channel {
  int fd = -1;
  SteadyClock::time_point deadline;
  bool timed_out = false;
  bool eof = false;
  int error = 0;  // errno of a failed poll/send/recv

  ~Channel() {
    if (fd >= 0) close(fd);
  }

  // Waits until `events` is ready on fd or the deadline passes. False (and
  // timed_out or error set) when it did not become ready.
  bool Wait(short events) {
    for (;;) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (left.count() <= 0) {
        timed_out = true;
        return false;
      }
      pollfd p{fd, events, 0};
      int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
      if (rc < 0) {
        if (errno == EINTR) continue;
        error = errno;
        return false;
      }
      if (rc > 0) return true;  // ready, or POLLERR/POLLHUP: the I/O call says which
    }
  }
};

// Sends all of `data` (liblldpctl treats a short send as complete, so a
// partial write must not be returned to it).
ssize_t SendAll(lldpctl_conn_t*, const uint8_t* data, size_t length, void* user_data) {
  auto* ch = static_cast<Channel*>(user_data);
  size_t done = 0;
  while (done < length) {
    ssize_t n = send(ch->fd, data + done, length - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) {
      ch->error = errno;
      return LLDPCTL_ERR_CALLBACK_FAILURE;
    }
    if (!ch->Wait(POLLOUT)) return LLDPCTL_ERR_CALLBACK_FAILURE;
  }
  return static_cast<ssize_t>(length);
}

// Receives what is there, up to `length`, waiting for at least one byte.
// liblldpctl asks again for the rest of a message. 0 = end of stream.
ssize_t RecvSome(lldpctl_conn_t*, const uint8_t* data, size_t length, void* user_data) {
  auto* ch = static_cast<Channel*>(user_data);
  // The library's receive buffer is writable (it calloc()s it); the typedef
  // of liblldpctl 1.0.16 declares it const.
  auto* buf = const_cast<uint8_t*>(data);
  for (;;) {
    ssize_t n = recv(ch->fd, buf, length, 0);
    if (n > 0) return n;
    if (n == 0) {
      ch->eof = true;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) {
      ch->error = errno;
      return LLDPCTL_ERR_CALLBACK_FAILURE;
    }
    if (!ch->Wait(POLLIN)) return LLDPCTL_ERR_CALLBACK_FAILURE;
  }
}

struct ConnRelease {
  void operator()(lldpctl_conn_t* c) const { lldpctl_release(c); }
};
using Conn = std::unique_ptr<lldpctl_conn_t, ConnRelease>;
struct AtomUnref {
  void operator()(lldpctl_atom_t* a) const { lldpctl_atom_dec_ref(a); }
};
using Atom = std::unique_ptr<lldpctl_atom_t, AtomUnref>;

std::string Str(lldpctl_atom_t* atom, lldpctl_key_t key) {
  const char* s = lldpctl_atom_get_str(atom, key);
  return s == nullptr ? std::string() : std::string(s);
}

// The ordering key of the neighbour choice (see the header): LLDP first, then
// the smallest identity.
auto ChoiceKey(const LinkPartner& p, bool lldp) {
  return std::make_tuple(!lldp, std::cref(p.chassis_id), std::cref(p.port_id),
                         std::cref(p.system_name), std::cref(p.port_description));
}

class LldpSource final : public LinkPartnerSource {
 public:
  LldpSource(std::string socket_path, absl::Duration timeout)
      : socket_path_(std::move(socket_path)), timeout_(timeout) {
    RouteLldpctlLogOnce();
  }

  absl::string_view name() const override { return "lldp"; }

  absl::StatusOr<std::vector<LinkPartner>> Partners(
      const std::vector<PortInfo>& ports, const std::vector<std::string>& extra_netdevs) override {
    Channel ch;
    ch.deadline = SteadyClock::now() + absl::ToChronoNanoseconds(timeout_);
    if (absl::Status s = Connect(ch); !s.ok()) return s;

    Conn conn(lldpctl_new_name(socket_path_.c_str(), SendAll, RecvSome, &ch));
    if (conn == nullptr) return absl::ResourceExhaustedError("lldpctl_new_name failed");
    // Atoms below hold references to `conn`; they are all released before it
    // (declared after it, or scoped inside the loop).
    Atom interfaces(lldpctl_get_interfaces(conn.get()));
    if (interfaces == nullptr) return Failure(conn.get(), ch, "GET_INTERFACES");

    // netdev -> (chosen partner, learned by LLDP)
    std::map<std::string, std::pair<LinkPartner, bool>> chosen;
    for (lldpctl_atom_iter_t* it = lldpctl_atom_iter(interfaces.get()); it != nullptr;
         it = lldpctl_atom_iter_next(interfaces.get(), it)) {
      Atom interface(lldpctl_atom_iter_value(interfaces.get(), it));
      std::string netdev = Str(interface.get(), lldpctl_k_interface_name);
      Atom port(lldpctl_get_port(interface.get()));
      if (port == nullptr) return Failure(conn.get(), ch, absl::StrCat("GET_INTERFACE ", netdev));
      Atom neighbors(lldpctl_atom_get(port.get(), lldpctl_k_port_neighbors));
      for (lldpctl_atom_iter_t* nit = lldpctl_atom_iter(neighbors.get()); nit != nullptr;
           nit = lldpctl_atom_iter_next(neighbors.get(), nit)) {
        Atom neighbor(lldpctl_atom_iter_value(neighbors.get(), nit));
        if (neighbor == nullptr) continue;
        if (lldpctl_atom_get_int(neighbor.get(), lldpctl_k_port_hidden) == 1) continue;
        bool lldp =
            lldpctl_atom_get_int(neighbor.get(), lldpctl_k_port_protocol) == LLDPD_MODE_LLDP;
        LinkPartner p;
        p.netdev = netdev;
        p.source = "lldp";
        p.port_id = Str(neighbor.get(), lldpctl_k_port_id);
        p.port_description = Str(neighbor.get(), lldpctl_k_port_descr);
        Atom chassis(lldpctl_atom_get(neighbor.get(), lldpctl_k_port_chassis));
        if (chassis != nullptr) {
          p.chassis_id = Str(chassis.get(), lldpctl_k_chassis_id);
          p.system_name = Str(chassis.get(), lldpctl_k_chassis_name);
        }
        auto [slot, inserted] = chosen.try_emplace(netdev, p, lldp);
        if (!inserted && ChoiceKey(p, lldp) < ChoiceKey(slot->second.first, slot->second.second)) {
          slot->second = {std::move(p), lldp};
        }
      }
    }
    std::vector<LinkPartner> out;
    out.reserve(chosen.size());
    for (auto& [netdev, entry] : chosen) out.push_back(std::move(entry.first));
    return out;
  }

 private:
  absl::Status Unreachable(absl::string_view why) const {
    return absl::UnimplementedError(
        absl::StrCat("lldpd not reachable at ", socket_path_, ": ", why));
  }

  absl::Status Connect(Channel& ch) const {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path_.empty() || socket_path_.size() >= sizeof(addr.sun_path)) {
      return absl::InvalidArgumentError(absl::StrCat("lldpd socket path \"", socket_path_,
                                                     "\" is empty or longer than ",
                                                     sizeof(addr.sun_path) - 1, " bytes"));
    }
    std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
    ch.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ch.fd < 0) return fabricscope::ErrnoToStatus(errno, "lldpd socket: socket()");
    int rc;
    do {
      rc = connect(ch.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return absl::OkStatus();
    int err = errno;
    switch (err) {
      case ENOENT:
      case ENOTDIR:
      case ECONNREFUSED:
        return Unreachable(std::strerror(err));
      case EAGAIN:  // the listen backlog is full: lldpd is there, but busy
        return absl::UnavailableError(
            absl::StrCat("lldpd at ", socket_path_, ": connection backlog full"));
      default:
        return fabricscope::ErrnoToStatus(err, absl::StrCat("lldpd socket ", socket_path_));
    }
  }

  // The status of a failed liblldpctl request: what the channel saw first,
  // else liblldpctl's own error.
  absl::Status Failure(lldpctl_conn_t* conn, const Channel& ch, absl::string_view what) const {
    std::string where = absl::StrCat("lldpd at ", socket_path_, ": ", what);
    if (ch.timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat(where, ": no answer within ", absl::FormatDuration(timeout_)));
    }
    if (ch.eof || ch.error == ECONNRESET || ch.error == EPIPE) {
      return absl::UnavailableError(absl::StrCat(where, ": lldpd closed the connection"));
    }
    if (ch.error != 0) return fabricscope::ErrnoToStatus(ch.error, where);
    lldpctl_error_t err = lldpctl_last_error(conn);
    std::string msg = absl::StrCat(where, ": ", lldpctl_strerror(err));
    switch (err) {
      case LLDPCTL_ERR_SERIALIZATION:
        return UnparsableError(msg);
      case LLDPCTL_ERR_NOMEM:
        return absl::ResourceExhaustedError(msg);
      default:
        return absl::InternalError(msg);
    }
  }

  const std::string socket_path_;
  const absl::Duration timeout_;
};

}  // namespace

std::unique_ptr<LinkPartnerSource> MakeLldpSource(std::string socket_path, absl::Duration timeout) {
  return std::make_unique<LldpSource>(std::move(socket_path), timeout);
}

}  // namespace fabricscope
