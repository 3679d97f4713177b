// The workload language of gpu_workload: a tiny script of NVTX ranges and fake
// CUDA calls, its interpreter, and the exact expectations it implies.
//
//   script := item (';' item)*            whitespace around items is ignored
//   range:NAME{script}                    NVTX push NAME … pop (NAME may contain ':')
//   thread{script}                        runs script on a new thread, then joins it
//   repeat:N{script}                      runs script N times (large captures from a short line)
//   kernel:NAME:DUR[:stream=S]            cudaLaunchKernel (default stream 7)
//   dkernel:NAME:DUR[:stream=S]           cuLaunchKernel (driver API, like Triton)
//   memcpy:htod|dtoh|dtod:BYTES:DUR[:stream=S][:sync]   cudaMemcpyAsync, or cudaMemcpy with :sync
//   memset:BYTES:DUR[:stream=S]           cudaMemsetAsync
//   malloc:TAG:BYTES / free:TAG           cudaMalloc / cudaFree, TAG names the allocation
//   sync / sync:S                         cudaDeviceSynchronize / cudaStreamSynchronize(S)
//   graph:ID:NAME@DUR,NAME@DUR…[:stream=S]  cudaGraphLaunch of kernels run in order
//   dropped:N                             the fake CUPTI reports N more dropped records
//   busy:DUR                              CPU spin (gives a range self CPU time)
//   profiler_stop / device_reset          cudaProfilerStop / cudaDeviceReset
//   profiler_start                        cudaProfilerStart
//   p2p:BYTES:DUR[:stream=S]              cudaMemcpyPeerAsync from device 0 to device 1 (MEMCPY2)
//   api:NAME                              any other API call (cudaGetDevice, cuCtxGetCurrent): no GPU
//                                         work, and not in the expectations (a profiler may leave it out)
//   skip_ids:N                            CUPTI's correlation counter moves on by N (mod 2^32)
//   cupti_flush / cupti_flush:forced      the program itself calls cuptiActivityFlushAll(0 / FORCED)
//   unreadable                            a record cuptiActivityGetNextRecord cannot step over
//   client_start / client_start:direct    a second CUPTI client starts, as torch.profiler's Kineto does
//                                         (subscribe, buffer callbacks, a TSC-like timestamp callback,
//                                         kinds enabled); :direct calls CUPTI through the library's
//                                         handle instead of the process's symbols
//   client_stop                           it flushes (forced), checks the kernels and copies it got
//                                         against those launched meanwhile, and disables its kinds
//   kineto_start:COMMIT[:teardown][:sync]  a torch.profiler session by Kineto's own CUPTI calls at that
//                                         kineto commit (kineto_client.h: b7b1fbe6, dfce61c9), with
//                                         TEARDOWN_CUPTI=1 / sync events; the first item of a script:
//                                         before CUDA starts, as profile() around model.cuda()
//   kineto_stop                           its stop and processing; exit 1 when it got other records
//                                         than were launched, or any call returned what CUPTI would not
//   sleep:DUR                             sleeps (no CPU use)
//   ready                                 prints "ready pid=<pid>" on stdout
// DUR is an integer with ns, us, ms or s; BYTES a plain integer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <cupti.h>

#include "fake_cuda.h"

namespace fake_workload {

// The fakecuda_* entry points, resolved with dlsym by gpu_workload or taken
// directly by tests linked against the fake.
struct FakeCudaApi {
  int (*init)() = nullptr;
  uint32_t (*launch_kernel)(const char*, uint64_t, uint32_t, const FakeKernelConfig*) = nullptr;
  uint32_t (*driver_launch_kernel)(const char*, uint64_t, uint32_t, const FakeKernelConfig*) = nullptr;
  uint32_t (*memcpy)(uint64_t, int, uint32_t, uint64_t, int) = nullptr;
  uint32_t (*memset)(uint64_t, uint32_t, uint64_t) = nullptr;
  uint64_t (*malloc)(uint64_t) = nullptr;
  int (*free)(uint64_t) = nullptr;
  uint32_t (*synchronize)(int64_t) = nullptr;
  uint32_t (*graph_launch)(uint32_t, uint32_t, const char* const*, const uint64_t*, uint32_t) = nullptr;
  uint32_t (*profiler_stop)() = nullptr;
  uint32_t (*profiler_start)() = nullptr;
  uint32_t (*device_reset)() = nullptr;
  void (*set_dropped)(uint64_t) = nullptr;
  uint32_t (*memcpy_peer)(uint64_t, uint32_t, uint32_t, uint32_t, uint64_t) = nullptr;
  uint32_t (*api_call_named)(const char*) = nullptr;
  void (*skip_correlation_ids)(uint32_t) = nullptr;
  void (*unreadable_record)() = nullptr;
};

// The CUPTI functions a program calls itself (cupti_flush, the second client):
// `linked` as the process resolves them (through any interposer, as a library
// linked against libcupti binds them), `direct` from the library's own handle.
struct CuptiCalls {
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*register_timestamp_callback)(CUpti_TimestampCallbackFunc) = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_all)(uint32_t) = nullptr;
  CUptiResult (*get_next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
};

struct CuptiApi {
  CuptiCalls linked;
  CuptiCalls direct;
};

struct RangeHooks {
  std::function<void(const std::string&)> push;
  std::function<void()> pop;
};

enum class Op {
  kRange, kThread, kRepeat, kKernel, kDriverKernel, kMemcpy, kMemset, kMalloc, kFree,
  kSync, kGraph, kDropped, kBusy, kProfilerStop, kDeviceReset, kProfilerStart,
  kPeerCopy, kApi, kSkipIds, kCuptiFlush, kUnreadable, kClientStart, kClientStop, kSleep, kReady,
  kKinetoStart, kKinetoStop
};

struct GraphNode {
  std::string name;
  uint64_t duration_ns = 0;
};

struct Item {
  Op op = Op::kBusy;
  std::string name;  // range name, kernel name, allocation tag
  uint64_t duration_ns = 0;
  uint64_t bytes = 0;  // also the count of dropped:N and of repeat:N
  int memcpy_kind = 0;  // CUpti_ActivityMemcpyKind
  uint32_t stream = 7;
  int64_t sync_stream = kFakeAllStreams;
  bool blocking = false;  // memcpy :sync; cupti_flush:forced; client_start:direct; kineto_start:teardown
  bool sync_events = false;  // kineto_start:sync
  uint32_t graph_id = 0;
  std::vector<GraphNode> nodes;
  std::vector<Item> body;
};

class Script {
 public:
  // Throws std::invalid_argument with the offending text.
  static Script parse(std::string_view text);

  // Returns false when the second client (client_start … client_stop) got records
  // that differ from the work launched meanwhile; the reasons went to stderr.
  bool run(const FakeCudaApi& api, const RangeHooks& hooks, const CuptiApi& cupti = CuptiApi{}) const;
  // Exact values the fake's records imply (see workload_scenarios.cpp for the format).
  nlohmann::json expectations() const;

  const std::string& text() const { return text_; }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::string text_;
  std::vector<Item> items_;
};

// The named scenarios; nullptr for an unknown name.
const char* scenario_script(std::string_view name);
std::vector<std::string> scenario_names();

}  // namespace fake_workload
