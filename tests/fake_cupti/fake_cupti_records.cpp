#include "fake_cupti_records.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "fake_cupti_internal.h"

namespace fake_cupti {

namespace {

ActivityBuffers& activity() { return state().activity; }

// A record in the reported CUPTI's layout for its kind (record_size): the first bytes
// of this header's struct, with `newer` (offset, value) pairs written past its end for
// the fields later releases appended, and the fields a release before the one that
// introduced them kept as padding (`older_padding`: offset and size) left zero.
struct Appended {
  size_t offset;
  uint64_t value;
  size_t size;
};

template <typename Record>
void append_in_layout(const Record& record, uint64_t gpu_end, std::initializer_list<Appended> newer = {},
                      std::initializer_list<std::pair<size_t, size_t>> older_padding = {}) {
  uint8_t bytes[256] = {};
  static_assert(sizeof(Record) <= sizeof(bytes));
  const size_t size = record_size(record.kind);
  std::memcpy(bytes, &record, std::min(size, sizeof(Record)));
  for (const Appended& field : newer) {
    if (field.offset + field.size <= size) std::memcpy(bytes + field.offset, &field.value, field.size);
  }
  for (const auto& [offset, length] : older_padding) std::memset(bytes + offset, 0, length);
  activity().append(bytes, size, gpu_end);
}

// Records of other kinds must not be the first ones a subscriber sees: the
// device and context records come first, as CUPTI writes them at enable time.
// `gpu_end`: the raw GPU end of a record of GPU work, whose times are converted
// (or zeroed) only when its buffer is delivered; 0 for CPU-side records.
template <typename Record>
void append_record(const Record& record, uint64_t gpu_end = 0) {
  emit_static_records_once();
  append_in_layout(record, gpu_end);
}

void append_device() {
  CUpti_ActivityDevice5 device{};
  device.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  device.flags = CUPTI_ACTIVITY_FLAG_NONE;
  device.globalMemoryBandwidth = 4800000000ull;  // kB/s
  device.globalMemorySize = 150754820096ull;     // 140.4 GiB
  device.constantMemorySize = 65536;
  device.l2CacheSize = 52428800;
  device.numThreadsPerWarp = 32;
  device.coreClockRate = 1980000;  // kHz
  device.numMemcpyEngines = 3;
  device.numMultiprocessors = 132;
  device.maxIPC = 4;
  device.maxWarpsPerMultiprocessor = 64;
  device.maxBlocksPerMultiprocessor = 32;
  device.maxSharedMemoryPerMultiprocessor = 233472;
  device.maxRegistersPerMultiprocessor = 65536;
  device.maxRegistersPerBlock = 65536;
  device.maxSharedMemoryPerBlock = 49152;
  device.maxThreadsPerBlock = 1024;
  device.maxBlockDimX = 1024;
  device.maxBlockDimY = 1024;
  device.maxBlockDimZ = 64;
  device.maxGridDimX = 2147483647u;
  device.maxGridDimY = 65535;
  device.maxGridDimZ = 65535;
  device.computeCapabilityMajor = 9;
  device.computeCapabilityMinor = 0;
  device.id = kFakeDeviceId;
  device.eccEnabled = 1;
  for (int i = 0; i < 16; ++i) device.uuid.bytes[i] = static_cast<char>(0xf0 + i);
  device.name = "Fake H200";
  device.isCudaVisible = 1;
  device.isMigEnabled = 0;
  device.gpuInstanceId = 0xffffffffu;
  device.computeInstanceId = 0xffffffffu;
  device.isNumaNode = 0;
  device.numaId = 0xffffffffu;
  append_in_layout(device, 0, {{offsetof(CUpti_ActivityDevice5, numaId) + 4, 66, 4}});  // Device6's numTpcs
}

void append_context() {
  CUpti_ActivityContext3 context{};
  context.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  context.contextId = kFakeContextId;
  context.deviceId = kFakeDeviceId;
  context.computeApiKind = CUPTI_ACTIVITY_COMPUTE_API_CUDA;
  context.nullStreamId = 7;
  context.parentContextId = 0;
  context.isGreenContext = 0;
  context.numMultiprocessors = 132;
  context.cigMode = CUPTI_CONTEXT_CIG_MODE_NONE;
  // Context4's processId; before 12.5 numMultiprocessors was padding.
  append_in_layout(context, 0, {{sizeof(CUpti_ActivityContext3), current_process_id(), 8}},
                   state().version < kCupti125 ? std::initializer_list<std::pair<size_t, size_t>>{
                                                     {offsetof(CUpti_ActivityContext3, numMultiprocessors), 2}}
                                               : std::initializer_list<std::pair<size_t, size_t>>{});
}

}  // namespace

void emit_static_records_once() {
  RuntimeState& runtime = state().runtime;
  {
    std::lock_guard<std::mutex> lock(runtime.mutex);
    if (runtime.static_records_done) return;
    const bool wanted = activity().enabled(CUPTI_ACTIVITY_KIND_DEVICE) || activity().enabled(CUPTI_ACTIVITY_KIND_CONTEXT);
    if (!wanted) return;
    runtime.static_records_done = true;
  }
  if (activity().enabled(CUPTI_ACTIVITY_KIND_DEVICE)) append_device();
  if (activity().enabled(CUPTI_ACTIVITY_KIND_CONTEXT)) append_context();
}

void append_kernel(const KernelLaunch& launch) {
  const bool concurrent = activity().enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (!concurrent && !activity().enabled(CUPTI_ACTIVITY_KIND_KERNEL)) return;
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
  kernel.cacheConfig.config.requested = 0;
  kernel.cacheConfig.config.executed = 0;
  kernel.registersPerThread = launch.config.registers_per_thread;
  kernel.start = launch.span.start;
  kernel.end = launch.span.end;
  kernel.completed = launch.span.end;
  kernel.deviceId = kFakeDeviceId;
  kernel.contextId = kFakeContextId;
  kernel.streamId = launch.stream;
  kernel.gridX = launch.config.grid[0];
  kernel.gridY = launch.config.grid[1];
  kernel.gridZ = launch.config.grid[2];
  kernel.blockX = launch.config.block[0];
  kernel.blockY = launch.config.block[1];
  kernel.blockZ = launch.config.block[2];
  kernel.staticSharedMemory = launch.config.static_shared_memory;
  kernel.dynamicSharedMemory = launch.config.dynamic_shared_memory;
  kernel.correlationId = launch.correlation_id;
  {
    std::lock_guard<std::mutex> lock(state().runtime.mutex);
    kernel.gridId = state().runtime.next_grid_id++;
  }
  kernel.name = launch.name;
  kernel.queued = launch.span.queued;
  kernel.submitted = launch.span.queued + 1000;
  kernel.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
  kernel.sharedMemoryExecuted = static_cast<uint32_t>(launch.config.static_shared_memory +
                                                      launch.config.dynamic_shared_memory);
  kernel.graphNodeId = launch.graph_node_id;
  kernel.graphId = launch.graph_id;
  kernel.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
  kernel.clusterX = 1;
  kernel.clusterY = 1;
  kernel.clusterZ = 1;
  kernel.isDeviceLaunched = 0;
  emit_static_records_once();
  // Kernel11's priority (the stream's: 0 for every stream here), Kernel12's executionModel (SIMT).
  append_in_layout(kernel, launch.span.end,
                   {{sizeof(CUpti_ActivityKernel10), 0, 4}, {sizeof(CUpti_ActivityKernel10) + 8, 1, 4}});
}

void append_memcpy(uint64_t bytes, int kind, uint32_t stream, uint32_t correlation_id, bool async,
                   const GpuSpan& span) {
  if (!activity().enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = static_cast<uint8_t>(kind);
  const bool host_source = kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  const bool host_destination = kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  copy.srcKind = host_source ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.dstKind = host_destination ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE : CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.flags = async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
  copy.bytes = bytes;
  copy.start = span.start;
  copy.end = span.end;
  copy.deviceId = kFakeDeviceId;
  copy.contextId = kFakeContextId;
  copy.streamId = stream;
  copy.correlationId = correlation_id;
  copy.runtimeCorrelationId = 0;
  copy.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
  copy.copyCount = 1;
  emit_static_records_once();
  append_in_layout(copy, span.end, {}, {{offsetof(CUpti_ActivityMemcpy6, isDeviceLaunched), 1}});
}

void append_memset(uint64_t bytes, uint32_t stream, uint32_t correlation_id, const GpuSpan& span) {
  if (!activity().enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return;
  CUpti_ActivityMemset4 memset_record{};
  memset_record.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  memset_record.value = 0;
  memset_record.bytes = bytes;
  memset_record.start = span.start;
  memset_record.end = span.end;
  memset_record.deviceId = kFakeDeviceId;
  memset_record.contextId = kFakeContextId;
  memset_record.streamId = stream;
  memset_record.correlationId = correlation_id;
  memset_record.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
  memset_record.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  memset_record.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
  append_record(memset_record, span.end);
}

void append_memory(uint64_t address, uint64_t bytes, bool allocation, uint32_t correlation_id, uint64_t timestamp) {
  if (!activity().enabled(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
  CUpti_ActivityMemory4 memory{};
  memory.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  memory.memoryOperationType =
      allocation ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  memory.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  memory.correlationId = correlation_id;
  memory.address = address;
  memory.bytes = bytes;
  memory.timestamp = timestamp;
  memory.processId = current_process_id();
  memory.deviceId = kFakeDeviceId;
  memory.contextId = kFakeContextId;
  memory.streamId = 7;
  memory.name = nullptr;
  memory.isAsync = 0;
  memory.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
  memory.source = nullptr;
  append_record(memory);
}

namespace {

// One synchronization record as CUDA 13's CUPTI writes it; `stream` and `event` are
// CUPTI_SYNCHRONIZATION_INVALID_VALUE where the record names none.
void append_sync_record(CUpti_ActivitySynchronizationType type, uint32_t stream, uint32_t event,
                        uint32_t correlation_id, uint64_t start, uint64_t end, uint32_t return_value) {
  if (!activity().enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) return;
  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = type;
  sync.start = start;
  sync.end = end;
  sync.correlationId = correlation_id;
  sync.contextId = kFakeContextId;
  sync.streamId = stream;
  sync.cudaEventId = event;
  sync.cudaEventSyncId = event;
  sync.returnValue = return_value;
  append_record(sync);
}

}  // namespace

void append_synchronization(bool whole_device, uint32_t stream, uint32_t correlation_id, uint64_t start,
                            uint64_t end) {
  append_sync_record(whole_device ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE
                                  : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
                     whole_device ? CUPTI_SYNCHRONIZATION_INVALID_VALUE : stream, CUPTI_SYNCHRONIZATION_INVALID_VALUE,
                     correlation_id, start, end, 0);
}

void append_cuda_event(uint32_t event_id, uint32_t stream, uint32_t correlation_id) {
  if (!activity().enabled(CUPTI_ACTIVITY_KIND_CUDA_EVENT)) return;
  CUpti_ActivityCudaEvent2 event{};
  event.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  event.correlationId = correlation_id;
  event.contextId = kFakeContextId;
  event.streamId = stream;
  event.eventId = event_id;
  event.deviceId = kFakeDeviceId;
  event.cudaEventSyncId = event_id;
  append_record(event);
}

void append_stream_wait(uint32_t stream, uint32_t event_id, uint32_t correlation_id, uint64_t start, uint64_t end) {
  append_sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, stream, event_id, correlation_id, start, end,
                     0);
}

// A query that found the work unfinished gets a record only while all sync records are
// on (cuptiActivityEnableAllSyncRecords, on by default); before 12.8 the records had no
// returnValue, and CUPTI wrote none for such queries.
void append_query(bool event, uint32_t stream, uint32_t event_id, uint32_t correlation_id, uint64_t start,
                  uint64_t end, uint32_t return_value) {
  if (return_value != 0 && (state().version < kCupti128 || !state().all_sync_records.load())) return;
  append_sync_record(event ? CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE
                           : CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
                     event ? CUPTI_SYNCHRONIZATION_INVALID_VALUE : stream,
                     event ? event_id : CUPTI_SYNCHRONIZATION_INVALID_VALUE, correlation_id, start, end, return_value);
}

void append_api(bool driver, CUpti_CallbackId cbid, uint32_t correlation_id, uint64_t start, uint64_t end) {
  const CUpti_ActivityKind kind = driver ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
  if (!activity().enabled(kind)) return;
  if (cbid < kApiFilterSize && state().api_off[driver ? 1 : 0][cbid].load(std::memory_order_relaxed)) return;
  CUpti_ActivityAPI api{};
  api.kind = kind;
  api.cbid = cbid;
  api.start = start;
  api.end = end;
  api.processId = current_process_id();
  api.threadId = current_thread_id();
  api.correlationId = correlation_id;
  api.returnValue = 0;
  append_record(api);
}

void append_peer_copy(uint64_t bytes, uint32_t src_device, uint32_t dst_device, uint32_t stream,
                      uint32_t correlation_id, const GpuSpan& span) {
  if (!activity().enabled(CUPTI_ACTIVITY_KIND_MEMCPY2)) return;
  CUpti_ActivityMemcpyPtoP4 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  copy.bytes = bytes;
  copy.start = span.start;
  copy.end = span.end;
  copy.deviceId = src_device;
  copy.contextId = kFakeContextId;
  copy.streamId = stream;
  copy.srcDeviceId = src_device;
  copy.srcContextId = kFakeContextId;
  copy.dstDeviceId = dst_device;
  copy.dstContextId = kFakeContextId + dst_device;
  copy.correlationId = correlation_id;
  copy.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
  append_record(copy, span.end);
}

void append_unreadable_record() {
  uint8_t bytes[64] = {};
  const uint32_t kind = kUnreadableKind;
  std::memcpy(bytes, &kind, sizeof kind);
  emit_static_records_once();
  activity().append(bytes, sizeof bytes);
}

}  // namespace fake_cupti
