#include "cli/check_command.h"

#include <iostream>
#include <memory>

#include "cli/completion.h"
#include "cli/errors.h"
#include "cli/log.h"
#include "pipeline/check.h"

namespace torchprof::cli {

CommandAction setup_check_command(CLI::App& app, const CommandLine& /*line*/) {
  auto options = std::make_shared<CheckCommandOptions>();
  app.add_option("RUN", options->input, "Run directory, capture.tprof or summary.json")->required();
  add_common_options(app, options->common);
  std::string metrics;
  for (const std::string& m : check_metrics()) metrics += (metrics.empty() ? "" : ", ") + m;
  // Several bounds may follow one --max (check RUN --max a=1 b=2) or it may repeat;
  // no comma splitting, since op names may hold commas.
  // Completion offers "METRIC=" and "op:"; the values are checked when the run is read.
  std::vector<std::string> bounds = {"op:"};
  for (const std::string& m : check_metrics()) bounds.push_back(m + "=");
  CLI::Option* max = app.add_option("--max", options->max,
                 "METRIC=VALUE: fail when METRIC exceeds VALUE. Metrics: " + metrics +
                     ", op:<name>:<calls|self_cpu_ns|cpu_total_ns|self_cuda_ns|cuda_total_ns|cpu_avg_ns|cuda_avg_ns>."
                     " Values: 120ms, 2.5s, 300us, 1GB, 5%, or plain numbers (ns, bytes)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::Option* min = app.add_option("--min", options->min, "METRIC=VALUE: fail when METRIC is below VALUE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  with_choices(max, bounds, ValueHint::kNone, /*checked=*/false);
  with_choices(min, bounds, ValueHint::kNone, /*checked=*/false);
  with_choices(app.add_option("--format", options->format, "What is printed on stdout")->capture_default_str(),
               {"table", "markdown", "json"});
  return [options] { return check_command(*options); };
}

int check_command(const CheckCommandOptions& options) {
  configure_logging(options.common.log_level, options.common.quiet);
  std::vector<CheckBound> bounds;
  try {
    for (const std::string& b : options.max) bounds.push_back(parse_bound(b, /*is_max=*/true));
    for (const std::string& b : options.min) bounds.push_back(parse_bound(b, /*is_max=*/false));
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
  if (bounds.empty()) throw UsageError("nothing to check: give --max METRIC=VALUE or --min METRIC=VALUE");
  const RunData run = load_run(options.input);
  const std::vector<CheckResult> results = run_checks(run, bounds);
  const std::string text = render_checks(run, results, options.format);
  if (!options.common.quiet) std::cout << text << std::flush;
  const std::string markdown = options.format == "markdown" ? text : render_checks(run, results, "markdown");
  if (const std::string error = append_github_step_summary(markdown); !error.empty()) log().warn("{}", error);
  int status = 0;
  for (const CheckResult& r : results) {
    if (r.passed) continue;
    std::cerr << "torchprof: check failed: " << r.message << "\n";
    status = 1;
  }
  return status;
}

}  // namespace torchprof::cli
