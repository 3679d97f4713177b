#include "analysis/gpu_decode.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>


namespace torchprof {

namespace {

// CUpti_ActivityMemcpyKind, in enum order (UNKNOWN = 0 … PTOP = 10).
constexpr const char* kCopyKinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                      "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
// CUpti_ActivityMemoryKind (UNKNOWN = 0 … MANAGED_STATIC = 7).
constexpr const char* kMemoryKinds[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                        "Array",   "Managed",  "Device Static", "Managed Static"};
// CUpti_ActivitySynchronizationType (UNKNOWN = 0 … CONTEXT_SYNCHRONIZE = 4), Kineto's names.
constexpr const char* kSyncTypes[] = {"Unknown", "Event Sync", "Stream Wait Event", "Stream Sync",
                                      "Context Sync"};

template <size_t N>
const char* lookup(const char* const (&table)[N], size_t i) {
  return i < N ? table[i] : table[0];
}

constexpr uint8_t kMemoryAlloc = 1;    // CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
constexpr uint8_t kMemoryRelease = 2;  // CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE

template <typename T>
T load(const uint8_t* extra) {
  T value;
  std::memcpy(&value, extra, sizeof value);
  return value;
}

size_t extra_size(wire::Kind kind) {
  switch (kind) {
    case wire::Kind::kKernel: return sizeof(wire::GpuKernelExtra);
    case wire::Kind::kMemcpy:
    case wire::Kind::kMemset: return sizeof(wire::GpuCopyExtra);
    case wire::Kind::kMemory: return sizeof(wire::GpuMemoryExtra);
    case wire::Kind::kSync: return sizeof(wire::GpuSyncExtra);
    case wire::Kind::kDevice: return sizeof(wire::GpuDeviceExtra);
    default: return 0;
  }
}

}  // namespace

std::string memcpy_row_name(uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind) {
  return std::string("Memcpy ") + lookup(kCopyKinds, copy_kind) + " (" + lookup(kMemoryKinds, src_kind) +
         " -> " + lookup(kMemoryKinds, dst_kind) + ")";
}

std::string memset_row_name(uint8_t memory_kind) {
  return std::string("Memset (") + lookup(kMemoryKinds, memory_kind) + ")";
}

std::string sync_row_name(uint32_t sync_type) { return lookup(kSyncTypes, sync_type); }

std::string demangle(const std::string& mangled) {
  if (!mangled.starts_with("_Z")) return mangled;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

bool GpuDecoder::decode(const wire::Record& r, const uint8_t* extra, size_t extra_bytes, uint32_t tid,
                        const Name& name) {
  auto kind = static_cast<wire::Kind>(r.kind);
  if (kind == wire::Kind::kCuptiClient) {
    cupti_client(r, name);
    return true;
  }
  if (kind < wire::Kind::kKernel || kind > wire::Kind::kGpuState) return false;
  if (extra_bytes < extra_size(kind)) {
    ++short_records_;
    return true;
  }
  switch (kind) {
    case wire::Kind::kKernel: kernel(r, extra, name); break;
    case wire::Kind::kMemcpy: copy(r, extra, /*is_memset=*/false); break;
    case wire::Kind::kMemset: copy(r, extra, /*is_memset=*/true); break;
    case wire::Kind::kSync: sync(r, extra); break;
    case wire::Kind::kMemory: memory(r, extra); break;
    case wire::Kind::kDevice: device(r, extra, name); break;
    case wire::Kind::kGpuDropped:
      // Cumulative per process: the largest value is the total.
      proc_.cupti_dropped = std::max(proc_.cupti_dropped, r.a);
      break;
    case wire::Kind::kGpuNotice: notice(name); break;
    case wire::Kind::kCudaProfiler:
      proc_.profiler_toggles.push_back({epoch(r.ts), tid, r.a == 1});
      break;
    case wire::Kind::kGpuUnreadable:  // cumulative, like kGpuDropped
      proc_.gpu_unreadable_buffers = std::max(proc_.gpu_unreadable_buffers, r.a);
      proc_.gpu_unreadable_bytes = std::max(proc_.gpu_unreadable_bytes, r.b);
      unreadable_result_ = r.domain;
      break;
    case wire::Kind::kGpuState: state(r.a); break;
    default: break;
  }
  return true;
}

void GpuDecoder::cupti_client(const wire::Record& r, const std::string& library) {
  const char* path = r.domain == static_cast<uint16_t>(wire::CuptiClientPath::kOwnSubscriber) ? "own_subscriber"
                                                                                             : "forwarded";
  for (Process::CuptiClient& c : proc_.cupti_clients) {
    if (c.library == library && c.path == path) {
      c.subscribes = std::max(c.subscribes, r.a);
      return;
    }
  }
  proc_.cupti_clients.push_back(Process::CuptiClient{library, path, r.a});
}

void GpuDecoder::state(uint64_t value) {
  switch (static_cast<wire::GpuTracing>(value)) {
    case wire::GpuTracing::kOn: proc_.gpu_tracing = "on"; break;
    case wire::GpuTracing::kOff: proc_.gpu_tracing = "off"; break;
    case wire::GpuTracing::kNotStarted: proc_.gpu_tracing = "not_started"; break;
    default: break;
  }
}

// CUPTI_TIMESTAMP_UNKNOWN (0) at either end: CUPTI never collected the record's
// times (a forced flush while the work was queued, an exit without a synchronize,
// an overflowing device buffer). Placed at time 0 it would stretch the process
// over the whole uptime; it is counted instead.
bool GpuDecoder::incomplete(const wire::Record& r) {
  if (r.ts != 0 && r.a != 0) return false;
  ++proc_.gpu_incomplete;
  return true;
}

void GpuDecoder::span(int64_t start, int64_t end) {
  first_ = std::min(first_, start);
  last_ = std::max(last_, end);
}

void GpuDecoder::kernel(const wire::Record& r, const uint8_t* extra, const Name& name) {
  if (incomplete(r)) return;
  auto x = load<wire::GpuKernelExtra>(extra);
  GpuEvent& g = gpu_.emplace_back();
  g.kind = GpuKind::kKernel;
  g.mangled = name;
  auto [shown, fresh] = demangled_.try_emplace(name);
  if (fresh) shown->second = demangle(name);
  g.name = shown->second;
  g.device = r.domain;
  g.stream = x.stream;
  g.context = x.context;
  g.start_ns = epoch(r.ts);
  g.end_ns = std::max(g.start_ns, epoch(r.a));
  g.queued_ns = x.queued != 0 ? epoch(x.queued) : 0;
  g.correlation = r.b;
  std::copy(std::begin(x.grid), std::end(x.grid), g.grid);
  std::copy(std::begin(x.block), std::end(x.block), g.block);
  g.registers_per_thread = x.registers_per_thread;
  g.static_shared_memory = x.static_shared_memory;
  g.dynamic_shared_memory = x.dynamic_shared_memory;
  g.graph_id = x.graph_id;
  g.graph_node_id = x.graph_node_id;
  span(g.start_ns, g.end_ns);
}

void GpuDecoder::copy(const wire::Record& r, const uint8_t* extra, bool is_memset) {
  if (incomplete(r)) return;
  auto x = load<wire::GpuCopyExtra>(extra);
  GpuEvent& g = gpu_.emplace_back();
  g.kind = is_memset ? GpuKind::kMemset : GpuKind::kMemcpy;
  const uint32_t kinds = (uint32_t{is_memset} << 24) | (uint32_t{x.copy_kind} << 16) |
                         (uint32_t{x.src_kind} << 8) | x.dst_kind;
  auto [row, fresh] = copy_names_.try_emplace(kinds);
  if (fresh) {
    row->second = is_memset ? memset_row_name(x.dst_kind) : memcpy_row_name(x.copy_kind, x.src_kind, x.dst_kind);
  }
  g.name = row->second;
  g.device = r.domain;
  g.stream = x.stream;
  g.context = x.context;
  g.start_ns = epoch(r.ts);
  g.end_ns = std::max(g.start_ns, epoch(r.a));
  g.correlation = r.b;
  g.bytes = x.bytes;
  g.copy_kind = x.copy_kind;
  g.src_kind = x.src_kind;
  g.dst_kind = x.dst_kind;
  g.graph_id = x.graph_id;
  span(g.start_ns, g.end_ns);
}

void GpuDecoder::sync(const wire::Record& r, const uint8_t* extra) {
  if (incomplete(r)) return;
  auto x = load<wire::GpuSyncExtra>(extra);
  GpuEvent& g = gpu_.emplace_back();
  g.kind = GpuKind::kSync;
  g.name = sync_row_name(x.type);
  g.device = r.domain;  // the writer knows only the context; finish() maps it
  g.stream = x.stream;
  g.context = x.context;
  g.start_ns = epoch(r.ts);
  g.end_ns = std::max(g.start_ns, epoch(r.a));
  g.correlation = r.b;
  g.sync_type = x.type;
  g.sync_event = x.event;
  if (x.event_stream1 != 0) g.wait_on_stream = x.event_stream1 - 1;
  span(g.start_ns, g.end_ns);
}

void GpuDecoder::memory(const wire::Record& r, const uint8_t* extra) {
  auto x = load<wire::GpuMemoryExtra>(extra);
  if (x.operation != kMemoryAlloc && x.operation != kMemoryRelease) return;
  MemoryEvent& m = memory_.emplace_back();
  m.alloc = x.operation == kMemoryAlloc;
  m.device = r.domain;
  m.memory_kind = x.memory_kind;
  m.stream = x.stream;
  m.context = x.context;
  m.ts_ns = epoch(r.ts);
  m.address = r.a;
  m.bytes = r.b;
  m.correlation = x.correlation;
  span(m.ts_ns, m.ts_ns);
}

void GpuDecoder::device(const wire::Record& r, const uint8_t* extra, const std::string& name) {
  auto x = load<wire::GpuDeviceExtra>(extra);
  auto found = std::find_if(proc_.devices.begin(), proc_.devices.end(),
                            [&](const GpuDevice& d) { return d.id == r.domain; });
  GpuDevice& d = found != proc_.devices.end() ? *found : proc_.devices.emplace_back();
  d.id = r.domain;
  d.name = name;
  d.total_global_mem = x.total_global_mem;
  d.compute_major = x.compute_major;
  d.compute_minor = x.compute_minor;
  d.max_threads_per_block = x.max_threads_per_block;
  d.max_threads_per_multiprocessor = x.max_threads_per_multiprocessor;
  d.regs_per_block = x.regs_per_block;
  d.warp_size = x.warp_size;
  d.shared_mem_per_block = x.shared_mem_per_block;
  d.num_sms = x.num_sms;
  d.regs_per_multiprocessor = x.regs_per_multiprocessor;
  d.shared_mem_per_block_optin = x.shared_mem_per_block_optin;
  d.shared_mem_per_multiprocessor = x.shared_mem_per_multiprocessor;
}

void GpuDecoder::notice(const std::string& text) {
  if (text.empty()) return;
  if (std::find(proc_.gpu_notices.begin(), proc_.gpu_notices.end(), text) == proc_.gpu_notices.end()) {
    proc_.gpu_notices.push_back(text);
  }
}

void GpuDecoder::finish() {
  std::sort(proc_.devices.begin(), proc_.devices.end(),
            [](const GpuDevice& x, const GpuDevice& y) { return x.id < y.id; });
  std::stable_sort(proc_.profiler_toggles.begin(), proc_.profiler_toggles.end(),
                   [](const ProfilerToggle& x, const ProfilerToggle& y) { return x.ts_ns < y.ts_ns; });
  if (short_records_ > 0) {
    proc_.warnings.push_back(std::to_string(short_records_) + " GPU records were too short and were skipped");
  }
  if (proc_.gpu_incomplete > 0) {
    proc_.warnings.push_back(std::to_string(proc_.gpu_incomplete) +
                             " GPU records came without times (CUPTI did not collect them: work still queued at a "
                             "forced flush or at an exit without synchronizing, or a full device buffer); they "
                             "count nowhere");
  }
  if (proc_.gpu_unreadable_buffers > 0) {
    proc_.warnings.push_back(std::to_string(proc_.gpu_unreadable_bytes) + " bytes of GPU records in " +
                             std::to_string(proc_.gpu_unreadable_buffers) +
                             " CUPTI buffers could not be read (cuptiActivityGetNextRecord failed with CUPTI "
                             "result " + std::to_string(unreadable_result_) + " mid-buffer); those records are lost");
  }
}

}  // namespace torchprof
