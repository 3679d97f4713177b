// summary.json, schema torchprof.summary/1 (docs/outputs.md): fields are
// only ever added, never renamed. Times are integer nanoseconds.
#pragma once

#include <string>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

struct Overview;
struct RankReport;

// `traces`: paths of the trace files written, listed relative to `out_dir` when inside it.
// A merged run (Run::inputs not empty) also gets "inputs", "input" in each process and
// step, and "ranks" from `ranks` (formats/rank_table.h) when given. "overview" is
// `overview` (analysis/overview.h), computed here when not given.
std::string render_summary_json(const Run& run, const std::vector<std::string>& traces = {},
                                const std::string& out_dir = "", const RankReport* ranks = nullptr,
                                const Overview* overview = nullptr);

}  // namespace torchprof
