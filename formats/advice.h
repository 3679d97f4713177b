// The overview as text (`--advice`, advice.txt): the step time breakdown on average and
// per step, GPU utilisation and idle causes per device, kernel launches, copies,
// synchronisations, then the recommendations, each with the figure behind it.
#pragma once

#include <string>

#include "analysis/overview.h"

namespace torchprof {

// `step_rows`: per-step rows shown (<= 0: all).
std::string render_advice(const Overview& overview, int step_rows);

}  // namespace torchprof
