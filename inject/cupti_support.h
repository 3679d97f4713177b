// Pure helpers of GPU tracing, kept apart from CUPTI and process state so the
// unit tests exercise them directly.
#pragma once

#include <cstdint>

namespace torchprof::inject {

// Length of a runtime API name without CUPTI's version tag: "_v" and at least
// four digits ("cudaLaunchKernel_v7000" → 16, "cudaMalloc_v3020" → 10). Driver
// names such as "cuMemcpyHtoD_v2" end in real symbol suffixes and are kept.
inline uint32_t api_name_length(const char* name, uint32_t len) {
  if (name == nullptr) return 0;
  uint32_t digits = 0;
  while (digits < len && name[len - 1 - digits] >= '0' && name[len - 1 - digits] <= '9') ++digits;
  if (digits >= 4 && len >= digits + 3 && name[len - digits - 1] == 'v' && name[len - digits - 2] == '_') {
    return len - digits - 2;
  }
  return len;
}

// Measures (CUPTI clock − our clock) from `tries` readings of CUPTI's clock,
// each bracketed by two of ours; the reading with the narrowest bracket wins
// (least disturbed by preemption). False when CUPTI's clock cannot be read.
inline bool measure_clock_offset(bool (*cupti_now)(uint64_t*), uint64_t (*our_now)(), int tries,
                                 int64_t* offset_ns) {
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < tries; ++i) {
    uint64_t before = our_now();
    uint64_t theirs = 0;
    if (!cupti_now(&theirs)) return false;
    uint64_t after = our_now();
    if (after - before < best_width) {
      best_width = after - before;
      *offset_ns = static_cast<int64_t>(theirs - (before + (after - before) / 2));
    }
  }
  return best_width != UINT64_MAX;
}

}  // namespace torchprof::inject
