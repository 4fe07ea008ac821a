// Fuzz target: `ethtool -S` text (collectors/ethtool_text.h), both the full
// parse (ParseEthtoolStatsText) and the per-tick values-only parse
// (ParseEthtoolStatsValues) that the --ethtool-dir source uses once the names
// are known.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "collectors/ethtool_text.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  fabricscope::EthtoolTextStats stats;
  absl::Status s = fabricscope::ParseEthtoolStatsText(text, &stats);
  if (!s.ok()) {
    FUZZ_CHECK(stats.names.empty() && stats.values.empty());  // nothing partial
    return 0;
  }
  FUZZ_CHECK(!stats.names.empty());
  FUZZ_CHECK(stats.names.size() == stats.values.size());
  absl::flat_hash_set<std::string> unique(stats.names.begin(), stats.names.end());
  FUZZ_CHECK(unique.size() == stats.names.size());  // duplicates keep the first only
  for (const std::string& name : stats.names) {
    FUZZ_CHECK(!name.empty());
    FUZZ_CHECK(name.find('\n') == std::string::npos);
  }

  // The per-tick path: with the names the full parse found, the values-only
  // parse succeeds; when it reports a match the values are the same.
  std::vector<uint64_t> values;
  bool names_match = false;
  FUZZ_CHECK(fabricscope::ParseEthtoolStatsValues(text, stats.names, &values, &names_match).ok());
  if (names_match) FUZZ_CHECK(values == stats.values);

  // With a name set that cannot match, the values-only parse says so.
  std::vector<std::string> other = stats.names;
  other.push_back("fuzz_not_a_name_in_the_text");
  if (!unique.contains(other.back())) {
    FUZZ_CHECK(fabricscope::ParseEthtoolStatsValues(text, other, &values, &names_match).ok());
    FUZZ_CHECK(!names_match);
  }
  return 0;
}
