// The operator table straight from a capture, without holding its events: each
// connection's frames are read in order, every range and CUDA API call is nested on its
// thread's stack and added to its row when it ends, and every GPU record is added to its
// row and to the ranges around the API call that launched it (found by correlation id,
// whichever of the two was read first). Memory depends on the names, threads, nesting
// depth and launches in flight of a run, not on how many events it holds.
//
// It gives what decode_capture() + analyse() put in Run::ops, row for row and in the
// same order, for captures of NVTX push/pop and start/end ranges and marks (PyTorch op
// messages among them, as cpu_op rows), CUDA API calls and GPU records: the usual
// traffic of a program annotated with NVTX, on a GPU or not, and of a Python training
// run, whose automatic steps are start/end ranges written once they ended. One pass
// suffices when no name matches the step marker and no start/end range is read, or
// when the steps are found as the capture is read (a scan reads a few frames ahead of
// the pass that counts, which reads them once it knows their steps); otherwise a first
// pass finds the steps and collects the start/end ranges (up to 1M), and a second one
// nests them and aggregates. A capture holding anything else (two
// images of one process; records whose order on a thread the stack cannot settle, such
// as a start/end range crossing a push/pop range; GPU records read too long after their
// API calls) is refused with the reason, and the caller analyses it whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analysis/analysis.h"
#include "analysis/model.h"

namespace torchprof {

struct StreamedTable {
  // ops and has_gpu as analyse() sets them; processes with their identity, dropped
  // counts, warnings and GPU notes (no events); dropped_events, cupti_dropped,
  // gpu_notices, truncated, warnings and exit_code.
  Run run;
  uint64_t events = 0;       // timeline events read (ranges, marks, API calls), as decode counts them
  uint64_t gpu_records = 0;  // kernels, copies, memsets and syncs read (decode's gpu_events)
  int passes = 0;  // reads of the capture: 1, or 2 when the steps or start/end ranges needed a read first
};

// Throws InputError when the file cannot be read as a capture or an option is invalid;
// nullopt with `why` set when the capture needs the full analysis.
// `read_ahead_steps` false: steps are always found by a first pass (the tests compare both).
std::optional<StreamedTable> stream_table(const std::string& capture_path, const AnalysisOptions& options,
                                          std::string* why, bool read_ahead_steps = true);

}  // namespace torchprof
