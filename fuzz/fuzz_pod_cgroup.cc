// Fuzz target: /proc/PID/cgroup contents (daemon/kubernetes/host_view.h,
// ParsePodCgroup), which any process on the host controls the shape of only
// through its cgroup path, but which the parser must take whole: any bytes,
// any length, lines without colons, paths holding colons.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/kubernetes/host_view.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  fabricscope::CgroupPod pod;
  if (!fabricscope::ParsePodCgroup(text, &pod)) return 0;
  // A UID: 8-4-4-4-12 lowercase hex with dashes; a container id: "" or 64
  // lowercase hex; both substrings of the input (the UID up to '_' -> '-'
  // and case).
  FUZZ_CHECK(pod.uid.size() == 36);
  for (size_t i = 0; i < pod.uid.size(); ++i) {
    const char c = pod.uid[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      FUZZ_CHECK(c == '-');
    } else {
      FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    }
  }
  FUZZ_CHECK(pod.container_id.empty() || pod.container_id.size() == 64);
  for (char c : pod.container_id) FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!pod.container_id.empty()) FUZZ_CHECK(text.find(pod.container_id) != absl::string_view::npos);
  return 0;
}
