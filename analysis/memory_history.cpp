#include "analysis/memory_history.h"

#include <algorithm>

namespace torchprof {
namespace {

uint64_t block_key(const MemoryHistoryEntry& e) { return e.address ^ (uint64_t{e.device} << 56); }

}  // namespace

void MemoryHistoryBuilder::add(const MemoryHistoryEntry& e) {
  const uint64_t seq = next_seq_++;
  if (e.alloc) {
    live_[block_key(e)] = {seq, e};
  } else {
    live_.erase(block_key(e));
  }
  if (max_entries_ == 0) {
    ++dropped_;
    return;
  }
  ring_.emplace_back(seq, e);
  if (ring_.size() > max_entries_) {
    ring_.pop_front();
    ++dropped_;
  }
}

MemoryHistory MemoryHistoryBuilder::finish() {
  MemoryHistory h;
  h.max_entries = max_entries_;
  h.dropped = dropped_;
  const uint64_t first_kept = ring_.empty() ? next_seq_ : ring_.front().first;
  // The blocks live at the end whose allocation was left out: without them the viewer
  // would start from less than was allocated.
  std::vector<std::pair<uint64_t, MemoryHistoryEntry>> before;
  for (const auto& [key, held] : live_) {
    if (held.first < first_kept) before.push_back(held);
  }
  std::sort(before.begin(), before.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  h.entries.reserve(before.size() + ring_.size());
  for (auto& [seq, e] : before) {
    e.before = true;
    h.entries.push_back(e);
  }
  for (const auto& [seq, e] : ring_) h.entries.push_back(e);
  h.stacks = std::move(stacks_);
  return h;
}

}  // namespace torchprof
