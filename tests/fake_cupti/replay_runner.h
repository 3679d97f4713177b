// Plays a Plan back: one thread per trace thread, NVTX ranges for its ranges, the fake
// CUPTI's API callbacks for its calls, the GPU records inside the calls that launched
// them, each at the replay's base time plus its offset in the trace.
#pragma once

#include <cstdint>

#include "fake_cuda.h"
#include "replay_plan.h"

namespace kineto_replay {

// The fake's replay entry points, resolved with dlsym.
struct FakeApi {
  int (*init)() = nullptr;
  uint64_t (*now)() = nullptr;
  int (*api_enter)(int, uint32_t, const char*, uint32_t) = nullptr;
  uint32_t (*api_exit)() = nullptr;
  int (*queue_record)(const FakeGpuRecord*) = nullptr;
};

// Loads the fake libcupti (TORCHPROF_CUPTI_LIB, else `default_path`). Throws ReplayError.
FakeApi load_fake_api(const char* default_path);

struct RunOptions {
  double time_scale = 1.0;  // CPU waits are multiplied by this; GPU times never are
  int64_t max_gap_ns = 100'000'000;  // a gap with no CPU event on any thread is cut to this
  // The GPU timeline starts this much after the CPU's (their offsets within each stay
  // the trace's): room for CPU actions that run late, where GPU records whose launching
  // call the trace lacks find their step by their start.
  int64_t gpu_lag_ns = 0;
};

struct RunStats {
  int64_t cpu_span_ns = 0;   // the replay's CPU timeline, as planned
  int64_t wall_ns = 0;       // as it ran
  int64_t late_max_ns = 0;   // the latest any action ran after its planned time
  int64_t late_actions = 0;  // actions more than 1 ms late
  int64_t fence_timeouts = 0;
  int64_t records = 0;          // GPU records written
  int64_t records_refused = 0;  // GPU records whose kind the subscriber had not enabled
};

RunStats run_plan(const Plan& plan, const FakeApi& api, const RunOptions& options);

}  // namespace kineto_replay
