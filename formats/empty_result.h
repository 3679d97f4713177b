// Why a run's table is empty, in words: what was seen (the program, its processes and
// their time, their steps) and what to do to see more. Printed under the table and shown
// in report.html; nothing when the table has rows.
#pragma once

#include <string>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

struct EmptyResultContext {
  std::string schedule;       // --schedule as given ("" = none)
  std::string capture_range;  // --capture-range as given ("" or "none" = none)
};

// One line per sentence, without a "torchprof:" prefix; empty when `run.ops` has rows.
std::vector<std::string> explain_empty_result(const Run& run, const EmptyResultContext& context);

}  // namespace torchprof
