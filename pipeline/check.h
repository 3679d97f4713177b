// CI gates on one run (`torchprof check DIR --max METRIC=VALUE …`), and GitHub's job
// summary file that diff, check and run append their markdown to.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/table.h"
#include "pipeline/diff.h"

namespace torchprof {

enum class Unit : uint8_t {
  kNone,     // a count
  kTime,     // nanoseconds
  kBytes,
  kPercent,
};

struct Quantity {
  double value = 0;        // in the unit's base: ns, bytes, percent
  Unit unit = Unit::kNone; // kNone for a plain number
};

// "120ms", "2.5s", "300us", "40ns", "1GB" (1024-based, as the op table prints memory;
// KiB/MiB/GiB mean the same), "512MB", "7KB", "100B", "5%", or a plain number.
std::optional<Quantity> parse_quantity(std::string_view text);

struct CheckBound {
  std::string metric;
  bool is_max = true;      // --max: the value may not exceed the limit; --min: not fall below
  Quantity limit;
  std::string limit_text;  // as written, for messages
};

// "METRIC=VALUE". Throws InputError naming what is wrong.
CheckBound parse_bound(const std::string& text, bool is_max);

struct MetricValue {
  double value = 0;
  Unit unit = Unit::kNone;
};

// The metric names check knows, besides op:<name>:<field>.
const std::vector<std::string>& check_metrics();

// Throws InputError for an unknown metric, an op the run lacks, or a metric the run
// has no data for (GPU metrics without GPU data, step metrics without steps).
MetricValue metric_value(const RunData& run, const std::string& metric);

struct CheckResult {
  CheckBound bound;
  MetricValue actual;
  bool passed = true;
  std::string message;  // "step_time_avg 131.200ms > 120ms"
};

// Evaluates every bound. Throws InputError as metric_value(), or when a limit's unit
// does not fit its metric (a time for a byte count).
std::vector<CheckResult> run_checks(const RunData& run, const std::vector<CheckBound>& bounds);

// table | markdown | json.
std::string render_checks(const RunData& run, const std::vector<CheckResult>& results,
                          const std::string& format);

std::string format_quantity(double value, Unit unit);

// The run's top ops as a markdown table, with its command as the heading.
std::string render_run_markdown(const RunData& run, const TableOptions& options);

// For `run`: when $GITHUB_STEP_SUMMARY is set, appends render_run_markdown() of the
// run in `run_dir` (at most 20 rows, fewer when `row_limit` says so). Returns "" or
// why it could not.
std::string append_run_step_summary(const std::string& run_dir, const std::string& sort, int row_limit);

// Appends `markdown` to the file $GITHUB_STEP_SUMMARY names (GitHub Actions' job
// summary). Does nothing without it. Returns "" or why it could not write.
std::string append_github_step_summary(const std::string& markdown);

}  // namespace torchprof
