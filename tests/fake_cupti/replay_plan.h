// kineto_replay's reading of a torch.profiler (Kineto) trace: what each CPU thread
// does, in order, and the GPU records each API call hands to the fake CUPTI.
//
// Per thread (pid, tid of cpu_op, user_annotation, cuda_runtime, cuda_driver events; the
// threads of every pid in the trace become threads of the one replaying process),
// events are ordered by (ts, longer first, ranges before API calls, position in the
// file). An event nests inside the innermost open range whose interval holds its start
// (or that starts at the same time: zero-length ranges nest what the file lists inside
// them); API calls hold nothing. A child that ends after its parent keeps the parent
// open until it ends. Times are nanoseconds from the trace's first replayed event.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fake_cuda.h"

namespace kineto_replay {

// Input that cannot be read or replayed: the message is the one line to print.
struct ReplayError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class ActionKind : uint8_t { kPush, kPop, kApiEnter, kApiExit };

struct Action {
  ActionKind kind = ActionKind::kPush;
  int64_t at_ns = 0;   // never before the thread's previous action
  uint32_t index = 0;  // kPush: Plan::messages; kApiEnter: Plan::calls
};

struct ApiCall {
  int domain = 0;  // CUpti_CallbackDomain
  uint32_t cbid = 0;
  std::string name;
  uint32_t correlation = 0;
  std::vector<uint32_t> gpu;  // Plan::gpu indices, handed out inside the call
};

// One GPU record; start and end are offsets (ns) until the runner adds its base time.
struct GpuWork {
  FakeGpuRecord record{};
  std::string name;  // storage for record.name
};

struct ThreadPlan {
  std::string key;  // "pid/tid" as the trace writes them
  std::vector<Action> actions;
};

// A step marker's push or pop: the other threads' events keep their order against it
// (an event that starts in the step's interval in the trace runs inside it).
struct Fence {
  int64_t at_ns = 0;
  uint32_t owner = 0;   // thread
  uint32_t action = 0;  // that thread's action
  bool start = true;
};

struct Plan {
  std::vector<ThreadPlan> threads;  // threads[0] runs on the program's main thread
  std::vector<std::string> messages;
  std::vector<ApiCall> calls;
  std::vector<GpuWork> gpu;
  std::vector<uint32_t> unlaunched;  // GPU records whose launching call is not in the trace
  std::vector<Fence> fences;         // by time
  std::vector<std::pair<int64_t, int64_t>> cpu_busy;  // merged CPU intervals of all threads
  int64_t cpu_events = 0;
  int64_t span_ns = 0;  // first to last replayed event, GPU records included
  int64_t ignored = 0;  // X events of categories not replayed (Trace spans, python_function, …)
};

// Reads TRACE.json or TRACE.json.gz. Throws ReplayError naming the first event it
// cannot express (an unknown category, runtime or driver function, copy name).
Plan load_plan(const std::string& path, const std::string& step_marker_prefix);

// What each category becomes; exposed for --help.
const char* categories_help();

}  // namespace kineto_replay
