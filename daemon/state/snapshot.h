// The state snapshot: the store's samples, the span ring and the detector
// event ring written to one file on SIGTERM and read back at the next start
// (--state-dir), so that a restart or an upgrade does not erase the last hour
// of an incident.
//
// File format (little-endian; docs/state.md has the byte layout):
//   header   "FSSNAP\r\n", u32 format version, u32 flags (0), i64 saved_unix_nano,
//            u32 CRC-32 of the header before it
//   records  u8 type, u32 length, payload[length], u32 CRC-32 (zlib) of
//            type + length + payload. Types: time block (a block of a tier's
//            time column, written before the first series that refers to it),
//            series (key, derived state and every compressed chunk as the
//            store holds it, the head chunk last), span, event, the stall
//            learner's sketches (version 3), and a final
//            end record carrying the count of each, so a file cut short
//            anywhere is detected.
// Chunks are written as the store holds them (no re-encoding): writing costs
// a pass over memory; reading checks every CRC and chunk header, and a
// chunk's stream is decoded when it is first read (the store drops and counts
// one that does not decode to its header: StoreStats::corrupt_chunks).
//
// Reading is all-or-nothing: ValidateSnapshot, and RestoreSnapshot before it
// changes anything, read the whole file (mapped, see MappedSnapshot) and check
// every checksum, count, chunk header and time block; a file that fails is
// reported with the reason (the first failure in file order) and nothing is
// restored. Both read on up to 4 threads (never more than the CPUs, about
// one per MiB of file), started and joined within the call: the records are
// checked in contiguous ranges, and the chunks are copied once, straight from
// the file into the store, series by series.
//
// Writing goes to DIR/snapshot.tmp and is renamed over DIR/snapshot once
// fsync'd; past the deadline the temporary file is removed and the previous
// snapshot (if any) is left alone.
//
// Thread-safety: WriteSnapshot reads the stores through their thread-safe
// APIs, but the snapshot is consistent only with the writers stopped;
// RestoreSnapshot runs before any collector, ingest or detector starts, and
// `data` must not change during either read.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/correlate/stall_learner.h"
#include "daemon/detect/event_log.h"
#include "daemon/spans/span_store.h"
#include "store/store.h"

namespace fabricscope {

// 2: chunks store tick indexes into time blocks (time block records); a
// version 1 file is refused (reason `version`).
// 3: span records carry the judged window, phase and stall judgement, and a
// stall learner record carries the learned sketches; a version 2 file is
// still read (its spans without a judgement, nothing learned).
inline constexpr uint32_t kSnapshotVersion = 3;

struct SnapshotCounts {
  uint64_t series = 0;
  uint64_t chunks = 0;
  uint64_t samples = 0;
  uint64_t spans = 0;
  uint64_t events = 0;
  uint64_t bytes = 0;           // file size
  int64_t saved_unix_nano = 0;  // when it was written
  // Restore only: series whose key no signal rule maps any more (an upgrade
  // changed the table), and chunks the store budget could not hold.
  uint64_t series_unmapped = 0;
  uint64_t chunks_dropped = 0;
};

// Why a snapshot was refused (the `reason` label of
// fabricscope_state_snapshot_rejected_total).
enum class SnapshotError {
  kNone,
  kIo,         // cannot open or read it
  kFormat,     // not a snapshot (bad magic), or a record that does not parse
  kVersion,    // written by an incompatible format version
  kChecksum,   // a record's CRC does not match
  kTruncated,  // ends before its end record
  kTooLarge,   // larger than the budgets it must fit in
};
absl::string_view SnapshotErrorName(SnapshotError e);

struct SnapshotStatus {
  SnapshotError error = SnapshotError::kNone;
  std::string detail;  // human-readable: which record, what was wrong
  bool ok() const { return error == SnapshotError::kNone; }
};

// Writes the snapshot of `store`, `spans`, `events` and what `learner` has
// learned (may be null) to `path` (via path + ".tmp", fsync, rename). Fails
// (leaving any previous file at `path` in place) on an I/O error or when
// `deadline` passes.
absl::Status WriteSnapshot(const std::string& path, const Store& store, const SpanStore& spans,
                           const EventLog& events, int64_t saved_unix_nano, absl::Time deadline,
                           SnapshotCounts* counts, const StallLearner* learner = nullptr);

// Reads and checks all of `data` (a whole snapshot file); restores nothing.
// `max_bytes` bounds the file (the sum of the budgets it is restored into).
// `threads`: 0 chooses (see above), n > 0 uses up to n (at most 4; tests).
SnapshotStatus ValidateSnapshot(absl::string_view data, uint64_t max_bytes, SnapshotCounts* counts,
                                int threads = 0);

// Checks all of `data` as ValidateSnapshot does and, only if it passes,
// restores it into empty stores (nothing is restored from a file that fails).
// Series get their ids in file order. When the store's budget cannot hold
// every chunk, the series left once it is full are restored in file order,
// the oldest chunks evicted to make room (which series reached the store
// before it was full can depend on the threads).
// `learner` (may be null) gets the learned sketches when the file has them.
SnapshotStatus RestoreSnapshot(absl::string_view data, Store* store, SpanStore* spans,
                               EventLog* events, SnapshotCounts* counts, int threads = 0,
                               StallLearner* learner = nullptr);

// A snapshot file mapped read-only. The mapping is file-backed page cache, so
// restoring a snapshot as large as the budgets does not need that much
// anonymous memory on top of them (under a cgroup memory limit the kernel can
// reclaim it). The file must not be truncated in place while mapped (the
// daemon only ever replaces it by rename).
class MappedSnapshot {
 public:
  MappedSnapshot() = default;
  ~MappedSnapshot();
  MappedSnapshot(const MappedSnapshot&) = delete;
  MappedSnapshot& operator=(const MappedSnapshot&) = delete;
  absl::string_view data() const { return {static_cast<const char*>(addr_), size_}; }

  // Maps the file at `path`, refusing one over `max_bytes` (kTooLarge) or
  // unreadable (kIo; `*missing` true when it does not exist).
  SnapshotStatus Open(const std::string& path, uint64_t max_bytes, bool* missing);

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

// For the fuzz target: recomputes every checksum of `data` whose framing
// parses (the header's, then each record's, until the framing breaks), so
// that mutated payloads reach the record decoders.
std::string ResealSnapshotForFuzzing(absl::string_view data);

}  // namespace fabricscope
