// A second CUPTI client in the profiled process, used the way torch.profiler's
// Kineto uses CUPTI (libkineto's CuptiActivityApi / CuptiCallbackApi): it tries
// to subscribe (and carries on when the slot is taken), registers its own buffer
// callbacks and a TSC-like timestamp callback, enables the kinds Kineto enables,
// and at its stop disables those kinds, then flushes (forced) and reads its
// buffers only if one of them is still out with CUPTI (Kineto's activityBuffers()
// returns nothing otherwise), and wants no more buffers than the records need.
// It checks that it got exactly the kernels and copies launched while it was on,
// with their durations in its own clock, and no record of a kind it never enabled.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "workload_script.h"

namespace fake_workload {

class SecondClient {
 public:
  // `calls`: how the client reaches CUPTI (the process's symbols or the library's handle).
  void start(const CuptiCalls& calls);
  // Work launched while the client is on, by row name ("Memcpy HtoD (Pageable -> Device)").
  void launched(const std::string& row, uint64_t duration_ns);
  // Disables, flushes, compares; false (with the reasons on stderr) on a mismatch.
  bool stop();
  bool active() const { return active_; }

  // The client's clock: three ticks per nanosecond from an offset, like a TSC.
  static uint64_t clock();

 private:
  bool compare(const std::map<std::string, std::vector<uint64_t>>& got) const;

  CuptiCalls calls_;
  bool active_ = false;
  std::map<std::string, std::vector<uint64_t>> expected_;  // row → durations (ns)
};

}  // namespace fake_workload
