// Fuzz target: sysfs counter file contents (collectors/sysfs_reader.h,
// ParseCounter). The input is the file content as pread(2) returns it; like
// CounterFile::Read, at most CounterFile::kBufferSize bytes reach the parser,
// but longer inputs are parsed too (the function must reject them, not
// misbehave).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "collectors/collector.h"
#include "collectors/sysfs_reader.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<uint64_t> v = fabricscope::ParseCounter(text);
  if (v.ok()) {
    // Strictness (sysfs_reader.h): the content is the decimal value, with at
    // most one trailing '\n' (no sign, no blanks) and the value is what
    // absl::SimpleAtoi reads from the digits.
    absl::string_view digits = text;
    if (!digits.empty() && digits.back() == '\n') digits.remove_suffix(1);
    FUZZ_CHECK(!digits.empty());
    uint64_t again = 0;
    FUZZ_CHECK(absl::SimpleAtoi(digits, &again) && again == *v);
    for (char c : digits) FUZZ_CHECK(c >= '0' && c <= '9');
  } else {
    // Garbage is DataLoss (kParse); "N/A ..." is Unimplemented (kUnsupported).
    const fabricscope::CollectorErrorCode code = fabricscope::CollectorErrorCodeOf(v.status());
    FUZZ_CHECK(code == fabricscope::CollectorErrorCode::kParse ||
               code == fabricscope::CollectorErrorCode::kUnsupported);
  }
  return 0;
}
