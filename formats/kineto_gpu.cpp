#include "formats/kineto_gpu.h"

#include <algorithm>
#include <cmath>

#include "formats/json_writer.h"

namespace torchprof::kineto {

namespace {

const char* category(GpuKind kind) {
  switch (kind) {
    case GpuKind::kKernel: return "kernel";
    case GpuKind::kMemcpy: return "gpu_memcpy";
    case GpuKind::kMemset: return "gpu_memset";
    case GpuKind::kSync: return "cuda_sync";
  }
  return "kernel";
}

void key(json::Buffer& out, const char* name) {
  out += ", \"";
  out += name;
  out += "\": ";
}

void uint_arg(json::Buffer& out, const char* name, uint64_t v) {
  key(out, name);
  json::append_uint(out, v);
}

void dims(json::Buffer& out, const char* name, const uint32_t (&d)[3]) {
  key(out, name);
  out += '[';
  for (int i = 0; i < 3; ++i) {
    if (i) out += ", ";
    json::append_uint(out, d[i]);
  }
  out += ']';
}

void kernel_args(json::Buffer& out, const GpuEvent& g, int64_t base_ns, const GpuDevice* device) {
  key(out, "queued");
  if (g.queued_ns != 0) {
    json::append_us(out, g.queued_ns - base_ns);
  } else {
    out += '0';
  }
  uint_arg(out, "device", g.device);
  uint_arg(out, "context", g.context);
  uint_arg(out, "stream", g.stream);
  uint_arg(out, "correlation", g.correlation);
  uint_arg(out, "registers per thread", g.registers_per_thread);
  uint_arg(out, "shared memory", uint64_t{g.static_shared_memory} + g.dynamic_shared_memory);
  // Without the device's properties the occupancy is unknown: left out, as Kineto does,
  // never written as 0 (TensorBoard warns of every non-positive "blocks per SM").
  const bool known = device != nullptr && device->num_sms != 0 && device->warp_size != 0;
  const Occupancy occ = known ? estimate_occupancy(g, *device) : Occupancy{};
  if (known) {
    key(out, "blocks per SM");
    json::append_double(out, occ.blocks_per_sm);
    key(out, "warps per SM");
    json::append_double(out, occ.warps_per_sm);
  }
  dims(out, "grid", g.grid);
  dims(out, "block", g.block);
  if (known) uint_arg(out, "est. achieved occupancy %", static_cast<uint64_t>(occ.achieved_percent));
  if (g.graph_id != 0) {
    uint_arg(out, "graph id", g.graph_id);
    uint_arg(out, "graph node id", g.graph_node_id);
  }
  if (!g.mangled.empty() && g.mangled != g.name) {
    key(out, "mangled name");
    json::append_string(out, g.mangled);
  }
}

void copy_args(json::Buffer& out, const GpuEvent& g) {
  uint_arg(out, "device", g.device);
  uint_arg(out, "context", g.context);
  uint_arg(out, "stream", g.stream);
  uint_arg(out, "correlation", g.correlation);
  uint_arg(out, "bytes", g.bytes);
  // bytes per ns = GB/s, as Kineto computes it.
  key(out, "memory bandwidth (GB/s)");
  json::append_double(out, g.dur_ns() > 0 ? static_cast<double>(g.bytes) / static_cast<double>(g.dur_ns()) : 0.0);
  if (g.graph_id != 0) uint_arg(out, "graph id", g.graph_id);
}

void sync_args(json::Buffer& out, const GpuEvent& g) {
  key(out, "cuda_sync_kind");
  json::append_string(out, g.name);
  // CUPTI's stream id as Kineto writes it: a context synchronisation has none,
  // CUPTI_SYNCHRONIZATION_INVALID_VALUE, written unsigned (4294967295).
  uint_arg(out, "stream", g.stream);
  uint_arg(out, "correlation", g.correlation);
  uint_arg(out, "device", g.device);
  uint_arg(out, "context", g.context);
  // A stream wait names the event and the stream it was recorded on (HTA's critical path).
  if (g.sync_type == 2 /*CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT*/) {
    if (g.wait_on_stream != ~0u) uint_arg(out, "wait_on_stream", g.wait_on_stream);
    if (g.sync_event != ~0u) uint_arg(out, "wait_on_cuda_event_id", g.sync_event);
  }
}

}  // namespace

int64_t gpu_tid(const GpuEvent& g) { return g.stream == ~0u ? -1 : static_cast<int64_t>(g.stream); }

Occupancy estimate_occupancy(const GpuEvent& k, const GpuDevice& d) {
  Occupancy occ;
  const uint64_t threads = uint64_t{k.block[0]} * k.block[1] * k.block[2];
  const uint64_t blocks = uint64_t{k.grid[0]} * k.grid[1] * k.grid[2];
  if (d.num_sms == 0 || d.warp_size == 0 || threads == 0) return occ;
  const uint64_t warps_per_block = (threads + d.warp_size - 1) / d.warp_size;
  occ.blocks_per_sm = static_cast<double>(blocks) / d.num_sms;
  occ.warps_per_sm = occ.blocks_per_sm * static_cast<double>(warps_per_block);
  const uint64_t max_warps = d.max_threads_per_multiprocessor / d.warp_size;
  if (max_warps == 0) return occ;
  // Resident blocks per SM, limited by threads, registers and shared memory.
  uint64_t limit = max_warps / warps_per_block;
  const uint64_t regs = uint64_t{k.registers_per_thread} * warps_per_block * d.warp_size;
  if (regs > 0 && d.regs_per_multiprocessor > 0) limit = std::min<uint64_t>(limit, d.regs_per_multiprocessor / regs);
  const uint64_t smem = uint64_t{k.static_shared_memory} + k.dynamic_shared_memory;
  if (smem > 0 && d.shared_mem_per_multiprocessor > 0) {
    limit = std::min<uint64_t>(limit, d.shared_mem_per_multiprocessor / smem);
  }
  const double active = std::min(static_cast<double>(limit), std::ceil(occ.blocks_per_sm));
  occ.achieved_percent = static_cast<int>(std::lround(
      std::min(100.0, active * static_cast<double>(warps_per_block) * 100.0 / static_cast<double>(max_warps))));
  return occ;
}

void append_device_properties(json::Buffer& out, const std::vector<GpuDevice>& devices) {
  out += '[';
  for (size_t i = 0; i < devices.size(); ++i) {
    const GpuDevice& d = devices[i];
    out += i ? ",\n    {\"id\": " : "\n    {\"id\": ";
    json::append_uint(out, d.id);
    out += ", \"name\": ";
    json::append_string(out, d.name);
    if (d.num_sms == 0 && d.warp_size == 0) {  // seen in rows, properties unknown: no made-up zeros
      out += '}';
      continue;
    }
    uint_arg(out, "totalGlobalMem", d.total_global_mem);
    uint_arg(out, "computeMajor", d.compute_major);
    uint_arg(out, "computeMinor", d.compute_minor);
    uint_arg(out, "maxThreadsPerBlock", d.max_threads_per_block);
    uint_arg(out, "maxThreadsPerMultiprocessor", d.max_threads_per_multiprocessor);
    uint_arg(out, "regsPerBlock", d.regs_per_block);
    uint_arg(out, "warpSize", d.warp_size);
    uint_arg(out, "sharedMemPerBlock", d.shared_mem_per_block);
    uint_arg(out, "numSms", d.num_sms);
    uint_arg(out, "regsPerMultiprocessor", d.regs_per_multiprocessor);
    uint_arg(out, "sharedMemPerBlockOptin", d.shared_mem_per_block_optin);
    uint_arg(out, "sharedMemPerMultiprocessor", d.shared_mem_per_multiprocessor);
    out += '}';
  }
  out += devices.empty() ? "]" : "\n  ]";
}

void append_gpu_event(json::Buffer& out, const GpuEvent& g, int64_t base_ns, uint64_t external_id,
                      const GpuDevice* device) {
  out += "{\"ph\": \"X\", \"cat\": \"";
  out += category(g.kind);
  out += "\", \"name\": ";
  json::append_string(out, g.name);
  out += ", \"pid\": ";
  json::append_uint(out, g.device);
  out += ", \"tid\": ";
  json::append_int(out, gpu_tid(g));
  out += ", \"ts\": ";
  json::append_us(out, g.start_ns - base_ns);
  out += ", \"dur\": ";
  json::append_us(out, g.dur_ns());
  out += ",\n    \"args\": {";
  // Kineto never writes a null External id: without an enclosing op there is none.
  if (external_id != 0) {
    out += "\"External id\": ";
    json::append_uint(out, external_id);
  } else {
    out += "\"External id\": 0";
  }
  switch (g.kind) {
    case GpuKind::kKernel: kernel_args(out, g, base_ns, device); break;
    case GpuKind::kMemcpy:
    case GpuKind::kMemset: copy_args(out, g); break;
    case GpuKind::kSync: sync_args(out, g); break;
  }
  out += "}}";
}

void append_flow(json::Buffer& out, bool start, uint64_t correlation, int64_t pid, int64_t tid,
                 int64_t ts_ns, int64_t base_ns, std::string_view category) {
  out += start ? "{\"ph\": \"s\", \"id\": " : "{\"ph\": \"f\", \"id\": ";
  json::append_uint(out, correlation);
  out += ", \"pid\": ";
  json::append_int(out, pid);
  out += ", \"tid\": ";
  json::append_int(out, tid);
  out += ", \"ts\": ";
  json::append_us(out, ts_ns - base_ns);
  out += ", \"cat\": \"";
  out += category;
  out += "\", \"name\": \"";
  out += category;
  out += '"';
  if (!start) out += ", \"bp\": \"e\"";
  out += '}';
}

void append_memory_event(json::Buffer& out, const MemoryEvent& m, int pid, uint32_t tid, int64_t base_ns) {
  out += "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": ";
  json::append_int(out, pid);
  out += ", \"tid\": ";
  json::append_uint(out, tid);
  out += ", \"ts\": ";
  json::append_us(out, m.ts_ns - base_ns);
  // Device Type in c10's DeviceType (0 CPU, 1 CUDA); frees carry negative bytes, as in
  // torch. CPU tensors are on device -1, as torch writes them.
  out += ",\n    \"args\": {\"Device Type\": ";
  json::append_uint(out, m.device_type);
  out += ", \"Device Id\": ";
  if (m.device_type == 0) {
    out += "-1";
  } else {
    json::append_uint(out, m.device);
  }
  out += ", \"Addr\": ";
  json::append_uint(out, m.address);
  out += ", \"Bytes\": ";
  json::append_int(out, m.alloc ? static_cast<int64_t>(m.bytes) : -static_cast<int64_t>(m.bytes));
  // Allocations seen through CUPTI are what the driver handed out, and CPU tensors have no
  // cache: allocated = reserved here.
  out += ", \"Total Allocated\": ";
  json::append_int(out, m.total_allocated >= 0 ? m.total_allocated : m.live_bytes);
  out += ", \"Total Reserved\": ";
  json::append_int(out, m.total_reserved >= 0 ? m.total_reserved : m.live_bytes);
  out += "}}";
}

}  // namespace torchprof::kineto
