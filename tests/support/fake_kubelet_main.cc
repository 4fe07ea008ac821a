// fake_kubelet: the kubelet's PodResources v1 service on a unix socket, for
// the end-to-end tests (tests/support/fake_kubelet.h).
//   fake_kubelet --socket=PATH --pods=FILE [--delay-ms=N]
// FILE is read again on SIGHUP. Runs until SIGTERM or SIGINT.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "tools/fabricsim/kubelet.h"

namespace {

bool Load(fabricscope::FakeKubelet* kubelet, const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (absl::Status s = kubelet->SetFromText(text.str()); !s.ok()) {
    std::cerr << "fake_kubelet: " << path << ": " << s.message() << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket, pods;
  int delay_ms = 0;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a(argv[i]);
    if (absl::ConsumePrefix(&a, "--socket=")) {
      socket = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--pods=")) {
      pods = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--delay-ms=") && absl::SimpleAtoi(a, &delay_ms)) {
    } else {
      std::cerr << "usage: fake_kubelet --socket=PATH --pods=FILE [--delay-ms=N]\n";
      return 2;
    }
  }
  if (socket.empty() || pods.empty()) {
    std::cerr << "usage: fake_kubelet --socket=PATH --pods=FILE [--delay-ms=N]\n";
    return 2;
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  fabricscope::FakeKubelet kubelet;
  if (!Load(&kubelet, pods)) return 1;
  kubelet.SetDelay(absl::Milliseconds(delay_ms));
  if (absl::Status s = kubelet.Start(socket); !s.ok()) {
    std::cerr << "fake_kubelet: " << s.message() << "\n";
    return 1;
  }
  std::cout << "fake_kubelet: serving on " << socket << std::endl;
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGHUP) {
      Load(&kubelet, pods);
      continue;
    }
    break;
  }
  kubelet.Stop();
  return 0;
}
