// `torchprof diff BEFORE AFTER`: compare two runs op by op, optionally failing on
// regressions (exit 1) for CI.
#pragma once

#include <string>

#include "cli/analysis_options.h"
#include "cli/command.h"
#include "pipeline/diff.h"

namespace torchprof::cli {

struct DiffCommandOptions {
  CommonOptions common;
  std::string before;
  std::string after;
  std::string metric;            // "" = cuda_time_total with GPU data in both, else cpu_time_total
  std::string threshold = "10";  // percent, "10" or "10%"
  std::string min_time = "0";    // duration: 100us, 2ms, …
  bool fail_on_regression = false;
  std::string format = "table";
  int row_limit = 50;
};

CommandAction setup_diff_command(CLI::App& app, const CommandLine& line);

// Turns the option strings into DiffOptions. Throws UsageError.
DiffOptions diff_options_of(const DiffCommandOptions& options);

int diff_command(const DiffCommandOptions& options);

}  // namespace torchprof::cli
