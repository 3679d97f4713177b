// The one clock of every CPU record. Kept in one inline function so it can be
// swapped (TSC + calibration) without touching callers; the Hello message pairs
// it with CLOCK_REALTIME.
#pragma once

#include <time.h>

#include <cstdint>

namespace torchprof::inject {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace torchprof::inject
