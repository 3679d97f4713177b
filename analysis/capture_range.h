// `--capture-range`, as nsys has it: only what happens inside the capture windows
// is analysed. cudaProfilerApi: from each cudaProfilerStart to the next
// cudaProfilerStop (or the process's end); nvtx:NAME[@DOMAIN]: each NVTX range so
// named. Events, API calls and the GPU work they launch outside every window are left
// out (GPU work and memory events follow the API call that caused them, when known), and
// steps are made of the step markers inside the windows only.
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

// The windows [start, end] of a process (merged, in time order; empty when nothing is
// captured): from its cudaProfilerStart/Stop toggles (in time order), or the intervals of
// its NVTX ranges of the range's name (and domain). kNone and kSignal: everything.
std::vector<std::pair<int64_t, int64_t>> capture_windows(const CaptureRange& range,
                                                         const std::vector<ProfilerToggle>& toggles,
                                                         std::vector<std::pair<int64_t, int64_t>> nvtx_ranges);

// Whether `t` lies in one of `windows` (capture_windows()'s).
bool inside_windows(const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t t);

// The warning a process gets when the range has no window in it and it recorded anything.
std::string no_window_warning(const CaptureRange& range);

}  // namespace torchprof
