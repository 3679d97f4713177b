// The fakecuda_* control API: a CUDA runtime/driver stand-in whose calls go
// through the same callback and activity paths a real CUDA call takes under CUPTI.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fake_cuda.h"
#include "fake_cupti_internal.h"
#include "fake_cupti_records.h"

namespace fake_cupti {

namespace {

constexpr uint64_t kAllocationGranularity = 512;

// CUPTI numbers every API call, runtime and driver alike, from one 32-bit counter
// that wraps; 0 is never an id.
uint32_t next_correlation_id() {
  uint32_t id = state().runtime.next_correlation.fetch_add(1);
  while (id == 0) id = state().runtime.next_correlation.fetch_add(1);
  return id;
}

// One CUDA API call: ENTER callback at construction, EXIT callback and the
// API activity record at destruction.
class ApiCall {
 public:
  ApiCall(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char* name, const char* symbol = nullptr)
      : domain_(domain), cbid_(cbid), correlation_(next_correlation_id()) {
    data_.callbackSite = CUPTI_API_ENTER;
    data_.functionName = name;
    data_.functionParams = nullptr;
    data_.functionReturnValue = &return_value_;
    data_.symbolName = symbol;
    data_.context = fake_context();
    data_.contextUid = kFakeContextId;
    data_.correlationData = correlation_data_;
    data_.correlationId = correlation_;
    emit_external_correlations(correlation_);
    state().callbacks.fire(domain_, cbid_, &data_);
    start_ = now_ns();
  }
  ~ApiCall() {
    const uint64_t end = now_ns();
    data_.callbackSite = CUPTI_API_EXIT;
    state().callbacks.fire(domain_, cbid_, &data_);
    append_api(domain_ == CUPTI_CB_DOMAIN_DRIVER_API, cbid_, correlation_, start_, end);
  }
  ApiCall(const ApiCall&) = delete;
  ApiCall& operator=(const ApiCall&) = delete;

  uint32_t correlation() const { return correlation_; }
  uint64_t start() const { return start_; }

 private:
  CUpti_CallbackDomain domain_;
  CUpti_CallbackId cbid_;
  uint32_t correlation_;
  uint64_t start_ = 0;
  uint64_t correlation_data_[kMaxSubscribers] = {};  // one slot per subscriber
  int return_value_ = 0;  // cudaSuccess / CUDA_SUCCESS
  CUpti_CallbackData data_{};
};

// The driver calls a runtime call makes on its way (cudaLaunchKernel → cuLaunchKernel):
// each has its callbacks and a correlation id of its own, so the runtime calls' ids
// are sparse; GPU records carry the runtime call's id.
void driver_internals(CUpti_CallbackId cbid, const char* name) { ApiCall inner(CUPTI_CB_DOMAIN_DRIVER_API, cbid, name); }

// GPU timelines run on the raw GPU clock; records get the callback's clock at delivery.
GpuSpan place_on_stream(uint32_t stream, uint64_t duration_ns) {
  RuntimeState& runtime = state().runtime;
  GpuSpan span;
  span.queued = raw_now_ns();
  std::lock_guard<std::mutex> lock(runtime.mutex);
  uint64_t& stream_end = runtime.stream_end[stream];
  span.start = std::max<uint64_t>(span.queued + kFakeLaunchLatencyNs, stream_end);
  span.end = span.start + duration_ns;
  stream_end = span.end;
  return span;
}

uint64_t timeline_end(int64_t stream) {
  RuntimeState& runtime = state().runtime;
  std::lock_guard<std::mutex> lock(runtime.mutex);
  if (stream != kFakeAllStreams) {
    auto found = runtime.stream_end.find(static_cast<uint32_t>(stream));
    return found == runtime.stream_end.end() ? 0 : found->second;
  }
  uint64_t end = 0;
  for (const auto& [id, stream_end] : runtime.stream_end) end = std::max(end, stream_end);
  return end;
}

// Synchronisation spins so that CPU-side ranges around it last exactly until
// the GPU timeline says the work is done.
void wait_until(uint64_t target) {
  while (raw_now_ns() < target) std::this_thread::yield();
}

const char* intern(const char* name) {
  if (name == nullptr) return nullptr;
  RuntimeState& runtime = state().runtime;
  std::lock_guard<std::mutex> lock(runtime.mutex);
  if (runtime.torn_down) return "";
  return runtime.names.emplace(name).first->c_str();
}

// The CUDA runtime's exit handler: contexts go, and with them the kernel names
// CUPTI's records point to. Whoever converts records after this reads empty names.
void tear_down_cuda() {
  RuntimeState& runtime = state().runtime;
  std::lock_guard<std::mutex> lock(runtime.mutex);
  runtime.torn_down = true;
  // The set is never searched again (intern() checks torn_down first), so its keys may be wiped in place.
  for (const std::string& name : runtime.names) std::memset(const_cast<char*>(name.data()), 0, name.size());
}

FakeKernelConfig config_or_default(const FakeKernelConfig* config) {
  if (config != nullptr) return *config;
  FakeKernelConfig defaults{};
  defaults.grid[0] = defaults.grid[1] = defaults.grid[2] = 1;
  defaults.block[0] = 128;
  defaults.block[1] = defaults.block[2] = 1;
  defaults.registers_per_thread = 32;
  return defaults;
}

uint32_t launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char* api_name, const char* name,
                uint64_t duration_ns, uint32_t stream, const FakeKernelConfig* config) {
  fakecuda_init();
  const char* interned = intern(name);
  ApiCall call(domain, cbid, api_name, interned);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    driver_internals(CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent");
    driver_internals(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel");
  }
  KernelLaunch kernel;
  kernel.name = interned;
  kernel.stream = stream;
  kernel.correlation_id = call.correlation();
  kernel.config = config_or_default(config);
  kernel.span = place_on_stream(stream, duration_ns);
  append_kernel(kernel);
  return call.correlation();
}

using InitializeInjectionFn = int (*)();

InitializeInjectionFn find_injection() {
  // The driver loads CUDA_INJECTION64_PATH itself and calls that library's entry point
  // only: another tool's path that does not load means no injection at all. Unset, a
  // test's preloaded tool is found globally.
  if (const char* path = std::getenv("CUDA_INJECTION64_PATH"); path != nullptr && path[0] != '\0') {
    if (void* handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL)) {
      if (void* symbol = dlsym(handle, "InitializeInjection")) return reinterpret_cast<InitializeInjectionFn>(symbol);
    }
    return nullptr;
  }
  return reinterpret_cast<InitializeInjectionFn>(dlsym(RTLD_DEFAULT, "InitializeInjection"));
}

}  // namespace

}  // namespace fake_cupti

namespace fc = fake_cupti;

extern "C" {

int fakecuda_init(void) {
  if (fc::state().runtime.initialized.exchange(true)) return 0;
  // The runtime registers its exit handler when it starts, before the driver's
  // cuInit loads the injection: a tool's atexit handler runs before it.
  std::atexit(fc::tear_down_cuda);
  int called = 0;
  {
    // CUDA starts inside the program's first call (cudaFree(0), the usual idiom) and
    // its cuInit: both are in flight when the tool enables callbacks, so the tool
    // sees their EXIT callbacks without the ENTER ones.
    fc::ApiCall first(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, "cudaFree");
    fc::ApiCall driver_init(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuInit, "cuInit");
    if (fc::InitializeInjectionFn initialize = fc::find_injection()) {
      initialize();
      called = 1;
    }
  }
  CUpti_ResourceData resource{};
  resource.context = fc::fake_context();
  fc::state().callbacks.fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &resource);
  return called;
}

uint32_t fakecuda_launch_kernel(const char* mangled_name, uint64_t duration_ns, uint32_t stream,
                                const FakeKernelConfig* config) {
  return fc::launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel",
                    mangled_name, duration_ns, stream, config);
}

uint32_t fakecuda_launch_kernel_as(uint32_t cbid, const char* api_name, const char* mangled_name,
                                   uint64_t duration_ns, uint32_t stream, const FakeKernelConfig* config) {
  return fc::launch(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, api_name, mangled_name, duration_ns, stream, config);
}

uint32_t fakecuda_driver_launch_kernel(const char* mangled_name, uint64_t duration_ns, uint32_t stream,
                                       const FakeKernelConfig* config) {
  return fc::launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel",
                    mangled_name, duration_ns, stream, config);
}

uint32_t fakecuda_memcpy(uint64_t bytes, int kind, uint32_t stream, uint64_t duration_ns, int blocking) {
  const bool async = blocking == 0;
  return fakecuda_memcpy_as(async ? CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 : CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
                            async ? "cudaMemcpyAsync" : "cudaMemcpy", bytes, kind, stream, duration_ns, blocking);
}

uint32_t fakecuda_memcpy_as(uint32_t cbid, const char* api_name, uint64_t bytes, int kind, uint32_t stream,
                            uint64_t duration_ns, int blocking) {
  fakecuda_init();
  const bool async = blocking == 0;
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, api_name);
  fc::driver_internals(async ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync : CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
                       async ? "cuMemcpyAsync" : "cuMemcpy");
  const fc::GpuSpan span = fc::place_on_stream(stream, duration_ns);
  fc::append_memcpy(bytes, kind, stream, call.correlation(), async, span);
  if (!async) fc::wait_until(span.end);
  return call.correlation();
}

uint32_t fakecuda_memset(uint64_t bytes, uint32_t stream, uint64_t duration_ns) {
  return fakecuda_memset_as(CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync", bytes, stream,
                            duration_ns);
}

uint32_t fakecuda_memset_as(uint32_t cbid, const char* api_name, uint64_t bytes, uint32_t stream,
                            uint64_t duration_ns) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, api_name);
  fc::driver_internals(CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, "cuMemsetD8Async");
  fc::append_memset(bytes, stream, call.correlation(), fc::place_on_stream(stream, duration_ns));
  return call.correlation();
}

uint64_t fakecuda_malloc(uint64_t bytes) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc");
  fc::driver_internals(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2");
  uint64_t address = 0;
  {
    fc::RuntimeState& runtime = fc::state().runtime;
    std::lock_guard<std::mutex> lock(runtime.mutex);
    address = runtime.next_address;
    const uint64_t rounded = (bytes + fc::kAllocationGranularity - 1) / fc::kAllocationGranularity;
    runtime.next_address += std::max<uint64_t>(rounded, 1) * fc::kAllocationGranularity;
    runtime.live_allocations[address] = bytes;
  }
  fc::append_memory(address, bytes, /*allocation=*/true, call.correlation(), fc::now_ns());
  return address;
}

int fakecuda_free(uint64_t address) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, "cudaFree");
  fc::driver_internals(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2");
  uint64_t bytes = 0;
  {
    fc::RuntimeState& runtime = fc::state().runtime;
    std::lock_guard<std::mutex> lock(runtime.mutex);
    auto found = runtime.live_allocations.find(address);
    if (found == runtime.live_allocations.end()) return 0;
    bytes = found->second;
    runtime.live_allocations.erase(found);
  }
  fc::append_memory(address, bytes, /*allocation=*/false, call.correlation(), fc::now_ns());
  return 1;
}

uint32_t fakecuda_synchronize(int64_t stream) {
  fakecuda_init();
  const bool whole_device = stream == kFakeAllStreams;
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API,
                   whole_device ? CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020
                                : CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
                   whole_device ? "cudaDeviceSynchronize" : "cudaStreamSynchronize");
  fc::driver_internals(whole_device ? CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize : CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
                       whole_device ? "cuCtxSynchronize" : "cuStreamSynchronize");
  fc::wait_until(fc::timeline_end(stream));
  const uint32_t stream_id = whole_device ? 0u : static_cast<uint32_t>(stream);
  fc::append_synchronization(whole_device, stream_id, call.correlation(), call.start(), fc::now_ns());
  CUpti_SynchronizeData sync{};
  sync.context = fc::fake_context();
  sync.stream = whole_device ? nullptr : reinterpret_cast<CUstream>(static_cast<uintptr_t>(stream_id));
  fc::state().callbacks.fire(CUPTI_CB_DOMAIN_SYNCHRONIZE,
                             whole_device ? CUPTI_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED
                                          : CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED,
                             &sync);
  return call.correlation();
}

uint32_t fakecuda_event_record(uint32_t event, uint32_t stream) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, "cudaEventRecord");
  fc::driver_internals(CUPTI_DRIVER_TRACE_CBID_cuEventRecord, "cuEventRecord");
  fc::append_cuda_event(event, stream, call.correlation());
  return call.correlation();
}

uint32_t fakecuda_stream_wait_event(uint32_t stream, uint32_t event) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
                   "cudaStreamWaitEvent");
  fc::driver_internals(CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, "cuStreamWaitEvent");
  fc::append_stream_wait(stream, event, call.correlation(), call.start(), fc::now_ns());
  return call.correlation();
}

int fakecuda_query(uint32_t event, uint32_t stream, uint64_t done_raw) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API,
                   event != 0 ? CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020 : CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020,
                   event != 0 ? "cudaEventQuery" : "cudaStreamQuery");
  fc::driver_internals(event != 0 ? CUPTI_DRIVER_TRACE_CBID_cuEventQuery : CUPTI_DRIVER_TRACE_CBID_cuStreamQuery,
                       event != 0 ? "cuEventQuery" : "cuStreamQuery");
  const bool done = fc::raw_now_ns() >= done_raw;
  fc::append_query(event != 0, stream, event, call.correlation(), call.start(), fc::now_ns(), done ? 0u : 600u);
  return done ? 1 : 0;
}

uint32_t fakecuda_graph_launch(uint32_t graph_id, uint32_t n, const char* const* mangled_names,
                               const uint64_t* durations_ns, uint32_t stream) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch");
  fc::driver_internals(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch");
  for (uint32_t i = 0; i < n; ++i) {
    fc::KernelLaunch kernel;
    kernel.name = fc::intern(mangled_names[i]);
    kernel.stream = stream;
    kernel.correlation_id = call.correlation();
    kernel.graph_id = graph_id;
    kernel.graph_node_id = (static_cast<uint64_t>(graph_id) << 32) | (i + 1);
    kernel.config = fc::config_or_default(nullptr);
    kernel.span = fc::place_on_stream(stream, durations_ns[i]);
    fc::append_kernel(kernel);
  }
  return call.correlation();
}

uint32_t fakecuda_profiler_stop(void) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, "cudaProfilerStop");
  return call.correlation();
}

uint32_t fakecuda_profiler_start(void) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, "cudaProfilerStart");
  return call.correlation();
}

uint32_t fakecuda_device_reset(void) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, "cudaDeviceReset");
  CUpti_ResourceData resource{};
  resource.context = fc::fake_context();
  fc::state().callbacks.fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &resource);
  fc::RuntimeState& runtime = fc::state().runtime;
  std::lock_guard<std::mutex> lock(runtime.mutex);
  runtime.stream_end.clear();
  runtime.live_allocations.clear();
  return call.correlation();
}

uint32_t fakecuda_memcpy_peer(uint64_t bytes, uint32_t src_device, uint32_t dst_device, uint32_t stream,
                              uint64_t duration_ns) {
  fakecuda_init();
  fc::ApiCall call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
                   "cudaMemcpyPeerAsync");
  fc::driver_internals(CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, "cuMemcpyPeerAsync");
  fc::append_peer_copy(bytes, src_device, dst_device, stream, call.correlation(),
                       fc::place_on_stream(stream, duration_ns));
  return call.correlation();
}

uint32_t fakecuda_api_call(int driver, uint32_t cbid, const char* name) {
  fakecuda_init();
  fc::ApiCall call(driver != 0 ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, name);
  return call.correlation();
}

uint32_t fakecuda_api_call_named(const char* name) {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
  if (name == nullptr || !fc::find_callback_by_name(name, &domain, &cbid)) return 0;
  return fakecuda_api_call(domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0, cbid, name);
}

void fakecuda_skip_correlation_ids(uint32_t n) { fc::state().runtime.next_correlation.fetch_add(n); }

void fakecuda_unreadable_record(void) { fc::append_unreadable_record(); }

void fakecuda_set_dropped(uint64_t n) { fc::state().activity.add_dropped(n); }

uint64_t fakecuda_now(void) { return fc::now_ns(); }

uint64_t fakecuda_stream_end(uint32_t stream) { return fc::timeline_end(stream); }

uint64_t fakecuda_raw_now(void) { return fc::raw_now_ns(); }

void fakecuda_wait_until(uint64_t raw_ns) { fc::wait_until(raw_ns); }

void fakecuda_stream_wait_until(uint32_t stream, uint64_t raw_ns) {
  fc::RuntimeState& runtime = fc::state().runtime;
  std::lock_guard<std::mutex> lock(runtime.mutex);
  uint64_t& stream_end = runtime.stream_end[stream];
  stream_end = std::max(stream_end, raw_ns);
}

void fakecuda_wait_idle(void) { fc::wait_until(fc::timeline_end(kFakeAllStreams)); }

}  // extern "C"
