// report.html: one self-contained page (inline CSS, JS and the data as JSON) with the
// overview first (step time breakdown, GPU idle causes, recommendations), a
// zoomable timeline, the top ops and kernels, GPU busy/idle per step, device memory
// over time, the table and the run's loss warnings. Works offline, from file://.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "analysis/model.h"
#include "analysis/overview.h"
#include "formats/table.h"

namespace torchprof {

struct HtmlReportOptions {
  size_t max_events = 200000;        // timeline events kept (the longest); the rest are counted
  size_t max_memory_points = 20000;  // per device, downsampled beyond this
  size_t top_n = 15;                 // bars in each top chart
  const Overview* overview = nullptr;  // the first section; computed from the run when not given
  std::vector<std::string> empty_result;  // why the table is empty (formats/empty_result.h)
  std::vector<std::string> traces;        // the trace files written, relative to the page
};

// `rows`: the table as table.txt shows it (same rows, same order).
std::string render_html_report(const Run& run, const TableRows& rows,
                               const HtmlReportOptions& options = {});

// The page's data as JSON, '<' escaped so that it can sit inside a <script> element.
std::string render_html_report_data(const Run& run, const TableRows& rows,
                                    const HtmlReportOptions& options = {});

}  // namespace torchprof
