#include "store/time_column.h"

#include <algorithm>
#include <cstring>

#include "store/bits.h"

namespace fabricscope {
namespace {

// Worst case bits one tick can take (4 + 64).
constexpr uint32_t kMaxTickBits = 68;

std::atomic<uint64_t> next_serial{1};

// A tick's code: its jitter against the tier interval, zigzag.
void PutTick(uint8_t* data, uint32_t* pos, uint64_t z) { PutTimeLadder<12, 17>(data, pos, z); }
uint64_t GetTick(BitReader* r) { return GetTimeLadder<12, 17>(r); }

// Decodes `count` ticks; false if the stream does not hold them.
bool DecodeTicks(const uint8_t* data, uint32_t bits, uint32_t count, int64_t first_ts,
                 int64_t interval_ns, std::vector<int64_t>* out) {
  if (count == 0) return true;
  out->reserve(out->size() + count);
  out->push_back(first_ts);
  BitReader r(data, bits);
  uint64_t ts = static_cast<uint64_t>(first_ts);
  for (uint32_t i = 1; i < count; ++i) {
    ts += static_cast<uint64_t>(interval_ns) + static_cast<uint64_t>(UnZigZag(GetTick(&r)));
    if (!r.ok()) return false;
    out->push_back(static_cast<int64_t>(ts));
  }
  return true;
}

}  // namespace

TimeBlock::TimeBlock(int64_t first_tick, int64_t interval_ns)
    : serial(next_serial.fetch_add(1, std::memory_order_relaxed)),
      first_tick(first_tick),
      interval_ns(interval_ns) {
  std::lock_guard lock(mu_);
  cap_ = kInitialBlockBytes;
  data_.reset(new uint8_t[cap_]());
}

bool TimeBlock::CanGrow() const {
  std::lock_guard lock(mu_);
  return !sealed_ && count_ < kTicksPerBlock && cap_ < kBlockBytes;
}

void TimeBlock::Grow() {
  std::lock_guard lock(mu_);
  if (sealed_ || cap_ >= kBlockBytes) return;
  const size_t cap = std::min(kBlockBytes, cap_ * 2);
  std::unique_ptr<uint8_t[]> buf(new uint8_t[cap]());
  std::memcpy(buf.get(), data_.get(), cap_);
  data_.swap(buf);
  cap_ = cap;
}

std::shared_ptr<TimeBlock> TimeBlock::FromImage(const TimeBlockImage& image, std::string* error) {
  if (image.count == 0 || image.count > kTicksPerBlock ||
      image.data.size() != (image.bits + 7) / 8 || image.data.size() > kBlockBytes) {
    *error = "time block has a bad header";
    return nullptr;
  }
  std::vector<int64_t> ts;
  if (!DecodeTicks(image.data.data(), image.bits, image.count, image.first_ts, image.interval_ns,
                   &ts) ||
      ts.back() != image.last_ts) {
    *error = "time block does not decode to its header";
    return nullptr;
  }
  auto b = std::make_shared<TimeBlock>(image.first_tick, image.interval_ns);
  std::lock_guard lock(b->mu_);
  b->sealed_ = true;
  b->count_ = image.count;
  b->bits_ = image.bits;
  b->first_ts_ = image.first_ts;
  b->last_ts_ = image.last_ts;
  b->cap_ = std::max<size_t>(image.data.size(), 1);
  b->data_.reset(new uint8_t[b->cap_]());
  if (!image.data.empty()) std::memcpy(b->data_.get(), image.data.data(), image.data.size());
  return b;
}

bool TimeBlock::Add(int64_t ts_ns) {
  std::lock_guard lock(mu_);
  if (sealed_ || count_ >= kTicksPerBlock) return false;
  if (count_ == 0) {
    first_ts_ = last_ts_ = ts_ns;
    count_ = 1;
    return true;
  }
  if (bits_ + kMaxTickBits > cap_ * 8) return false;
  const uint64_t d = static_cast<uint64_t>(ts_ns) - static_cast<uint64_t>(last_ts_) -
                     static_cast<uint64_t>(interval_ns);
  PutTick(data_.get(), &bits_, ZigZag(static_cast<int64_t>(d)));
  last_ts_ = ts_ns;
  ++count_;
  return true;
}

void TimeBlock::Seal() {
  std::lock_guard lock(mu_);
  if (sealed_) return;
  sealed_ = true;
  const size_t used = std::max<size_t>((bits_ + 7) / 8, 1);
  std::unique_ptr<uint8_t[]> exact(new uint8_t[used]);
  std::memcpy(exact.get(), data_.get(), used);
  data_.swap(exact);
  cap_ = used;
}

size_t TimeBlock::capacity() const {
  std::lock_guard lock(mu_);
  return cap_;
}

uint32_t TimeBlock::count() const {
  std::lock_guard lock(mu_);
  return count_;
}

void TimeBlock::Read(std::vector<int64_t>* out) const {
  uint32_t count, bits;
  int64_t first_ts;
  const uint8_t* data;
  std::vector<uint8_t> copy;
  {
    std::lock_guard lock(mu_);
    count = count_;
    bits = bits_;
    first_ts = first_ts_;
    if (sealed_) {
      data = data_.get();  // immutable from now on
    } else {
      copy.assign(data_.get(), data_.get() + (bits + 7) / 8);
      data = copy.data();
    }
  }
  DecodeTicks(data, bits, count, first_ts, interval_ns, out);
}

TimeBlockImage TimeBlock::Image() const {
  TimeBlockImage im;
  std::lock_guard lock(mu_);
  im.first_tick = first_tick;
  im.interval_ns = interval_ns;
  im.first_ts = first_ts_;
  im.last_ts = last_ts_;
  im.count = count_;
  im.bits = bits_;
  im.data.assign(data_.get(), data_.get() + (bits_ + 7) / 8);
  return im;
}

}  // namespace fabricscope
