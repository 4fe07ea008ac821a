// A fake kubelet: the PodResources v1 service (proto/kubelet/podresources/
// v1/api.proto) on a unix socket, answering List from a table set as text,
// optionally after a delay (a slow kubelet). Stop() and a new Start() on the
// same path is a kubelet restart. fabricsim serves the simulated host's pods
// with it (--kubelet-socket, the demo); the unit tests use the class, the
// end-to-end tests run tests/support/fake_kubelet_main.cc.
//
// Allocation lines (SetFromText, the e2e program's --pods file), one per
// container and resource:
//   NAMESPACE POD CONTAINER RESOURCE ID[,ID...]
// '#' starts a comment.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace fabricscope {

class FakeKubelet {
 public:
  FakeKubelet();
  ~FakeKubelet();

  // Serves on `socket_path` (any file there is replaced).
  absl::Status Start(const std::string& socket_path);
  // Stops serving and removes the socket.
  void Stop();

  // The table List answers with; InvalidArgument for a malformed line.
  absl::Status SetFromText(absl::string_view text);
  // List waits this long before it answers.
  void SetDelay(absl::Duration delay);
  // List calls answered.
  int lists() const { return lists_.load(); }

 private:
  class Service;
  std::unique_ptr<Service> service_;
  struct Server;
  std::unique_ptr<Server> server_;
  std::string socket_path_;
  std::atomic<int> lists_{0};
};

}  // namespace fabricscope
