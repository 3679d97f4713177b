// The operator table straight from a capture, without holding its events: each
// connection's frames are read in order, every range is nested on its thread's stack
// and added to its row when it ends. Memory depends on the names, threads and nesting
// depth of a run, not on how many events it holds.
//
// It gives what decode_capture() + analyse() put in Run::ops, row for row and in the
// same order, for captures of NVTX push/pop ranges and marks: the usual traffic of a
// program annotated with NVTX. One pass suffices when no name matches the step marker;
// otherwise a first pass finds the steps and a second one aggregates. A capture holding
// anything else (start/end ranges, CUDA or GPU records, PyTorch op messages, two images
// of one process, ranges whose order on a thread the stack cannot settle) is refused with
// the reason, and the caller analyses it whole.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "collector/analysis.h"
#include "collector/model.h"

namespace torchprof {

struct StreamedTable {
  // ops and has_gpu as analyse() sets them; processes with their identity, dropped
  // counts and warnings (no events); dropped_events, truncated, warnings and exit_code.
  Run run;
  uint64_t events = 0;  // timeline events read (ranges and marks), as decode counts them
  int passes = 0;       // 1, or 2 when step markers were found
};

// Throws InputError when the file cannot be read as a capture or an option is invalid;
// nullopt with `why` set when the capture needs the full analysis.
std::optional<StreamedTable> stream_table(const std::string& capture_path, const AnalysisOptions& options,
                                          std::string* why);

}  // namespace torchprof
