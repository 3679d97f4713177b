// The per-rank step-time table of a merged report (analysis/rank_steps.h) as text,
// Markdown, CSV and JSON, and the per-step view of which rank was slowest.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/rank_steps.h"

namespace torchprof {

// Text in the table's style (right-aligned columns, two-space separators, dashed
// rules): the per-rank table with its verdict lines, then the per-step view cut to
// `step_rows` steps (<= 0: all).
std::string render_rank_text(const RankReport& report, int step_rows);
std::string render_rank_markdown(const RankReport& report, int step_rows);
// One row per rank with a header line; times in microseconds as the op CSV.
std::string render_rank_csv(const RankReport& report);
// The "ranks" object of summary.json and of `--format json`.
nlohmann::ordered_json rank_report_json(const RankReport& report);

// "1.33x"
std::string format_ratio(double ratio);

}  // namespace torchprof
