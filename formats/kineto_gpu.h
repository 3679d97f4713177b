// The GPU parts of a Kineto trace: deviceProperties, kernel/gpu_memcpy/gpu_memset/
// cuda_sync rows on pid = device, tid = stream with Kineto's argument names, ac2g
// flows and "[memory]" instants. Each function appends one complete JSON value
// to the trace's buffer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/model.h"
#include "formats/json_writer.h"

namespace torchprof::kineto {

// The "deviceProperties" array.
void append_device_properties(json::Buffer& out, const std::vector<GpuDevice>& devices);

// One X event of a GPU record; `external_id` 0 = none (no range around its launch).
// `device` may be null (properties unknown: occupancy fields are 0).
void append_gpu_event(json::Buffer& out, const GpuEvent& g, int64_t base_ns, uint64_t external_id,
                      const GpuDevice* device);

// Flow start (on the API call) or finish (on the GPU record, "bp": "e"), id = correlation;
// `category` (the flow's cat and name): "ac2g", or "fwdbwd" from a forward op to its
// backward op.
void append_flow(json::Buffer& out, bool start, uint64_t correlation, int64_t pid, int64_t tid,
                 int64_t ts_ns, int64_t base_ns, std::string_view category = "ac2g");

// A "[memory]" instant on the CPU thread that allocated or freed.
void append_memory_event(json::Buffer& out, const MemoryEvent& m, int pid, uint32_t tid, int64_t base_ns);

// Trace tid of a GPU record: its stream, -1 for syncs not tied to a stream.
int64_t gpu_tid(const GpuEvent& g);

// Kineto's occupancy estimates for a kernel on `device`.
struct Occupancy {
  double blocks_per_sm = 0;
  double warps_per_sm = 0;
  int achieved_percent = 0;  // theoretical occupancy capped by the blocks available
};
Occupancy estimate_occupancy(const GpuEvent& kernel, const GpuDevice& device);

}  // namespace torchprof::kineto
