// Analysis of a decoded run: nesting and self time per thread, steps, the
// schedule's action and cycle per step, and the per-name aggregates (ops) over
// the recorded steps of every process, as key_averages() computes them.
#pragma once

#include <optional>
#include <string>

#include "collector/capture_range.h"
#include "collector/model.h"
#include "collector/schedule.h"

namespace torchprof {

struct AnalysisOptions {
  std::optional<Schedule> schedule;            // nullopt: every step recorded, one cycle
  std::string step_marker = "^ProfilerStep#";  // ECMAScript regex on range and mark names
  CaptureRange capture_range;                  // what is outside its windows is dropped first
  bool group_by_input_shape = false;           // cpu_op rows keyed by (name, input shapes) too
};

// Fills Event::parent/self_ns/step, Process::steps and Run::ops. Throws InputError
// when the step-marker regex is invalid.
void analyse(Run& run, const AnalysisOptions& options);

// Orders events by (tid, start, longer first), the order Process::events_list keeps.
void sort_events(std::vector<Event>& events);

// Pieces of analyse(), exposed for tests.
void compute_nesting(Process& proc);
void compute_steps(Process& proc, const AnalysisOptions& options);
void aggregate_ops(Run& run, bool group_by_input_shape = false);

// Number of saved cycles (trace files) of a process after compute_steps().
int cycle_count(const Process& proc);

const char* step_action_name(StepAction action);  // none|warmup|record|record_and_save

}  // namespace torchprof
