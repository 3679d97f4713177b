// `--capture-range`, as nsys has it: only what happens inside the capture windows
// is analysed. cudaProfilerApi: from each cudaProfilerStart to the next
// cudaProfilerStop (or the process's end); nvtx:NAME[@DOMAIN]: each NVTX range so
// named. Events, API calls and the GPU work they launch outside every window are
// dropped before nesting and steps are computed, so steps count only inside.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

struct CaptureRange {
  // kSignal: torchprof-run toggles recording at each SIGUSR2; the library records only
  // inside the windows, and its capture-window records say which (capture_windows.h).
  enum class Kind : uint8_t { kNone, kCudaProfilerApi, kNvtx, kSignal };
  Kind kind = Kind::kNone;
  std::string nvtx_name;    // kNvtx: the range's name
  std::string nvtx_domain;  // kNvtx: "" = any domain
};

// "none" | "cudaProfilerApi" | "nvtx:NAME[@DOMAIN]" | "signal"; nullopt (and `error` set) otherwise.
std::optional<CaptureRange> parse_capture_range(const std::string& text, std::string* error);

// The windows [start, end] of `proc` (in time order); empty when nothing is captured.
std::vector<std::pair<int64_t, int64_t>> capture_windows(const Process& proc, const CaptureRange& range);

// Drops from `proc` the events, GPU records and memory events outside its windows
// (GPU work and memory events follow the API call that caused them, when known).
// Call before compute_nesting(). Leaves a warning when nothing was captured.
void apply_capture_range(Process& proc, const CaptureRange& range);

}  // namespace torchprof
