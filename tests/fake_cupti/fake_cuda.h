// Control API of libfake_cupti: stands in for the CUDA runtime/driver so that a
// program on a machine without a GPU "launches" work which the fake CUPTI then
// reports exactly as the real one would (API callbacks + activity records).
//
// Every call that models a CUDA API call does, in order: runtime (or driver) API
// callback ENTER with a fresh correlation id, the ENTER/EXIT callbacks of the driver
// calls a runtime call makes inside (each with an id of its own, so runtime ids are
// sparse), queue the GPU record(s) carrying the call's correlation id on the
// per-stream GPU timeline, callback EXIT, then the CUpti_ActivityAPI record when
// RUNTIME (or DRIVER) activity is enabled. Ids are 32-bit and wrap (0 is skipped).
// GPU records keep raw GPU times until delivered (see ActivityBuffers).
// GPU timeline: start = max(now + kFakeLaunchLatencyNs, end of previous work on
// the stream), end = start + duration, on the raw GPU clock (CLOCK_REALTIME, Unix-epoch ns as CUPTI's own
// [+ FAKE_CUPTI_CLOCK_OFFSET_NS]); records get the registered timestamp callback's
// clock when their buffer is delivered, CPU-side times (API calls, allocations,
// syncs) when they are taken.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKECUDA_EXPORT __attribute__((visibility("default")))

// Delay between an API call and the earliest GPU start of the work it launches.
#define kFakeLaunchLatencyNs 5000ull
// The one fake device and its one context.
#define kFakeDeviceId 0u
#define kFakeContextId 1u
// Stream id used by fakecuda_synchronize for a whole-device synchronisation.
#define kFakeAllStreams (-1)

typedef struct FakeKernelConfig {
  int32_t grid[3];
  int32_t block[3];
  int32_t static_shared_memory;
  int32_t dynamic_shared_memory;
  uint16_t registers_per_thread;
} FakeKernelConfig;

// Acts as the driver's cuInit: the first call loads CUDA_INJECTION64_PATH (if set)
// and calls its InitializeInjection, else one found with dlsym(RTLD_DEFAULT). It does
// so inside a cudaFree and a nested cuInit call, as real programs start CUDA: a tool
// sees the EXIT callbacks of those two without their ENTER. It also registers the
// runtime's exit handler first (atexit), which wipes kernel names as CUDA's teardown
// frees them. Then fires the resource CONTEXT_CREATED callback. Returns 1 if
// InitializeInjection was called by this call, 0 otherwise.
FAKECUDA_EXPORT int fakecuda_init(void);

// cudaLaunchKernel (runtime domain). config may be NULL: grid 1x1x1, block 128x1x1,
// 32 registers, no shared memory. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_launch_kernel(const char* mangled_name, uint64_t duration_ns,
                                                uint32_t stream, const FakeKernelConfig* config);
// A runtime launch made by the runtime function of callback id `cbid` named `api_name`
// (__cudaLaunchKernel for nvcc 13's <<<>>>, cudaLaunchKernelExC, the _ptsz forms...),
// otherwise as fakecuda_launch_kernel. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_launch_kernel_as(uint32_t cbid, const char* api_name, const char* mangled_name,
                                                   uint64_t duration_ns, uint32_t stream,
                                                   const FakeKernelConfig* config);
// cuLaunchKernel (driver domain, as Triton launches). Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_driver_launch_kernel(const char* mangled_name, uint64_t duration_ns,
                                                       uint32_t stream, const FakeKernelConfig* config);
// cudaMemcpyAsync, or cudaMemcpy when blocking != 0 (then the call returns only after
// the copy's GPU end). kind is a CUpti_ActivityMemcpyKind (HTOD=1, DTOH=2, DTOD=8):
// host side is pageable memory. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_memcpy(uint64_t bytes, int kind, uint32_t stream, uint64_t duration_ns,
                                         int blocking);
// The copy made by the runtime function of callback id `cbid` named `api_name`
// (cudaMemcpy_ptds, ...), otherwise as fakecuda_memcpy.
FAKECUDA_EXPORT uint32_t fakecuda_memcpy_as(uint32_t cbid, const char* api_name, uint64_t bytes, int kind,
                                            uint32_t stream, uint64_t duration_ns, int blocking);
// cudaMemsetAsync on device memory. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_memset(uint64_t bytes, uint32_t stream, uint64_t duration_ns);
// The set made by the runtime function of callback id `cbid` named `api_name` (cudaMemset,
// cudaMemset_ptds, cudaMemsetAsync_ptsz), otherwise as fakecuda_memset.
FAKECUDA_EXPORT uint32_t fakecuda_memset_as(uint32_t cbid, const char* api_name, uint64_t bytes, uint32_t stream,
                                            uint64_t duration_ns);
// cudaMalloc: returns a fake device address (512-byte aligned, never reused) and
// emits a MEMORY2 ALLOCATION record of exactly `bytes`.
FAKECUDA_EXPORT uint64_t fakecuda_malloc(uint64_t bytes);
// cudaFree: emits a MEMORY2 RELEASE record with the allocation's bytes.
// Returns 1, or 0 (and no record) for an address that is not live.
FAKECUDA_EXPORT int fakecuda_free(uint64_t address);
// cudaStreamSynchronize(stream), or cudaDeviceSynchronize for kFakeAllStreams:
// busy-waits until the GPU timeline end has passed, then emits the
// SYNCHRONIZATION record and the synchronize-domain callback. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_synchronize(int64_t stream);
// cudaEventRecord of CUPTI event id `event` on `stream`: callbacks, API record and a
// CUDA_EVENT activity record. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_event_record(uint32_t event, uint32_t stream);
// cudaStreamWaitEvent(stream, event): callbacks, API record and a STREAM_WAIT_EVENT
// synchronisation record naming the waiting stream and the event. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_stream_wait_event(uint32_t stream, uint32_t event);
// cudaEventQuery (event != 0: the event's id) or cudaStreamQuery(stream) asking whether
// the GPU reached `done_raw` (raw clock): callbacks, API record and the synchronisation
// record CUDA 13's CUPTI writes for every query, with returnValue 0 when done, else
// CUDA_ERROR_NOT_READY (600). Returns 1 when done.
FAKECUDA_EXPORT int fakecuda_query(uint32_t event, uint32_t stream, uint64_t done_raw);
// cudaGraphLaunch of a graph of n kernels run one after the other on `stream`.
// Each kernel record has graphId = graph_id, graphNodeId = (graph_id << 32) | (index + 1)
// and the correlation id of the cudaGraphLaunch call; no per-kernel API callback.
FAKECUDA_EXPORT uint32_t fakecuda_graph_launch(uint32_t graph_id, uint32_t n, const char* const* mangled_names,
                                               const uint64_t* durations_ns, uint32_t stream);
// cudaProfilerStop: callbacks only (flushing is the subscriber's business).
FAKECUDA_EXPORT uint32_t fakecuda_profiler_stop(void);
// cudaProfilerStart: callbacks only.
FAKECUDA_EXPORT uint32_t fakecuda_profiler_start(void);
// cudaDeviceReset: resource CONTEXT_DESTROY_STARTING callback inside the API call,
// then GPU timelines and live allocations are forgotten.
FAKECUDA_EXPORT uint32_t fakecuda_device_reset(void);
// Adds n to the count the next cuptiActivityGetNumDroppedRecords reports (which
// also includes records the fake really dropped for lack of a buffer); reading
// the count resets it to 0, as in CUPTI.
FAKECUDA_EXPORT void fakecuda_set_dropped(uint64_t n);
// cudaMemcpyPeerAsync from src_device to dst_device: a MEMCPY2 record (copy kind PTOP).
FAKECUDA_EXPORT uint32_t fakecuda_memcpy_peer(uint64_t bytes, uint32_t src_device, uint32_t dst_device,
                                              uint32_t stream, uint64_t duration_ns);
// Any other API call (cudaGetDevice, cuCtxGetCurrent…): callbacks and API record
// only. Returns the correlation id.
FAKECUDA_EXPORT uint32_t fakecuda_api_call(int driver, uint32_t cbid, const char* name);
// fakecuda_api_call for the runtime or driver function of that name (version tag
// optional); 0 and no call for a name the headers do not define.
FAKECUDA_EXPORT uint32_t fakecuda_api_call_named(const char* name);
// Moves CUPTI's correlation counter on by n (mod 2^32), as n API calls that nobody
// saw would: long runs wrap the 32-bit ids.
FAKECUDA_EXPORT void fakecuda_skip_correlation_ids(uint32_t n);
// Writes a record cuptiActivityGetNextRecord cannot step over: what follows it in
// its buffer cannot be read.
FAKECUDA_EXPORT void fakecuda_unreadable_record(void);
// The fake's clock: what records and cuptiGetTimestamp use.
FAKECUDA_EXPORT uint64_t fakecuda_now(void);
// End of the last GPU work queued on `stream` (0 if none), on the raw GPU clock.
FAKECUDA_EXPORT uint64_t fakecuda_stream_end(uint32_t stream);
// The GPU's raw clock, the one fakecuda_stream_end answers on.
FAKECUDA_EXPORT uint64_t fakecuda_raw_now(void);
// Spins until the raw GPU clock reaches `raw_ns` (no API call).
FAKECUDA_EXPORT void fakecuda_wait_until(uint64_t raw_ns);
// Work queued on `stream` from now on starts no earlier than `raw_ns` (cudaStreamWaitEvent).
FAKECUDA_EXPORT void fakecuda_stream_wait_until(uint32_t stream, uint64_t raw_ns);
// Returns once all GPU work queued so far has ended, without any API call (for
// tests that then flush and expect complete records).
FAKECUDA_EXPORT void fakecuda_wait_idle(void);

// ---- Replaying recorded work (kineto_replay) ----
// The calls above make up their own correlation ids and GPU times; these take both
// from the caller, so that a recorded trace plays back through the same callback and
// activity paths (fake_replay.cpp).

// Fires the ENTER callback of an API call in `domain` (a CUpti_CallbackDomain: driver
// 1 or runtime 2) with this callback id, function name and correlation id, and leaves
// the call open on this thread. Correlation ids the calls above hand out afterwards are
// larger than `correlation_id`. Returns 1, or 0 (and fires nothing) for another domain.
FAKECUDA_EXPORT int fakecuda_api_enter(int domain, uint32_t cbid, const char* function_name,
                                       uint32_t correlation_id);
// Fires the EXIT callback of the innermost call this thread has open, then writes its
// CUpti_ActivityAPI record when that kind is enabled. Returns its correlation id, 0 when
// the thread has no call open.
FAKECUDA_EXPORT uint32_t fakecuda_api_exit(void);

typedef struct FakeGpuRecord {
  uint32_t kind;  // CUpti_ActivityKind: CONCURRENT_KERNEL (or KERNEL), MEMCPY, MEMSET, SYNCHRONIZATION
  uint32_t device;
  uint32_t context;
  uint32_t stream;  // sync: CUPTI_SYNCHRONIZATION_INVALID_VALUE for a context synchronisation
  uint64_t start;   // on the fake's clock (fakecuda_now), ns
  uint64_t end;
  uint32_t correlation_id;
  const char* name;  // kernels: the name as CUPTI hands it out (copied)
  int32_t grid[3];
  int32_t block[3];
  uint16_t registers_per_thread;
  int32_t static_shared_memory;
  int32_t dynamic_shared_memory;
  uint8_t copy_kind;  // memcpy: CUpti_ActivityMemcpyKind
  uint8_t src_kind;   // memcpy: CUpti_ActivityMemoryKind of the source
  uint8_t dst_kind;   // memcpy: of the destination; memset: the memory kind set
  uint8_t flags;      // memcpy/memset: CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC / _MEMSET_ASYNC
  uint64_t bytes;     // memcpy/memset
  uint32_t sync_type;      // sync: CUpti_ActivitySynchronizationType
  uint32_t cuda_event_id;  // sync: CUPTI_SYNCHRONIZATION_INVALID_VALUE when no event
} FakeGpuRecord;

// Writes one GPU record as CUPTI does once the work has run: a kernel as the kind the
// subscriber enabled (CONCURRENT_KERNEL, else KERNEL), a MEMCPY, MEMSET or
// SYNCHRONIZATION record. Returns 1 when written; 0 when its kind is not enabled (CUPTI
// then writes nothing) or is none of these.
FAKECUDA_EXPORT int fakecuda_queue_record(const FakeGpuRecord* record);

#ifdef __cplusplus
}
#endif
