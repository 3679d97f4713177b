// The replay entry points of the fake (fake_cuda.h): API calls whose callback id, name
// and correlation id the caller gives, and GPU records with the caller's device, stream
// and times. kineto_replay drives them to play a recorded torch.profiler trace back
// through the paths a real CUDA call takes under CUPTI.
#include <memory>
#include <string>
#include <vector>

#include "fake_cuda.h"
#include "fake_cupti_internal.h"
#include "fake_cupti_records.h"

namespace fake_cupti {

namespace {

// One open API call: the callback data lives until EXIT, since the subscriber keeps
// what it needs in *correlationData between ENTER and EXIT.
struct OpenCall {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
  std::string name;
  uint32_t correlation = 0;
  uint64_t start = 0;
  uint64_t correlation_data[kMaxSubscribers] = {};  // one slot per subscriber
  int return_value = 0;  // cudaSuccess / CUDA_SUCCESS
  CUpti_CallbackData data{};
};

// Calls nest on their thread: runtime calls may make driver calls.
thread_local std::vector<std::unique_ptr<OpenCall>> t_open_calls;

// Ids the fake hands out later must not meet the caller's.
void reserve_correlation(uint32_t id) {
  std::atomic<uint32_t>& next = state().runtime.next_correlation;
  const uint32_t wanted = id == UINT32_MAX ? 1u : id + 1;
  uint32_t current = next.load();
  while (current <= id && !next.compare_exchange_weak(current, wanted)) {
  }
}

// Names handed out in records stay valid for the life of the process.
const char* intern_name(const char* name) {
  if (name == nullptr) return nullptr;
  RuntimeState& runtime = state().runtime;
  std::lock_guard<std::mutex> lock(runtime.mutex);
  return runtime.names.emplace(name).first->c_str();
}

template <typename Record>
void append(const Record& record) {
  emit_static_records_once();
  state().activity.append(&record, sizeof(record));
}

bool append_kernel_record(const FakeGpuRecord& r) {
  ActivityBuffers& activity = state().activity;
  const bool concurrent = activity.enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (!concurrent && !activity.enabled(CUPTI_ACTIVITY_KIND_KERNEL)) return false;
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
  kernel.registersPerThread = r.registers_per_thread;
  kernel.start = r.start;
  kernel.end = r.end;
  kernel.completed = r.end;
  kernel.deviceId = r.device;
  kernel.contextId = r.context;
  kernel.streamId = r.stream;
  kernel.gridX = r.grid[0];
  kernel.gridY = r.grid[1];
  kernel.gridZ = r.grid[2];
  kernel.blockX = r.block[0];
  kernel.blockY = r.block[1];
  kernel.blockZ = r.block[2];
  kernel.staticSharedMemory = r.static_shared_memory;
  kernel.dynamicSharedMemory = r.dynamic_shared_memory;
  kernel.sharedMemoryExecuted = static_cast<uint32_t>(r.static_shared_memory + r.dynamic_shared_memory);
  kernel.correlationId = r.correlation_id;
  {
    std::lock_guard<std::mutex> lock(state().runtime.mutex);
    kernel.gridId = state().runtime.next_grid_id++;
  }
  kernel.name = intern_name(r.name != nullptr ? r.name : "");
  // Kineto's traces keep no queue times ("queued": 0): CUPTI's "unknown".
  kernel.queued = CUPTI_TIMESTAMP_UNKNOWN;
  kernel.submitted = CUPTI_TIMESTAMP_UNKNOWN;
  kernel.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
  kernel.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
  kernel.clusterX = kernel.clusterY = kernel.clusterZ = 1;
  append(kernel);
  return true;
}

bool append_memcpy_record(const FakeGpuRecord& r) {
  if (!state().activity.enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) return false;
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = r.copy_kind;
  copy.srcKind = r.src_kind;
  copy.dstKind = r.dst_kind;
  copy.flags = r.flags;
  copy.bytes = r.bytes;
  copy.start = r.start;
  copy.end = r.end;
  copy.deviceId = r.device;
  copy.contextId = r.context;
  copy.streamId = r.stream;
  copy.correlationId = r.correlation_id;
  copy.channelType = CUPTI_CHANNEL_TYPE_ASYNC_MEMCPY;
  copy.copyCount = 1;
  append(copy);
  return true;
}

bool append_memset_record(const FakeGpuRecord& r) {
  if (!state().activity.enabled(CUPTI_ACTIVITY_KIND_MEMSET)) return false;
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.bytes = r.bytes;
  set.start = r.start;
  set.end = r.end;
  set.deviceId = r.device;
  set.contextId = r.context;
  set.streamId = r.stream;
  set.correlationId = r.correlation_id;
  set.flags = r.flags;
  set.memoryKind = r.dst_kind;
  set.channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
  append(set);
  return true;
}

bool append_sync_record(const FakeGpuRecord& r) {
  if (!state().activity.enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) return false;
  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = static_cast<CUpti_ActivitySynchronizationType>(r.sync_type);
  sync.start = r.start;
  sync.end = r.end;
  sync.correlationId = r.correlation_id;
  sync.contextId = r.context;
  sync.streamId = r.stream;
  sync.cudaEventId = r.cuda_event_id;
  sync.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  append(sync);
  return true;
}

}  // namespace

}  // namespace fake_cupti

namespace fc = fake_cupti;

extern "C" {

int fakecuda_api_enter(int domain, uint32_t cbid, const char* function_name, uint32_t correlation_id) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return 0;
  fakecuda_init();
  fc::reserve_correlation(correlation_id);
  auto call = std::make_unique<fc::OpenCall>();
  call->domain = static_cast<CUpti_CallbackDomain>(domain);
  call->cbid = cbid;
  call->name = function_name != nullptr ? function_name : "";
  call->correlation = correlation_id;
  CUpti_CallbackData& data = call->data;
  data.callbackSite = CUPTI_API_ENTER;
  data.functionName = call->name.c_str();
  data.functionReturnValue = &call->return_value;
  data.context = fc::fake_context();
  data.contextUid = kFakeContextId;
  data.correlationData = call->correlation_data;
  data.correlationId = correlation_id;
  fc::emit_external_correlations(correlation_id);
  fc::OpenCall* open = call.get();
  fc::t_open_calls.push_back(std::move(call));
  fc::state().callbacks.fire(open->domain, open->cbid, &open->data);
  open->start = fc::now_ns();
  return 1;
}

uint32_t fakecuda_api_exit(void) {
  if (fc::t_open_calls.empty()) return 0;
  std::unique_ptr<fc::OpenCall> call = std::move(fc::t_open_calls.back());
  fc::t_open_calls.pop_back();
  const uint64_t end = fc::now_ns();
  call->data.callbackSite = CUPTI_API_EXIT;
  fc::state().callbacks.fire(call->domain, call->cbid, &call->data);
  fc::append_api(call->domain == CUPTI_CB_DOMAIN_DRIVER_API, call->cbid, call->correlation, call->start, end);
  return call->correlation;
}

int fakecuda_queue_record(const FakeGpuRecord* record) {
  if (record == nullptr) return 0;
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return fc::append_kernel_record(*record) ? 1 : 0;
    case CUPTI_ACTIVITY_KIND_MEMCPY: return fc::append_memcpy_record(*record) ? 1 : 0;
    case CUPTI_ACTIVITY_KIND_MEMSET: return fc::append_memset_record(*record) ? 1 : 0;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return fc::append_sync_record(*record) ? 1 : 0;
    default: return 0;
  }
}

}  // extern "C"
