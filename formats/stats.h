// `--stats`: nsys-stats-style summaries of the recorded steps: NVTX ranges, CUDA API
// calls, GPU kernels, and GPU memory operations by time and by size.
#pragma once

#include <ostream>

#include "analysis/model.h"

namespace torchprof {

// Prints every report that has rows (a run without GPU data prints the NVTX one).
void render_stats(const Run& run, std::ostream& out);

}  // namespace torchprof
