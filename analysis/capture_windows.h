// On-demand capture windows (`torchprof start|stop|trigger`, --capture-range signal):
// what each process recorded, from its kCaptureWindow records, and the cycles they make.
//
// The library records only inside windows, so nothing is cut here: the windows decide
// the steps and cycles. A process with step markers keeps the steps that start inside
// a window, each window's steps making one cycle (its last step is record_and_save, the
// schedule's moment to save a trace); steps outside are "none". A process without step
// markers gets one step per window. A process whose first record is an "off" recorded
// from its start (window 0); one with no window record at all recorded everything.
// The windows replace --schedule for the processes they cover.
#pragma once

#include "analysis/model.h"

namespace torchprof {

// Whether any process of the run has capture-window records.
bool run_has_capture_windows(const Run& run);

// Fills proc.capture_windows and redoes proc.steps' actions and cycles (and, without
// markers, the steps themselves), from proc.capture_toggles, its steps and its span.
// `recorded_anything`: the process has events or GPU records (one that stayed paused has
// neither, and then no window and no step).
void apply_capture_windows(Process& proc, bool recorded_anything);

}  // namespace torchprof
