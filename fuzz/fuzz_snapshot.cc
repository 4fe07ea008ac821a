// Fuzz target: the state snapshot reader (daemon/state/snapshot.h). The input
// is checked twice: as is (the checksums must reject almost every mutation),
// and resealed (every checksum recomputed, so mutated records reach the
// decoders). ValidateSnapshot reaches the same verdict on one thread and on
// two; whatever it accepts must restore (on two threads) into fresh stores
// without error, with the counts it reported, and within the store budget.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/state/snapshot.h"
#include "fuzz/fuzz_check.h"

namespace {

void Check(absl::string_view data) {
  fabricscope::SnapshotCounts counts;
  fabricscope::SnapshotStatus v = fabricscope::ValidateSnapshot(data, 1 << 20, &counts, 1);
  // Read on two threads, the verdict is the same: same reason, same record.
  fabricscope::SnapshotCounts counts2;
  fabricscope::SnapshotStatus v2 = fabricscope::ValidateSnapshot(data, 1 << 20, &counts2, 2);
  FUZZ_CHECK(v2.error == v.error);
  FUZZ_CHECK(v2.detail == v.detail);
  if (!v.ok()) {
    FUZZ_CHECK(!v.detail.empty());
    return;
  }
  fabricscope::StoreOptions options;
  options.memory_bytes = 1 << 20;
  fabricscope::Store store(options);
  fabricscope::FakeClock clock(counts.saved_unix_nano);
  fabricscope::SpanStore spans({}, &clock, nullptr);
  fabricscope::EventLog events(64, nullptr);
  fabricscope::SnapshotCounts restored;
  fabricscope::StallLearner learner(fabricscope::StallLearnerOptions{}, nullptr);
  fabricscope::SnapshotStatus r =
      fabricscope::RestoreSnapshot(data, &store, &spans, &events, &restored, 2, &learner);
  FUZZ_CHECK(learner.keys() <= fabricscope::StallLearnerOptions{}.max_keys);
  FUZZ_CHECK(r.ok());
  FUZZ_CHECK(restored.series == counts.series);
  FUZZ_CHECK(restored.samples == counts.samples);
  FUZZ_CHECK(restored.spans == counts.spans);
  FUZZ_CHECK(restored.events == counts.events);
  FUZZ_CHECK(store.Stats().bytes <= options.memory_bytes);
  FUZZ_CHECK(events.All().size() <= 64);
  for (const fabricscope::SeriesSnapshot& s : store.Snapshot()) {
    // Every restored chunk decodes (the reader checked it against its header).
    store.ReadRange(s.id, INT64_MIN, INT64_MAX);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view in(reinterpret_cast<const char*>(data), size);
  Check(in);
  Check(fabricscope::ResealSnapshotForFuzzing(in));
  return 0;
}
