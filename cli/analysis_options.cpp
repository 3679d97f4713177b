#include "cli/analysis_options.h"

#include <regex>
#include <vector>

#include "cli/completion.h"
#include "cli/errors.h"
#include "cli/log.h"
#include "cli/validators.h"
#include "analysis/capture_range.h"
#include "analysis/schedule.h"
#include "pipeline/check.h"

namespace torchprof::cli {
namespace {

// torch's key_averages().table(sort_by=…) names.
const std::vector<std::string> kSortKeys = {
    "cpu_time",           "cuda_time",           "cpu_time_total",
    "cuda_time_total",    "self_cpu_time_total", "self_cuda_time_total",
    "cpu_memory_usage",   "cuda_memory_usage",   "self_cpu_memory_usage",
    "self_cuda_memory_usage", "count"};

}  // namespace

void add_common_options(CLI::App& app, CommonOptions& options) {
  app.add_flag("-q,--quiet", options.quiet, "Print no table and no informational messages");
  with_choices(app.add_option("--log-level", options.log_level,
                              "trace|debug|info|warn|error|off (default: $TORCHPROF_LOG_LEVEL or info)"),
               {"trace", "debug", "info", "warn", "error", "off"});
}

void add_analysis_options(CLI::App& app, OutputOptions& options) {
  with_choices(app.add_option("--sort", options.sort,
                              "Sort key as in torch's key_averages().table() "
                              "(default: cuda_time_total with GPU data, else cpu_time_total)"),
               kSortKeys);
  app.add_option("--row-limit", options.row_limit, "Rows in the table; 0 or less = all")
      ->capture_default_str();
  app.add_option("--schedule", options.schedule,
                 "torch.profiler schedule: wait=N,warmup=N,active=N[,repeat=N][,skip_first=N]")
      ->check(non_empty("wait=N,warmup=N,active=N[,repeat=N][,skip_first=N]"));
  app.add_option("--step-marker", options.step_marker,
                 "ECMAScript regex naming step ranges and marks")
      ->capture_default_str();
  // Checked by validate_analysis_options() (nvtx:NAME takes any name).
  with_choices(app.add_option("--capture-range", options.capture_range,
                              "none (default) | cudaProfilerApi: only between cudaProfilerStart and "
                              "cudaProfilerStop | nvtx:NAME[@DOMAIN]: only inside NVTX ranges so named | "
                              "signal (run): start paused, each SIGUSR2 to torchprof-run starts or stops recording"),
               {"none", "cudaProfilerApi", "nvtx:", "signal"}, ValueHint::kNone, /*checked=*/false);
  app.add_flag("--group-by-input-shape", options.group_by_input_shape,
               "One table row per (operator, input shapes), with an Input Shapes column "
               "(run: implies --record-shapes)");
  app.add_option("--group-by-stack", options.group_by_stack_n,
                 "Operators with Python stacks (--with-stack): one row per (operator, first N frames), "
                 "as key_averages(group_by_stack_n=N); 0: one row per operator, no Source Location")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_flag("--stats", options.stats,
               "Also print nsys-style summaries of kernels, CUDA API calls and memory "
               "operations (written to stats.txt)");
  app.add_flag("--advice", options.advice,
               "Also print the overview: step time breakdown, GPU idle causes, kernel launches, copies, "
               "synchronisations and the recommendations that follow (written to advice.txt)");
  app.add_flag("--memory-snapshot", options.memory_snapshot,
               "Also write memory_snapshot.pickle, the CUDA tensor allocations and frees with the ops "
               "that made them, for pytorch.org/memory_viz (run: implies --profile-memory)");
  app.add_option("--memory-snapshot-entries", options.memory_snapshot_entries,
                 "The most entries memory_snapshot.pickle keeps (the last ones)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void validate_analysis_options(const OutputOptions& options) {
  if (options.table_only && options.stats) throw UsageError("--stats needs the whole report, not --table-only");
  if (options.table_only && options.advice) throw UsageError("--advice needs the whole report, not --table-only");
  if (options.table_only && options.memory_snapshot) {
    throw UsageError("--memory-snapshot needs the whole report, not --table-only");
  }
  if (!options.schedule.empty()) {
    // The warning (warmup=0) is the analysis's: it comes once, with the run's other notes.
    std::string error;
    if (!parse_schedule(options.schedule, &error, nullptr)) {
      throw UsageError("--schedule " + options.schedule + ": " + error);
    }
  }
  if (std::string error; !parse_capture_range(options.capture_range, &error)) {
    throw UsageError("--capture-range " + options.capture_range + ": " + error);
  }
  try {
    std::regex check(options.step_marker, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw UsageError("--step-marker '" + options.step_marker + "': " + e.what());
  }
}

}  // namespace torchprof::cli
