// Where the engine (analysis/engine.h) hands each completed event of a traced cycle, as
// it goes: formats/kineto_trace.h writes them as Kineto traces, one file per (process,
// cycle), without the run ever being held in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

// What a trace needs of an event beside the event: its cycle and the ids Kineto links by.
struct EventIds {
  int cycle = 0;
  uint32_t external_id = 0;   // ranges and marks: their own, from 1 in each (process, cycle)
  uint32_t enclosing_id = 0;  // API calls: the External id of the innermost range around them, 0 none;
                              // nn.Module calls: the id of the module call around them, 0 none
};

// What a trace needs of the API call that launched a GPU record.
struct LaunchIds {
  bool known = false;         // the call was recorded
  bool first = false;         // the first GPU record of the call in the trace: its flow starts here
  uint32_t tid = 0;           // its thread and start, where Kineto's flow (ac2g) starts
  int64_t start_ns = 0;
  uint32_t enclosing_id = 0;  // the External id of the innermost range around the call
};

class ProcessTraceSink {
 public:
  virtual ~ProcessTraceSink() = default;
  // A range (once it ended), a mark or a CUDA API call (once it returned) of a recorded
  // step, or, without a schedule, of none (then in the first cycle).
  virtual void event(const Event& e, const EventIds& ids) = 0;
  // A GPU record of a recorded step (kernel, memcpy, memset, sync); `device`: the
  // properties of its device, when they were read before it.
  virtual void gpu(const GpuEvent& g, int cycle, const LaunchIds& launch, const GpuDevice* device) = 0;
  // The process's pass is done: `proc` holds its threads, steps, devices and memory events
  // (with their running totals). The sink writes what is left and closes its files.
  virtual void finish(const Run& run, const Process& proc) = 0;
  // The pass over the process starts again (it learnt that it needs its steps first):
  // everything written so far is thrown away.
  virtual void discard() = 0;
};

// Makes the sink of a process. `proc` holds its identity (pid, worker, rank, exe); `steps`
// its steps when they are known before the pass. Without them the process is one step
// whose span the pass learns as it goes, and `base_ns` is a time before any of its events
// that the trace's times can be given from. With them, a `base_ns` other than 0 is the
// process's first time: events outside every step count (Process::outside_steps_counted)
// and the first cycle's trace begins there.
using TraceSinkFactory = std::function<std::unique_ptr<ProcessTraceSink>(
    const Process& proc, const std::vector<Step>& steps, int64_t base_ns)>;

}  // namespace torchprof
