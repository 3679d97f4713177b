// The engine's first pass over a process (analysis/engine.h), where its steps must be
// learnt before its events can be counted: each of its connections' records read once
// for what decides the steps and what a record may depend on that comes later in the
// capture. That is: the step markers (ranges and marks whose names match), the start/end
// ranges paired (a range the Python bootstrap writes once it ended holds what was
// written before it), the last definition of every string, domain and category (a
// thread may name a string another thread defines in a later frame), the capture range's
// and on-demand capture's windows, and the process's span. Nothing is counted here.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/analysis.h"
#include "analysis/model.h"
#include "reading/capture_reader.h"
#include "reading/capture_scan.h"

namespace torchprof {

// What a connection's records define, each as its last definition has it.
struct ConnDefinitions {
  std::unordered_map<uint32_t, std::string> strings;
  std::unordered_map<uint16_t, uint32_t> domains;     // domain id -> its name's string id (0: none)
  std::unordered_map<uint64_t, uint32_t> categories;  // domain << 32 | category -> its name's string id
};

inline uint64_t category_key(uint16_t domain, uint32_t category) { return (uint64_t{domain} << 32) | category; }

// A start/end range as its start and end pair (by range id, in the order they are read).
struct StartEndRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;      // an unended one: the image's end
  uint64_t attr = 0;       // NVTX category and payload type
  uint64_t payload = 0;
  uint32_t tid = 0;
  uint32_t end_tid = 0;    // the thread that ended it (== tid for an unended one)
  uint32_t name = 0;       // string id
  uint16_t domain = 0;
  bool ended = false;
  bool on_thread() const { return end_tid == tid; }  // nests among its thread's ranges
};

// A CUDA API call: from a callback's record on its thread (kCudaRuntime, kCudaDriver), or
// from CUPTI's RUNTIME / DRIVER activity records (kCudaApiActivity), which the first pass
// collects for the second to place among the calling thread's records by time.
struct ApiCall {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t correlation = 0;
  uint32_t name = 0;   // string id
  uint16_t cbid = 0;
  bool driver = false;
};

// What the first pass learns of one connection.
struct ConnScan {
  ConnDefinitions defs;
  std::vector<StartEndRange> start_ends;  // in the order their starts were read
  uint64_t waiting_ends = 0;              // ends whose start never came
  std::unordered_map<uint32_t, uint32_t> context_device;  // the device each context's kernels ran on
  bool any_event = false;                 // a range, mark or API call
  bool any_gpu = false;                   // a kernel, copy, memset, sync or memory event
  // Per calling thread, in the order the second pass takes them (by end, the outer call
  // after the calls it holds); driver calls made inside a runtime call are left out.
  std::unordered_map<uint32_t, std::vector<ApiCall>> activity_calls;
};

// What the first pass learns of a process.
struct ProcessScan {
  std::vector<ConnScan> conns;  // in the process's connection order
  std::vector<Step> steps;      // with the schedule's (or the capture windows') actions and cycles
  std::vector<std::pair<int64_t, int64_t>> windows;  // the capture range's windows (merged)
  int64_t start_ns = 0;         // the process's span: its records' and its goodbyes' times
  int64_t end_ns = 0;
};

// Reads the connections of one process (in capture order). Fills proc's profiler
// toggles, capture toggles and capture windows, and its span; returns the steps.
ProcessScan scan_process(CaptureReader& reader, const std::vector<const ConnInput*>& conns,
                         const AnalysisOptions& options, const StepMarker& marker, Process& proc);

// The text a string id never defined is shown as: its definition was in a frame that
// was lost (names are defined once per thread, in the frame of their first use).
inline std::string stand_in_text(uint32_t id) { return "<lost #" + std::to_string(id) + ">"; }

// The GPU records' clock (GpuDecoder's): a damaged timestamp gives a wrong time, never UB.
inline int64_t gpu_epoch_ns(const wire::Hello& hello, uint64_t ts) {
  const auto t = static_cast<int64_t>(ts + (hello.real_ns - hello.mono_ns));
  return t < 0 ? 0 : std::min(t, int64_t{1} << 61);
}

}  // namespace torchprof
