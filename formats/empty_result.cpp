#include "formats/empty_result.h"

#include <algorithm>
#include <filesystem>

#include "analysis/schedule.h"
#include "common/python_program.h"
#include "common/text.h"

namespace torchprof {
namespace {

std::string seconds_text(int64_t ns) { return format_fixed(static_cast<double>(std::max<int64_t>(ns, 0)) / 1e9, 3, " s"); }

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

bool is_python_path(const std::string& path) {
  const std::string base = std::filesystem::path(path).filename().string();
  return python_program::is_python_name(base.data(), base.size()) || base.ends_with(".py");
}

bool is_python_process(const Process& p) {
  return is_python_path(p.exe) || (!p.cmdline.empty() && is_python_path(p.cmdline.front()));
}

size_t python_processes(const Run& run) {
  return static_cast<size_t>(std::count_if(run.processes.begin(), run.processes.end(), is_python_process));
}

bool looks_like_python(const Run& run) {
  if (std::any_of(run.command.begin(), run.command.end(), is_python_path)) return true;
  return python_processes(run) > 0;
}

std::string what_to_do(const Run& run) {
  if (looks_like_python(run)) {
    return "torchprof records ranges, not every function: run with --pytorch-ops to record torch's operators, "
           "or put `with torchprof.range(\"name\"):` (or @torchprof.range(\"name\")) around the code to measure";
  }
  return "torchprof records NVTX ranges, CUDA API calls and GPU work: mark the code to measure with "
         "nvtxRangePushA(\"name\") ... nvtxRangePop() (NVTX v3, header-only)";
}

// The 1-based step at which `schedule` first records, or 0 when it cannot be parsed.
int first_recorded_step(const std::string& schedule) {
  std::string error;
  const std::optional<Schedule> s = parse_schedule(schedule, &error);
  return s ? s->skip_first + s->wait + s->warmup + 1 : 0;
}

// The run's program and its processes: "`ls` ran for 0.101 s (exit code 0)", then what
// the processes that connected recorded.
std::string what_was_seen(const Run& run) {
  std::string program = run.command.empty() ? std::string("the program") : "`" + run.command[0] + "`";
  std::string text = program + " ran for " + seconds_text(run.end_ns - run.start_ns) + " (exit code " +
                     std::to_string(run.exit_code) + ")";
  uint64_t events = 0;
  for (const Process& p : run.processes) events += p.cpu_events;
  if (run.processes.empty()) {
    return text + "; none of its processes made an NVTX range, a CUDA call or a PyTorch op";
  }
  const size_t python = python_processes(run);
  std::string processes = plural(run.processes.size(), "process", "processes");
  if (python > 0) processes += " (" + std::to_string(python) + " Python)";
  if (events == 0) return text + "; its " + processes + " made no NVTX range, CUDA call or PyTorch op";
  return text + "; " + processes + " recorded " + plural(events, "event", "events");
}

size_t most_steps(const Run& run) {
  size_t steps = 0;
  for (const Process& p : run.processes) {
    const bool marked = std::any_of(p.steps.begin(), p.steps.end(), [](const Step& s) { return s.marker; });
    if (marked) steps = std::max(steps, p.steps.size());
  }
  return steps;
}

bool any_step_recorded(const Run& run) {
  for (const Process& p : run.processes) {
    for (const Step& s : p.steps) {
      if (s.action == StepAction::kRecord || s.action == StepAction::kRecordAndSave) return true;
    }
  }
  return false;
}

bool any_capture_window(const Run& run) {
  return std::any_of(run.processes.begin(), run.processes.end(),
                     [](const Process& p) { return !p.capture_windows.empty() || !p.capture_toggles.empty(); });
}

}  // namespace

std::vector<std::string> explain_empty_result(const Run& run, const EmptyResultContext& context) {
  if (!run.ops.empty()) return {};
  std::vector<std::string> lines;
  const size_t steps = most_steps(run);
  if (steps > 0 && !any_step_recorded(run)) {
    std::string line = "no step was recorded: the run had " + plural(steps, "step", "steps");
    const int first = context.schedule.empty() ? 0 : first_recorded_step(context.schedule);
    if (first > static_cast<int>(steps)) {
      line += "; the schedule starts recording at step " + std::to_string(first);
    } else if (any_capture_window(run)) {
      line += "; none of them was inside a capture window (torchprof start or trigger)";
    } else if (!context.schedule.empty()) {
      line += "; the schedule " + context.schedule + " records none of them";
    }
    lines.push_back(line);
    return lines;
  }
  // One line: what ran, and what to try.
  std::string line = "nothing was recorded: " + what_was_seen(run) + "; ";
  const bool ranged = !context.capture_range.empty() && context.capture_range != "none";
  if (ranged && !run.processes.empty()) {
    line += "--capture-range " + context.capture_range + ": none of it fell inside the capture range";
  } else if (any_capture_window(run)) {
    line += "recording was off the whole run: torchprof start or trigger switches it on";
  } else {
    line += what_to_do(run);
  }
  lines.push_back(line);
  return lines;
}

}  // namespace torchprof
