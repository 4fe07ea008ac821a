// The one mapping from the plain layers' absl::Status to grpc::Status, used
// by every gRPC adapter in daemon/service/. The canonical codes are the same
// numbers in both (OK = 0 ... UNAUTHENTICATED = 16); the message is kept.
//
// Thread-safety: a pure function.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace fabricscope {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace fabricscope
