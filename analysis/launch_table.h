// The streamed table's API calls by correlation id (analysis/stream_pass_gpu.cpp): what
// a GPU record needs of the call that launched it, held for the records read later.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchprof {

// At most this many calls (16 bytes each) are held; a power of two.
constexpr size_t kMaxLaunches = size_t{1} << 20;

// A launching API call as GPU records need it: the innermost range around it and its step.
struct Launch {
  int32_t node = -1;
  int32_t step = -1;
};

// API calls by correlation id, for the GPU records that name them. CUPTI numbers calls
// in order, process-wide, so the calls read lately have nearby ids: a table indexed by
// the id's low bits holds them, doubling whenever two would share a slot; at
// kMaxLaunches slots the call read last takes the slot instead. A GPU record that names
// a call pushed out (or a call read after one with a much higher id) sends the capture
// to the full analysis.
class Launches {
 public:
  // False when a call with this id is held already.
  bool add(uint64_t correlation, const Launch& call) {
    while (true) {
      if (slots_.empty()) slots_.resize(kFirstSlots);
      Slot& slot = slots_[correlation & (slots_.size() - 1)];
      if (slot.correlation == correlation) return false;
      if (slot.correlation == 0) {
        slot = {correlation, call};
        return true;
      }
      if (slots_.size() < kMaxLaunches) {
        grow();
        continue;
      }
      forgotten_ = std::max(forgotten_, slot.correlation);
      slot = {correlation, call};
      return true;
    }
  }
  const Launch* find(uint64_t correlation) const {
    if (slots_.empty()) return nullptr;
    const Slot& slot = slots_[correlation & (slots_.size() - 1)];
    return slot.correlation == correlation ? &slot.call : nullptr;
  }
  // Whether a call with this id may have been pushed out.
  bool maybe_forgotten(uint64_t correlation) const { return correlation <= forgotten_; }

 private:
  struct Slot {
    uint64_t correlation = 0;  // 0: empty (calls of correlation 0 are not held)
    Launch call;
  };
  static constexpr size_t kFirstSlots = 4096;
  // Ids apart in the low bits stay apart in more of them: nothing collides.
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old) {
      if (s.correlation != 0) slots_[s.correlation & (slots_.size() - 1)] = s;
    }
  }
  std::vector<Slot> slots_;
  uint64_t forgotten_ = 0;  // highest id pushed out
};

}  // namespace torchprof
