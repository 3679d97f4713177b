#include "analysis/capture_windows.h"

#include <algorithm>

#include "common/wire/wire.h"

namespace torchprof {
namespace {

const char* source_name(uint16_t source) {
  switch (static_cast<wire::CaptureSource>(source)) {
    case wire::CaptureSource::kTrigger: return "trigger";
    case wire::CaptureSource::kFollow: return "follow";
    case wire::CaptureSource::kCommand: break;
  }
  return "command";
}

std::vector<CaptureWindow> windows_of(const Process& proc) {
  std::vector<CaptureToggle> toggles = proc.capture_toggles;
  std::stable_sort(toggles.begin(), toggles.end(),
                   [](const CaptureToggle& a, const CaptureToggle& b) { return a.ts_ns < b.ts_ns; });
  std::vector<CaptureWindow> out;
  bool open = false;
  if (toggles.empty() || !toggles.front().on) {  // recording from the start
    out.push_back({toggles.empty() ? 0u : toggles.front().window, proc.start_ns, proc.end_ns, "command", -1, 0});
    open = true;
  }
  for (const CaptureToggle& t : toggles) {
    if (t.on) {
      if (open) out.back().end_ns = t.ts_ns;
      out.push_back({t.window, t.ts_ns, proc.end_ns, source_name(t.source), -1, 0});
      open = true;
    } else if (open) {
      out.back().end_ns = t.ts_ns;
      if (out.back().source == "command" && t.source != 0) out.back().source = source_name(t.source);
      open = false;
    }
  }
  // A process whose last window runs to its end: the end is its last event.
  if (open) out.back().end_ns = std::max(out.back().end_ns, proc.end_ns);
  return out;
}

// One step per window, for a process with no step markers of its own.
void steps_from_windows(Process& proc) {
  proc.steps.clear();
  int cycle = 0;
  for (CaptureWindow& w : proc.capture_windows) {
    Step& s = proc.steps.emplace_back();
    s.index = static_cast<int>(proc.steps.size()) - 1;
    s.start_ns = w.start_ns;
    s.dur_ns = std::max<int64_t>(0, w.end_ns - w.start_ns);
    s.action = StepAction::kRecordAndSave;
    s.cycle = w.cycle = cycle++;
    w.steps = 1;
  }
}

}  // namespace

bool run_has_capture_windows(const Run& run) {
  return std::any_of(run.processes.begin(), run.processes.end(),
                     [](const Process& p) { return !p.capture_toggles.empty(); });
}

void apply_capture_windows(Process& proc, bool recorded_anything) {
  proc.capture_windows = windows_of(proc);
  if (!recorded_anything) {
    proc.capture_windows.clear();  // nothing recorded: a process that stayed paused
    proc.steps.clear();
    return;
  }
  const bool markers = !proc.steps.empty() && proc.steps.front().marker;
  if (!markers) {
    steps_from_windows(proc);
    return;
  }
  int cycle = 0;
  for (CaptureWindow& w : proc.capture_windows) {
    Step* last = nullptr;
    for (Step& s : proc.steps) {
      if (s.start_ns < w.start_ns || s.start_ns > w.end_ns) continue;
      s.action = StepAction::kRecord;
      s.cycle = cycle;
      last = &s;
      ++w.steps;
    }
    if (last == nullptr) continue;
    last->action = StepAction::kRecordAndSave;
    w.cycle = cycle++;
  }
  for (Step& s : proc.steps) {
    bool inside = false;
    for (const CaptureWindow& w : proc.capture_windows) inside = inside || (s.start_ns >= w.start_ns && s.start_ns <= w.end_ns);
    if (!inside) {
      s.action = StepAction::kNone;
      s.cycle = -1;
    }
  }
}

}  // namespace torchprof
