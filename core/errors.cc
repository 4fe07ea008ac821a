#include "core/errors.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace fabricscope {

absl::Status ErrnoToStatus(int err, absl::string_view context) {
  std::string msg = err == 0 ? absl::StrCat(context, ": errno 0")
                             : absl::StrCat(context, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENODEV:
    case ENXIO:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EOPNOTSUPP:
#if ENOTSUP != EOPNOTSUPP
    case ENOTSUP:
#endif
    case EPROTONOSUPPORT:
    case EAFNOSUPPORT:
    case ENOSYS:
    case ENOTTY:
    case EINVAL:  // see core/errors.h: "the driver does not support this request"
      return absl::UnimplementedError(msg);
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EINTR:
    case EBUSY:
      return absl::UnavailableError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case ENOMEM:
    case ENOBUFS:
      return absl::ResourceExhaustedError(msg);
    case EPROTO:
    case EBADMSG:
      return UnparsableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status UnparsableError(absl::string_view message) { return absl::DataLossError(message); }

}  // namespace fabricscope
