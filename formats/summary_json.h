// summary.json, schema torchprof.summary/1 (see ../shared/DESIGN.md): fields are
// only ever added, never renamed. Times are integer nanoseconds.
#pragma once

#include <string>
#include <vector>

#include "collector/model.h"

namespace torchprof {

// `traces`: paths of the trace files written, listed relative to `out_dir` when inside it.
std::string render_summary_json(const Run& run, const std::vector<std::string>& traces = {},
                                const std::string& out_dir = "");

}  // namespace torchprof
