// Tick time columns: one per tier interval; a tick's timestamp is kept once
// per column in shared time blocks (store/time_column.h) that chunks refer to
// by tick index, with the budget references those blocks hold.

#include "store/store_internal.h"

namespace fabricscope {

TickColumn* Store::AddTickColumn(absl::Duration interval) {
  std::lock_guard lock(columns_mu_);
  columns_.push_back(std::make_unique<TickColumn>(absl::ToInt64Nanoseconds(interval)));
  return columns_.back().get();
}

TickRef Store::Tick(TickColumn* c, int64_t ts_ns) {
  const int64_t tick = c->next_tick++;
  if (c->open != nullptr && c->open->Add(ts_ns)) return {c->open, tick, ts_ns};
  if (c->open != nullptr && c->open->CanGrow()) {
    const uint64_t before = c->open->accounted;
    const uint64_t after = BlockAccounted(std::min(kBlockBytes, c->open->capacity() * 2));
    if (Reserve(after)) {
      c->open->Grow();
      c->open->accounted = after;
      Release(before);
      if (c->open->Add(ts_ns)) return {c->open, tick, ts_ns};
    }
  }
  if (c->open != nullptr) {  // full: seal it, return what it no longer uses
    const uint64_t before = c->open->accounted;
    c->open->Seal();
    c->open->accounted = BlockAccounted(c->open->capacity());
    Release(before - c->open->accounted);
    DropBlockRef(c->open.get());  // the column's reference
    c->open.reset();
  }
  const uint64_t bytes = BlockAccounted(kInitialBlockBytes);
  if (!Reserve(bytes)) return {nullptr, tick, ts_ns};
  auto b = std::make_shared<TimeBlock>(tick, c->interval_ns);
  b->accounted = bytes;
  b->refs.store(1, std::memory_order_relaxed);
  b->Add(ts_ns);
  c->open = b;
  return {std::move(b), tick, ts_ns};
}

void Store::DropBlockRef(TimeBlock* block) {
  if (block->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) Release(block->accounted);
}

void Store::DropBlockRefLocked(TimeBlock* block) {
  if (block->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) used_bytes_ -= block->accounted;
}

bool Store::AcquireRestoredBlock(TimeBlock* block) {
  // Restore runs before any writer: nothing else changes `refs` meanwhile
  // but the evictions of Reserve, which drop references of other chunks.
  if (block->refs.load(std::memory_order_acquire) > 0) {
    block->refs.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const uint64_t bytes = BlockAccounted(block->capacity());
  if (!Reserve(bytes)) return false;
  block->accounted = bytes;
  block->refs.store(1, std::memory_order_release);
  return true;
}

}  // namespace fabricscope
