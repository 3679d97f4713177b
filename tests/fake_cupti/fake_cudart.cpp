// A drop-in libcudart.so.13 over the fake CUPTI: a program nvcc 13 built with
// `-cudart shared` runs against it through LD_LIBRARY_PATH=<build>/lib/fake_cuda,
// without a GPU. It exports what such programs call, with NVIDIA's symbol version
// (libcudart.so.13, fake_cudart.map):
//   registration  __cudaRegisterFatBinary(End), __cudaRegisterFunction,
//                 __cudaUnregisterFatBinary, __cudaInitModule, __cudaGetKernel
//   launches      __cudaPush/PopCallConfiguration, __cudaLaunchKernel(_ptsz) (nvcc 13's
//                 <<<>>>), cudaLaunchKernel(_ptsz), cudaLaunchKernelExC(_ptsz)
//   and streams, events, memcpy/memset, malloc/free, stream capture and graph launch.
// CUDA starts as the driver starts it: the first call that is not registration
// loads CUDA_INJECTION64_PATH and calls its InitializeInjection (fakecuda_init).
// Every call then goes through the fake CUPTI's callback and activity paths with
// its own callback id (CUDA 13's cupti_runtime_cbid.h). Kernel names are the
// mangled device names the registration gave, as CUPTI reports them.
//
// Nothing runs on a device: kernels do nothing, device memory is host memory (so
// copies and sets really copy and set), and times follow these rules:
//   kernel  10 us + 10 ns per launched thread (grid blocks x block threads):
//           <<<4, 256>>> lasts 10 us + 10240 ns = 20240 ns
//   memcpy  1 us + 1 ns per 10 bytes;  memset  1 us + 1 ns per 100 bytes
// Streams: the legacy default stream is stream 7, the per-thread default stream of
// the n-th thread using one is 1000 + n, created streams are 13, 14, ... Work on a
// stream runs in order; cudaStreamWaitEvent holds a stream until the event's time.
#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fake_cuda.h"

namespace {

constexpr uint32_t kLegacyStream = 7;
constexpr uint32_t kFirstStream = 13;
constexpr uint32_t kFirstPerThreadStream = 1000;

uint64_t kernel_ns(dim3 grid, dim3 block) {
  const uint64_t threads = uint64_t{grid.x} * grid.y * grid.z * block.x * block.y * block.z;
  return 10000 + 10 * threads;
}
uint64_t copy_ns(size_t bytes) { return 1000 + bytes / 10; }
uint64_t set_ns(size_t bytes) { return 1000 + bytes / 100; }

struct Node {
  std::string name;
  uint64_t duration_ns;
};
struct Graph {
  uint32_t id;
  std::vector<Node> nodes;
};
struct Stream {
  uint32_t id;
  Graph* capture = nullptr;  // capturing into this graph
};
struct Event {
  uint64_t done_raw = 0;  // raw GPU time at which the work before its record ends
  bool recorded = false;
  uint32_t id = 0;  // CUPTI's cudaEventId
};
std::atomic<uint32_t> g_next_event{1};
struct Allocation {
  uint64_t fake_address;
  size_t bytes;
};

struct Runtime {
  std::mutex mu;
  std::map<const void*, std::string> functions;  // host stub -> mangled device name
  std::map<void*, Allocation> allocations;
  uint32_t next_stream = kFirstStream;
  uint32_t next_graph = 1;
  std::atomic<uint32_t> per_thread_streams{0};
};
Runtime& rt() {
  static Runtime* runtime = new Runtime;  // outlives the program's static destructors
  return *runtime;
}

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared;
  cudaStream_t stream;
};
thread_local std::vector<LaunchConfig> t_configs;
thread_local cudaError_t t_last_error = cudaSuccess;
thread_local uint32_t t_per_thread_stream = 0;

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

uint32_t per_thread_stream() {
  if (t_per_thread_stream == 0) t_per_thread_stream = kFirstPerThreadStream + rt().per_thread_streams.fetch_add(1);
  return t_per_thread_stream;
}

// The stream a handle names, for a call of the legacy (ptsz = false) or per-thread form.
uint32_t stream_id(cudaStream_t s, bool ptsz) {
  if (s == nullptr) return ptsz ? per_thread_stream() : kLegacyStream;
  if (s == cudaStreamLegacy) return kLegacyStream;
  if (s == cudaStreamPerThread) return per_thread_stream();
  return reinterpret_cast<Stream*>(s)->id;
}
Stream* stream_object(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return nullptr;
  return reinterpret_cast<Stream*>(s);
}

void api(uint32_t cbid, const char* name) { fakecuda_api_call(0, cbid, name); }

std::string kernel_name(const void* func) {
  std::lock_guard<std::mutex> lock(rt().mu);
  auto found = rt().functions.find(func);
  return found != rt().functions.end() ? found->second : std::string("unregistered_kernel");
}

cudaError_t launch(uint32_t cbid, const char* api_name, const void* func, dim3 grid, dim3 block, size_t shared,
                   cudaStream_t s, bool ptsz) {
  const std::string name = kernel_name(func);
  const uint64_t duration = kernel_ns(grid, block);
  if (Stream* stream = stream_object(s); stream != nullptr && stream->capture != nullptr) {
    api(cbid, api_name);  // captured: the call is seen, the kernel runs at graph launch
    stream->capture->nodes.push_back(Node{name, duration});
    return cudaSuccess;
  }
  FakeKernelConfig config{};
  config.grid[0] = static_cast<int32_t>(grid.x);
  config.grid[1] = static_cast<int32_t>(grid.y);
  config.grid[2] = static_cast<int32_t>(grid.z);
  config.block[0] = static_cast<int32_t>(block.x);
  config.block[1] = static_cast<int32_t>(block.y);
  config.block[2] = static_cast<int32_t>(block.z);
  config.dynamic_shared_memory = static_cast<int32_t>(shared);
  config.registers_per_thread = 32;
  fakecuda_launch_kernel_as(cbid, api_name, name.c_str(), duration, stream_id(s, ptsz), &config);
  return cudaSuccess;
}

int copy_kind(cudaMemcpyKind kind) {
  switch (kind) {
    case cudaMemcpyHostToDevice: return 1;    // CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
    case cudaMemcpyDeviceToHost: return 2;    // DTOH
    case cudaMemcpyDeviceToDevice: return 8;  // DTOD
    case cudaMemcpyHostToHost: return 10;     // HTOH
    default: return 8;
  }
}

cudaError_t memcpy_call(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s, bool async,
                        bool ptsz, uint32_t cbid, const char* name) {
  if (bytes != 0 && (dst == nullptr || src == nullptr)) return fail(cudaErrorInvalidValue);
  if (bytes != 0) std::memmove(dst, src, bytes);
  fakecuda_memcpy_as(cbid, name, bytes, copy_kind(kind), stream_id(s, ptsz), copy_ns(bytes), async ? 0 : 1);
  return cudaSuccess;
}

cudaError_t memset_call(void* p, int value, size_t bytes, cudaStream_t s, bool ptsz, uint32_t cbid,
                        const char* name) {
  if (bytes != 0 && p == nullptr) return fail(cudaErrorInvalidValue);
  if (bytes != 0) std::memset(p, value, bytes);
  fakecuda_memset_as(cbid, name, bytes, stream_id(s, ptsz), set_ns(bytes));
  return cudaSuccess;
}

cudaError_t event_record(cudaEvent_t e, cudaStream_t s, bool ptsz, uint32_t cbid, const char* name) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  auto* event = reinterpret_cast<Event*>(e);
  (void)cbid;
  (void)name;
  fakecuda_event_record(event->id, stream_id(s, ptsz));
  const uint64_t end = fakecuda_stream_end(stream_id(s, ptsz));
  const uint64_t now = fakecuda_raw_now();
  event->done_raw = end > now ? end : now;
  event->recorded = true;
  return cudaSuccess;
}

cudaError_t stream_wait(cudaStream_t s, cudaEvent_t e, bool ptsz, uint32_t cbid, const char* name) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  (void)cbid;
  (void)name;
  fakecuda_stream_wait_event(stream_id(s, ptsz), reinterpret_cast<Event*>(e)->id);
  fakecuda_stream_wait_until(stream_id(s, ptsz), reinterpret_cast<Event*>(e)->done_raw);
  return cudaSuccess;
}

cudaError_t begin_capture(cudaStream_t s, uint32_t cbid, const char* name) {
  Stream* stream = stream_object(s);
  if (stream == nullptr) return fail(cudaErrorStreamCaptureUnsupported);
  api(cbid, name);
  std::lock_guard<std::mutex> lock(rt().mu);
  stream->capture = new Graph{rt().next_graph++, {}};
  return cudaSuccess;
}

cudaError_t end_capture(cudaStream_t s, cudaGraph_t* graph, uint32_t cbid, const char* name) {
  Stream* stream = stream_object(s);
  if (stream == nullptr || stream->capture == nullptr || graph == nullptr) return fail(cudaErrorIllegalState);
  api(cbid, name);
  *graph = reinterpret_cast<cudaGraph_t>(stream->capture);
  stream->capture = nullptr;
  return cudaSuccess;
}

cudaError_t graph_launch(cudaGraphExec_t exec, cudaStream_t s, bool ptsz) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  const auto* graph = reinterpret_cast<const Graph*>(exec);
  std::vector<const char*> names;
  std::vector<uint64_t> durations;
  for (const Node& node : graph->nodes) {
    names.push_back(node.name.c_str());
    durations.push_back(node.duration_ns);
  }
  fakecuda_graph_launch(graph->id, static_cast<uint32_t>(names.size()), names.data(), durations.data(),
                        stream_id(s, ptsz));
  return cudaSuccess;
}

cudaError_t launch_ex(const cudaLaunchConfig_t* config, const void* func, bool ptsz) {
  if (config == nullptr) return fail(cudaErrorInvalidValue);
  return launch(ptsz ? CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060
                     : CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                ptsz ? "cudaLaunchKernelExC_ptsz" : "cudaLaunchKernelExC", func, config->gridDim, config->blockDim,
                config->dynamicSmemBytes, config->stream, ptsz);
}

}  // namespace

#define FAKE_CUDART extern "C" __attribute__((visibility("default")))

// ---- registration: static constructors, before CUDA starts; no callbacks ----

FAKE_CUDART void** __cudaRegisterFatBinary(void* fat_cubin) {
  auto** handle = new void*[1];
  handle[0] = fat_cubin;
  return handle;
}
FAKE_CUDART void __cudaRegisterFatBinaryEnd(void**) {}
FAKE_CUDART void __cudaUnregisterFatBinary(void** handle) { delete[] handle; }
FAKE_CUDART char __cudaInitModule(void**) { return 1; }
FAKE_CUDART void __cudaRegisterFunction(void**, const char* host_function, char*, const char* device_name, int,
                                        uint3*, uint3*, dim3*, dim3*, int*) {
  std::lock_guard<std::mutex> lock(rt().mu);
  rt().functions[host_function] = device_name != nullptr ? device_name : "";
}
FAKE_CUDART void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
FAKE_CUDART void __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {}
// The kernel handle is the host stub itself: kernel_name() finds either.
FAKE_CUDART cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_function) {
  if (kernel == nullptr) return fail(cudaErrorInvalidValue);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(host_function));
  return cudaSuccess;
}

// ---- <<<>>> ----

FAKE_CUDART unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st* stream) {
  fakecuda_init();
  t_configs.push_back(LaunchConfig{grid, block, shared, stream});
  return 0;
}
FAKE_CUDART cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  if (t_configs.empty()) return fail(cudaErrorMissingConfiguration);
  const LaunchConfig c = t_configs.back();
  t_configs.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shared = c.shared;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}
FAKE_CUDART cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t shared,
                                           cudaStream_t stream) {
  return launch(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, "__cudaLaunchKernel", kernel, grid, block, shared,
                stream, false);
}
FAKE_CUDART cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t shared,
                                                cudaStream_t stream) {
  return launch(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, "__cudaLaunchKernel_ptsz", kernel, grid,
                block, shared, stream, true);
}

// ---- launches ----

FAKE_CUDART cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void**, size_t shared,
                                         cudaStream_t stream) {
  return launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel", func, grid, block, shared, stream,
                false);
}
FAKE_CUDART cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void**, size_t shared,
                                              cudaStream_t stream) {
  return launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel_ptsz", func, grid, block,
                shared, stream, true);
}
FAKE_CUDART cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void**) {
  return launch_ex(config, func, false);
}
FAKE_CUDART cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config, const void* func, void**) {
  return launch_ex(config, func, true);
}

// ---- device, errors ----

FAKE_CUDART cudaError_t cudaGetDeviceCount(int* count) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020, "cudaGetDeviceCount");
  *count = 1;
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaGetDevice(int* device) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice");
  *device = 0;
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaSetDevice(int device) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, "cudaSetDevice");
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}
FAKE_CUDART cudaError_t cudaGetLastError(void) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, "cudaGetLastError");
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
FAKE_CUDART cudaError_t cudaPeekAtLastError(void) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020, "cudaPeekAtLastError");
  return t_last_error;
}
FAKE_CUDART const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake CUDA error"; }
FAKE_CUDART const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorUnknown"; }
FAKE_CUDART cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaDriverGetVersion(int* version) {
  *version = 13000;
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaDeviceSynchronize(void) {
  fakecuda_synchronize(kFakeAllStreams);
  return cudaSuccess;
}

// ---- memory ----

FAKE_CUDART cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  void* memory = std::calloc(1, bytes != 0 ? bytes : 1);
  if (memory == nullptr) return fail(cudaErrorMemoryAllocation);
  const uint64_t address = fakecuda_malloc(bytes);
  std::lock_guard<std::mutex> lock(rt().mu);
  rt().allocations[memory] = Allocation{address, bytes};
  *p = memory;
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaFree(void* p) {
  uint64_t address = 0;
  {
    std::lock_guard<std::mutex> lock(rt().mu);
    auto found = rt().allocations.find(p);
    if (found != rt().allocations.end()) {
      address = found->second.fake_address;
      rt().allocations.erase(found);
    }
  }
  fakecuda_free(address);  // cudaFree(0), CUDA's start, included
  std::free(p);
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaMallocHost(void** p, size_t bytes) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, "cudaMallocHost");
  *p = std::calloc(1, bytes != 0 ? bytes : 1);
  return *p != nullptr ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
FAKE_CUDART cudaError_t cudaFreeHost(void* p) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020, "cudaFreeHost");
  std::free(p);
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return memcpy_call(dst, src, bytes, kind, nullptr, false, false, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
                     "cudaMemcpy");
}
FAKE_CUDART cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return memcpy_call(dst, src, bytes, kind, nullptr, false, true, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
                     "cudaMemcpy_ptds");
}
FAKE_CUDART cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                        cudaStream_t s) {
  return memcpy_call(dst, src, bytes, kind, s, true, false, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                     "cudaMemcpyAsync");
}
FAKE_CUDART cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                             cudaStream_t s) {
  return memcpy_call(dst, src, bytes, kind, s, true, true, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
                     "cudaMemcpyAsync_ptsz");
}
FAKE_CUDART cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  return memset_call(p, value, bytes, nullptr, false, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, "cudaMemset");
}
FAKE_CUDART cudaError_t cudaMemset_ptds(void* p, int value, size_t bytes) {
  return memset_call(p, value, bytes, nullptr, true, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000, "cudaMemset_ptds");
}
FAKE_CUDART cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  return memset_call(p, value, bytes, s, false, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync");
}
FAKE_CUDART cudaError_t cudaMemsetAsync_ptsz(void* p, int value, size_t bytes, cudaStream_t s) {
  return memset_call(p, value, bytes, s, true, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
                     "cudaMemsetAsync_ptsz");
}

// ---- streams ----

FAKE_CUDART cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000, "cudaStreamCreateWithFlags");
  std::lock_guard<std::mutex> lock(rt().mu);
  *s = reinterpret_cast<cudaStream_t>(new Stream{rt().next_stream++});
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaStreamCreate(cudaStream_t* s) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreate_v3020, "cudaStreamCreate");
  std::lock_guard<std::mutex> lock(rt().mu);
  *s = reinterpret_cast<cudaStream_t>(new Stream{rt().next_stream++});
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaStreamDestroy(cudaStream_t s) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050, "cudaStreamDestroy");
  delete stream_object(s);
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  fakecuda_synchronize(stream_id(s, false));
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) {
  fakecuda_synchronize(stream_id(s, true));
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaStreamQuery(cudaStream_t s) {
  const uint32_t id = stream_id(s, false);
  return fakecuda_query(0, id, fakecuda_stream_end(id)) != 0 ? cudaSuccess : cudaErrorNotReady;
}
FAKE_CUDART cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  return stream_wait(s, e, false, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, "cudaStreamWaitEvent");
}
FAKE_CUDART cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int) {
  return stream_wait(s, e, true, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000, "cudaStreamWaitEvent_ptsz");
}

// ---- events ----

FAKE_CUDART cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020, "cudaEventCreate");
  *e = reinterpret_cast<cudaEvent_t>(new Event{0, false, g_next_event.fetch_add(1)});
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020, "cudaEventCreateWithFlags");
  *e = reinterpret_cast<cudaEvent_t>(new Event{0, false, g_next_event.fetch_add(1)});
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaEventDestroy(cudaEvent_t e) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020, "cudaEventDestroy");
  delete reinterpret_cast<Event*>(e);
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  return event_record(e, s, false, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, "cudaEventRecord");
}
FAKE_CUDART cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) {
  return event_record(e, s, true, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000, "cudaEventRecord_ptsz");
}
FAKE_CUDART cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, "cudaEventSynchronize");
  fakecuda_wait_until(reinterpret_cast<Event*>(e)->done_raw);
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  const auto* event = reinterpret_cast<Event*>(e);
  return fakecuda_query(event->id, 0, event->done_raw) != 0 ? cudaSuccess : cudaErrorNotReady;
}
FAKE_CUDART cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return fail(cudaErrorInvalidValue);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v12080, "cudaEventElapsedTime");
  const auto* a = reinterpret_cast<Event*>(start);
  const auto* b = reinterpret_cast<Event*>(end);
  if (!a->recorded || !b->recorded) return fail(cudaErrorInvalidResourceHandle);
  *ms = static_cast<float>(static_cast<double>(b->done_raw - a->done_raw) / 1e6);
  return cudaSuccess;
}

// ---- capture and graphs ----

FAKE_CUDART cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  return begin_capture(s, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, "cudaStreamBeginCapture");
}
FAKE_CUDART cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, cudaStreamCaptureMode) {
  return begin_capture(s, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000, "cudaStreamBeginCapture_ptsz");
}
FAKE_CUDART cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  return end_capture(s, graph, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, "cudaStreamEndCapture");
}
FAKE_CUDART cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t* graph) {
  return end_capture(s, graph, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000, "cudaStreamEndCapture_ptsz");
}
FAKE_CUDART cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  api(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, "cudaGraphInstantiate");
  *exec = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) { return graph_launch(exec, s, false); }
FAKE_CUDART cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t exec, cudaStream_t s) {
  return graph_launch(exec, s, true);
}
FAKE_CUDART cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecDestroy_v10000, "cudaGraphExecDestroy");
  delete reinterpret_cast<Graph*>(exec);
  return cudaSuccess;
}
FAKE_CUDART cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  api(CUPTI_RUNTIME_TRACE_CBID_cudaGraphDestroy_v10000, "cudaGraphDestroy");
  delete reinterpret_cast<Graph*>(graph);
  return cudaSuccess;
}
