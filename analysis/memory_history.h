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

  // The stack an entry names (innermost first), kept once; returns its index.
  uint32_t stack(std::vector<MemoryFrame> frames, const std::string& key);
  // Whether the stack keyed `key` is kept already, and its index.
  bool known(const std::string& key, uint32_t* index) const;

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
