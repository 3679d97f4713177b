// --memory-snapshot's history of CUDA tensor allocations and frees (model.h
// MemoryHistory), built as the engine's pass reads them: a ring of the last entries, the
// blocks still live, and the stacks the entries name, each kept once.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

class MemoryHistoryBuilder {
 public:
  explicit MemoryHistoryBuilder(size_t max_entries) : max_entries_(max_entries) {}

  // The index of the stack keyed `key`; the first time, its frames (innermost first)
  // are made by `frames()` and kept.
  template <typename MakeFrames>
  uint32_t stack(const std::string& key, MakeFrames&& frames) {
    const auto [it, added] = stack_index_.try_emplace(key, static_cast<uint32_t>(stacks_.size()));
    if (added) stacks_.push_back(frames());
    return it->second;
  }

  void add(const MemoryHistoryEntry& e);
  MemoryHistory finish();

 private:
  size_t max_entries_;
  uint64_t next_seq_ = 0;
  uint64_t dropped_ = 0;
  std::deque<std::pair<uint64_t, MemoryHistoryEntry>> ring_;    // (seq, entry), oldest first
  std::unordered_map<uint64_t, std::pair<uint64_t, MemoryHistoryEntry>> live_;  // by device and address
  std::map<std::string, uint32_t> stack_index_;
  std::vector<std::vector<MemoryFrame>> stacks_;
};

}  // namespace torchprof
