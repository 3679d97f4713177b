#include "analysis/analysis.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <regex>
#include <unordered_map>
#include <utility>

#include "common/errors.h"

namespace torchprof {

namespace {

std::vector<Step> make_steps(const std::vector<MarkerEvent>& markers, int64_t start_ns, int64_t end_ns,
                             bool recorded_anything) {
  std::vector<Step> steps;
  if (markers.empty()) {
    if (!recorded_anything) return steps;
    Step& s = steps.emplace_back();
    s.start_ns = start_ns;
    s.dur_ns = end_ns - start_ns;
    return steps;
  }
  for (size_t k = 0; k < markers.size(); ++k) {
    const MarkerEvent& m = markers[k];
    Step& s = steps.emplace_back();
    s.index = static_cast<int>(k);
    s.name = m.name;
    s.marker = true;
    s.marker_tid = m.tid;
    s.marker_is_mark = m.mark;
    s.start_ns = m.start_ns;
    if (!m.mark) {
      s.dur_ns = m.end_ns - m.start_ns;
    } else {
      // A mark-only marker opens a step that lasts until the next marker.
      const int64_t end = k + 1 < markers.size() ? markers[k + 1].start_ns : end_ns;
      s.dur_ns = std::max<int64_t>(0, end - m.start_ns);
    }
  }
  return steps;
}

void assign_actions(std::vector<Step>& steps, const std::optional<Schedule>& schedule) {
  int cycle = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    Step& s = steps[k];
    if (schedule) {
      s.action = schedule_action(*schedule, s.index);
    } else {
      s.action = k + 1 == steps.size() ? StepAction::kRecordAndSave : StepAction::kRecord;
    }
    s.cycle = -1;
    if (s.action == StepAction::kRecord || s.action == StepAction::kRecordAndSave) {
      s.cycle = cycle;
      if (s.action == StepAction::kRecordAndSave) ++cycle;
    }
  }
}

}  // namespace

StepLocator::StepLocator(const std::vector<Step>& steps) : steps_(steps) { extend(); }

void StepLocator::extend() {
  for (size_t k = furthest_end_.size(); k < steps_.size(); ++k) {
    const int64_t end = steps_[k].start_ns + steps_[k].dur_ns;
    furthest_end_.push_back(k == 0 ? end : std::max(end, furthest_end_[k - 1]));
  }
}

int32_t StepLocator::step_of(int64_t t, ptrdiff_t& cursor, bool restart) const {
  const auto n = static_cast<ptrdiff_t>(steps_.size());
  if (restart || (cursor > 0 && steps_[cursor - 1].start_ns > t)) {
    cursor = std::upper_bound(steps_.begin(), steps_.end(), t,
                              [](int64_t x, const Step& s) { return x < s.start_ns; }) - steps_.begin();
  }
  while (cursor < n && steps_[cursor].start_ns <= t) ++cursor;
  for (auto k = cursor - 1; k >= 0 && furthest_end_[k] >= t; --k) {
    if (t <= steps_[k].start_ns + steps_[k].dur_ns) return static_cast<int32_t>(k);
  }
  return -1;
}

void untangle_step_ranges(std::vector<MarkerEvent>& markers) {
  for (size_t k = 0; k < markers.size(); ++k) {
    MarkerEvent& m = markers[k];
    if (m.mark || !m.start_end) continue;
    for (size_t j = k + 1; j < markers.size() && markers[j].start_ns < m.end_ns; ++j) {
      const MarkerEvent& next = markers[j];
      if (next.mark || next.tid != m.tid || next.start_ns == m.start_ns) continue;
      if (next.end_ns > m.end_ns) {  // begins inside m and ends after it: they intersect
        m.end_ns = next.start_ns;
        break;
      }
    }
  }
}

std::vector<Step> steps_of_markers(const std::vector<MarkerEvent>& markers, int64_t start_ns, int64_t end_ns,
                                   bool recorded_anything, const std::optional<Schedule>& schedule) {
  std::vector<Step> steps = make_steps(markers, start_ns, end_ns, recorded_anything);
  assign_actions(steps, schedule);
  return steps;
}

StepMarker::StepMarker(const std::string& pattern) {
  try {
    regex_ = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& err) {
    throw InputError("invalid step marker regex '" + pattern + "': " + err.what());
  }
  // ECMAScript's special characters; `^` (without the multiline flag) anchors at the start.
  if (pattern.starts_with('^') && pattern.find_first_of("^$\\.*+?()[]{}|", 1) == std::string::npos) {
    prefix_ = pattern.substr(1);
  }
}

bool StepMarker::matches(const std::string& name) const {
  return prefix_ ? name.starts_with(*prefix_) : std::regex_search(name, regex_);
}

// By name, plus its shapes when grouped by them, plus its first N frames when it has a
// Python stack (as torch's key_averages(group_by_stack_n=N); 0: by name alone, no stack).
OpStats op_row(const OpInfo& op, bool group_by_input_shape, size_t group_by_stack_n) {
  OpStats key;
  key.kind = "cpu_op";
  if (group_by_input_shape) key.input_shapes = op.input_shapes;
  const size_t frames = std::min(op.stack.size(), group_by_stack_n);
  key.stack.assign(op.stack.begin(), op.stack.begin() + static_cast<std::ptrdiff_t>(frames));
  return key;
}

int cycle_count(const Process& proc) {
  int cycles = 0;
  for (const Step& s : proc.steps) cycles = std::max(cycles, s.cycle + 1);
  return cycles;
}

const char* step_action_name(StepAction action) {
  switch (action) {
    case StepAction::kNone:
      return "none";
    case StepAction::kWarmup:
      return "warmup";
    case StepAction::kRecord:
      return "record";
    case StepAction::kRecordAndSave:
      return "record_and_save";
  }
  return "none";
}

}  // namespace torchprof
