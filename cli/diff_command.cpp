#include "cli/diff_command.h"

#include <iostream>
#include <memory>

#include "cli/completion.h"
#include "cli/errors.h"
#include "cli/log.h"
#include "pipeline/check.h"

namespace torchprof::cli {

CommandAction setup_diff_command(CLI::App& app, const CommandLine& /*line*/) {
  auto options = std::make_shared<DiffCommandOptions>();
  app.add_option("BEFORE", options->before, "Run directory, capture.tprof or summary.json")->required();
  app.add_option("AFTER", options->after, "Run directory, capture.tprof or summary.json")->required();
  add_common_options(app, options->common);
  with_choices(app.add_option("--metric", options->metric,
                              "What is compared (default: cuda_time_total when both runs have GPU data, "
                              "else cpu_time_total)"),
               diff_metrics());
  app.add_option("--threshold", options->threshold,
                 "Percent growth beyond which a judged row or the total regresses")
      ->capture_default_str();
  app.add_option("--min-time", options->min_time,
                 "Rows below this in both runs are not judged (100us, 2ms, …)")
      ->capture_default_str();
  app.add_flag("--fail-on-regression", options->fail_on_regression,
               "Exit 1, naming each regression on stderr, when the total or a judged row regresses");
  with_choices(app.add_option("--format", options->format, "What is printed on stdout")->capture_default_str(),
               {"table", "markdown", "csv", "json"});
  app.add_option("--row-limit", options->row_limit, "Rows shown; 0 or less = all")->capture_default_str();
  return [options] { return diff_command(*options); };
}

DiffOptions diff_options_of(const DiffCommandOptions& options) {
  DiffOptions out;
  out.metric = options.metric;
  const std::optional<Quantity> pct = parse_quantity(options.threshold);
  if (!pct || (pct->unit != Unit::kNone && pct->unit != Unit::kPercent) || pct->value < 0) {
    throw UsageError("--threshold " + options.threshold + ": not a percentage (e.g. 10 or 2.5%)");
  }
  out.threshold_pct = pct->value;
  const std::optional<int64_t> min_time = parse_duration_ns(options.min_time);
  if (!min_time) throw UsageError("--min-time " + options.min_time + ": not a duration (e.g. 100us, 2ms, 1s)");
  out.min_time_ns = *min_time;
  return out;
}

int diff_command(const DiffCommandOptions& options) {
  configure_logging(options.common.log_level, options.common.quiet);
  const DiffOptions diff_options = diff_options_of(options);
  const RunData before = load_run(options.before);
  const RunData after = load_run(options.after);
  const DiffResult diff = compute_diff(before, after, diff_options);
  const std::string text = render_diff(diff, options.format, options.row_limit);
  if (!options.common.quiet) std::cout << text << std::flush;
  const std::string markdown = options.format == "markdown" ? text : render_diff(diff, "markdown", options.row_limit);
  if (const std::string error = append_github_step_summary(markdown); !error.empty()) log().warn("{}", error);
  if (!options.fail_on_regression || diff.regressions.empty()) return 0;
  for (const std::string& r : diff.regressions) std::cerr << "torchprof: regression: " << r << "\n";
  return 1;
}

}  // namespace torchprof::cli
