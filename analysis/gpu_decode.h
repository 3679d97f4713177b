// Decoding of the CUDA/GPU records (wire kinds 34..44: kernels, copies, memsets,
// syncs, memory, devices, drops, notices, profiler start/stop, unreadable
// buffers, tracing state). Kernels, copies, memsets, syncs and memory events come out one
// record at a time (gpu_events(), memory_events(), emptied by the caller); the rest goes
// into the Process. API-call records (32, 33) are CPU events, the engine's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>

#include "analysis/model.h"
#include "common/wire/wire.h"

namespace torchprof {

// Kineto's display names, from CUPTI's enum values.
std::string memcpy_row_name(uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind);
std::string memset_row_name(uint8_t memory_kind);
std::string sync_row_name(uint32_t sync_type);
// abi::__cxa_demangle for "_Z…" names; anything else comes back unchanged.
std::string demangle(const std::string& mangled);

class GpuDecoder {
 public:
  // epoch_offset converts record timestamps (monotonic ns) to Unix-epoch ns.
  GpuDecoder(Process& proc, int64_t epoch_offset) : proc_(proc), offset_(epoch_offset) {}

  // Handles kinds kKernel..kGpuState; false for any other kind. `name` is the
  // record's name string, `extra` its continuation slots.
  bool decode(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid,
              const Name& name);

  // The records decode() made, for the caller to take (and clear).
  std::vector<GpuEvent>& gpu_events() { return gpu_; }
  std::vector<MemoryEvent>& memory_events() { return memory_; }

  // Sorts the devices and profiler toggles, and leaves warnings on the process.
  void finish();

  // Earliest and latest GPU timestamps seen (epoch ns), for the process's span.
  int64_t first_ns() const { return first_; }
  int64_t last_ns() const { return last_; }
  bool any() const { return first_ != std::numeric_limits<int64_t>::max(); }

 private:
  // A damaged timestamp gives a wrong time, never UB: wrapping arithmetic, held in
  // [0, 2^61] so that differences and sums stay clear of int64 overflow.
  int64_t epoch(uint64_t ts) const {
    const auto t = static_cast<int64_t>(ts + static_cast<uint64_t>(offset_));
    return t < 0 ? 0 : std::min(t, int64_t{1} << 61);
  }
  void span(int64_t start, int64_t end);
  void kernel(const wire::Record& r, const uint8_t* extra, const Name& name);
  void copy(const wire::Record& r, const uint8_t* extra, bool is_memset);
  void sync(const wire::Record& r, const uint8_t* extra);
  void memory(const wire::Record& r, const uint8_t* extra);
  void device(const wire::Record& r, const uint8_t* extra, const std::string& name);
  void notice(const std::string& text);
  void cupti_client(const wire::Record& r, const std::string& library);
  void state(uint64_t value);
  bool incomplete(const wire::Record& r);

  Process& proc_;
  int64_t offset_;
  std::vector<GpuEvent> gpu_;
  std::vector<MemoryEvent> memory_;
  int64_t first_ = std::numeric_limits<int64_t>::max();
  int64_t last_ = std::numeric_limits<int64_t>::min();
  uint64_t short_records_ = 0;
  uint16_t unreadable_result_ = 0;  // the CUptiResult of the last buffer cut short
  std::unordered_map<Name, Name> demangled_;  // kernel names: recorded → displayed
  std::unordered_map<uint32_t, Name> copy_names_;  // memcpy/memset row names by kinds
};

}  // namespace torchprof
