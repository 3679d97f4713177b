// Start/end ranges paired by their range id as a capture is read (analysis/process_scan.cpp):
// a start takes the end of its id read before it, or waits for the next one.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

namespace torchprof {

class RangePairing {
 public:
  struct End {
    int64_t ts = 0;
    uint32_t tid = 0;  // the thread that ended it
  };

  // A start read as range `index`: the end read before it (its thread's frame came
  // first), if any; else it is open. A start whose id is taken again is no longer open.
  std::optional<End> start(uint64_t id, uint32_t index) {
    auto pending = waiting_ends_.find(id);
    if (pending == waiting_ends_.end()) {
      open_[id] = index;
      return std::nullopt;
    }
    const End end = pending->second;
    waiting_ends_.erase(pending);
    return end;
  }

  // An end read: the index of the open start it ends, if any; else it waits for its
  // start (a later end of the same id replaces it).
  std::optional<uint32_t> end(uint64_t id, int64_t ts, uint32_t tid) {
    auto open = open_.find(id);
    if (open == open_.end()) {
      waiting_ends_[id] = {ts, tid};
      return std::nullopt;
    }
    const uint32_t index = open->second;
    open_.erase(open);
    return index;
  }

  // Starts never ended, by range id: their range index.
  const std::unordered_map<uint64_t, uint32_t>& open() const { return open_; }
  void clear_open() { open_.clear(); }
  // Ends whose start was never read.
  size_t waiting_ends() const { return waiting_ends_.size(); }

 private:
  std::unordered_map<uint64_t, uint32_t> open_;
  std::unordered_map<uint64_t, End> waiting_ends_;
};

}  // namespace torchprof
