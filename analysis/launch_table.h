// The engine's API calls by correlation id (analysis/conn_pass_gpu.cpp): what a GPU
// record needs of the call that launched it, held for the records read later.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "analysis/name.h"

namespace torchprof {

// At most this many calls (56 bytes each) are held; a power of two.
constexpr size_t kMaxLaunches = size_t{1} << 18;

// A launching API call as GPU records need it: the ranges around it, its step, its
// interval and thread (the overview's launch figures, the trace's flow), the External id
// of the range around it.
struct Launch {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  Name name;
  int32_t node = -1;
  int32_t step = -1;
  uint32_t tid = 0;
  uint32_t enclosing_id = 0;
  bool kept = true;      // inside the capture range
  bool runtime = true;   // a runtime API call (else driver)
  bool flowed = false;   // a GPU record of it was written to a trace (its flow started)
};

// API calls by correlation id, for the GPU records that name them. CUPTI numbers calls
// in order, process-wide, so the calls read lately have nearby ids: a table indexed by
// the id's low bits holds them, doubling whenever two would share a slot; at
// kMaxLaunches slots the call read last takes the slot instead. A GPU record that names
// a call pushed out counts as one whose call was not recorded.
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
  Launch* find(uint64_t correlation) {
    if (slots_.empty()) return nullptr;
    Slot& slot = slots_[correlation & (slots_.size() - 1)];
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
