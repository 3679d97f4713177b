// The analysis's options, and the steps: which ranges and marks are step markers, the
// steps they make, the schedule's action and cycle of each, and which step an event
// belongs to. The pass that applies them is analysis/engine.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/capture_range.h"
#include "analysis/model.h"
#include "analysis/schedule.h"

namespace torchprof {

struct AnalysisOptions {
  std::optional<Schedule> schedule;            // nullopt: every step recorded, one cycle
  std::string step_marker = "^ProfilerStep#";  // ECMAScript regex on range and mark names
  CaptureRange capture_range;                  // what is outside its windows is dropped first
  bool group_by_input_shape = false;           // cpu_op rows keyed by (name, input shapes) too
  size_t group_by_stack_n = kOpStackFrames;    // cpu_op rows keyed by their first N frames too (0: not)
};

// The row a PyTorch op event counts in (kind cpu_op, its shapes when grouped by them,
// its first Python frames): op_row_key() of it and the row's name identify the row.
OpStats op_row(const OpInfo& op, bool group_by_input_shape, size_t group_by_stack_n = kOpStackFrames);

// Number of saved cycles (trace files) of a process after compute_steps().
int cycle_count(const Process& proc);

const char* step_action_name(StepAction action);  // none|warmup|record|record_and_save

// torch renames ProfilerStep#N to ProfilerStep* before grouping its rows; so does analyse().
constexpr std::string_view kStepNamePrefix = "ProfilerStep#";
constexpr std::string_view kStepRowName = "ProfilerStep*";

inline bool recorded(StepAction a) { return a == StepAction::kRecord || a == StepAction::kRecordAndSave; }

// A step marker as the engine found it: a range or mark whose name matches.
struct MarkerEvent {
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // == start_ns for marks
  uint32_t tid = 0;
  bool mark = false;
  bool start_end = false;  // a start/end range: its end is a time of its own, not a pop's
  std::string name;
};

// Step ranges of one thread never overlap, as torch.profiler's (each ends before the next
// begins): a start/end step range that ends inside a later step range of its thread (the
// Python bootstrap's steps, each turned to our clock on its own, can end a fraction of a
// microsecond after the next began) ends where that one begins. Ranges that nest stay
// as they are. `markers` in start order; their ends are moved in place.
void untangle_step_ranges(std::vector<MarkerEvent>& markers);

// The steps a process's step markers make (in start order), with the schedule's action
// and cycle of each. Without markers, a process that recorded anything is one step over
// [start_ns, end_ns]. A mark's step lasts until the next marker (or end_ns).
std::vector<Step> steps_of_markers(const std::vector<MarkerEvent>& markers, int64_t start_ns, int64_t end_ns,
                                   bool recorded_anything, const std::optional<Schedule>& schedule);

// The step-marker option: an ECMAScript regex searched for in range and mark names. A
// pattern that is `^` and plain text (the default, "^ProfilerStep#") is tested as the
// prefix it is, without running the regex: a run may have a step name per step.
class StepMarker {
 public:
  // Throws InputError when `pattern` is not a regex.
  explicit StepMarker(const std::string& pattern);
  bool matches(const std::string& name) const;

 private:
  std::regex regex_;
  std::optional<std::string> prefix_;
};

// Which step an event starting at t belongs to: the one whose interval holds t, the
// later one on ties; -1 none. `cursor` carries the search from one call to the next of
// a sequence of mostly increasing times (one per thread); `restart` begins a sequence.
class StepLocator {
 public:
  explicit StepLocator(const std::vector<Step>& steps);
  int32_t step_of(int64_t t, std::ptrdiff_t& cursor, bool restart) const;
  // Takes in steps appended to the vector since the last call (or construction), each
  // starting no earlier than those before it; cursors stay valid.
  void extend();

 private:
  const std::vector<Step>& steps_;
  std::vector<int64_t> furthest_end_;  // [k]: latest end among steps 0..k
};


}  // namespace torchprof
