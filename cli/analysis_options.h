// Options that `run` and `report` share: how the capture is analysed and printed.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "pipeline/outputs.h"

namespace torchprof::cli {

// Options every subcommand has.
struct CommonOptions {
  std::string log_level;  // "" = $TORCHPROF_LOG_LEVEL or info
  bool quiet = false;
};

void add_common_options(CLI::App& app, CommonOptions& options);

// --sort, --row-limit, --schedule, --step-marker, --capture-range.
void add_analysis_options(CLI::App& app, OutputOptions& options);

// Checks --schedule, --step-marker and --capture-range before anything runs. Throws UsageError naming
// the bad part (torch's warning for warmup=0 comes with the analysis's notes).
void validate_analysis_options(const OutputOptions& options);

}  // namespace torchprof::cli
