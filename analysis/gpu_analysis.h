// What the GPU records of an analysed process add up to: device utilisation (HTA's
// busy/idle: merged kernel intervals) over any set of records, and device memory (the
// running total of CUPTI's allocations). Attribution to ranges is the engine's
// (analysis/engine.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

// Total length of the union of [start, end) intervals.
int64_t merged_length(std::vector<std::pair<int64_t, int64_t>> intervals);

// Utilisation of one device of one process over the records `keep` accepts.
struct DeviceUsage {
  uint32_t device = 0;
  int64_t window_start_ns = 0;  // the recorded window: recorded steps and their GPU work
  int64_t window_end_ns = 0;
  int64_t busy_ns = 0;          // merged kernel intervals (HTA's definition)
  int64_t busy_all_ns = 0;      // merged kernel, memcpy and memset intervals
  int64_t idle_ns = 0;          // window - busy_ns
  uint64_t kernels = 0;
  uint64_t memcpys = 0;
  uint64_t memsets = 0;
  uint64_t syncs = 0;
  int64_t kernel_ns = 0;        // summed durations
  int64_t memcpy_ns = 0;
  int64_t memset_ns = 0;
  uint64_t memcpy_bytes = 0;
  uint64_t memset_bytes = 0;
  struct Stream {
    uint64_t ops = 0;     // kernels, copies and memsets on the stream
    int64_t busy_ns = 0;  // their merged intervals
  };
  std::map<uint32_t, Stream> streams;
};

using GpuFilter = std::function<bool(const GpuRecord&)>;

// Per device, records accepted by `keep`; the window spans the recorded steps
// (Step::cycle >= 0) and the accepted records.
std::vector<DeviceUsage> device_usage(const Process& proc, const GpuFilter& keep);
// device_usage() of each step's own records (GpuRecord::step == k), for all steps in one pass.
std::vector<std::vector<DeviceUsage>> device_usage_per_step(const Process& proc);
// Each step's GPU records (GpuRecord::step == k), in list order, found in one pass.
std::vector<std::vector<const GpuRecord*>> gpu_records_per_step(const Process& proc);

// GPU records that belong to a recorded step (the set ops and traces report).
bool in_recorded_step(const Process& proc, const GpuRecord& g);

// Device memory over the whole process (allocations before tracing began are unknown).
struct MemoryUsage {
  std::map<uint32_t, int64_t> peak_bytes;   // device → highest running total
  std::map<uint32_t, int64_t> final_bytes;  // device → running total at the end
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t alloc_bytes = 0;
  uint64_t free_bytes = 0;
};
MemoryUsage memory_usage(const Process& proc);

// Highest running total per device while step `step` ran (its start included).
std::map<uint32_t, int64_t> step_peak_bytes(const Process& proc, int step);
// step_peak_bytes() of every step, in one sweep over the memory events.
std::vector<std::map<uint32_t, int64_t>> peak_bytes_per_step(const Process& proc);

}  // namespace torchprof
