// `torchprof check DIR --max METRIC=VALUE …`: CI gates on one run (exit 1 on a breach).
#pragma once

#include <string>
#include <vector>

#include "cli/analysis_options.h"
#include "cli/command.h"

namespace torchprof::cli {

struct CheckCommandOptions {
  CommonOptions common;
  std::string input;              // run directory, capture.tprof or summary.json
  std::vector<std::string> max;   // METRIC=VALUE
  std::vector<std::string> min;
  std::string format = "table";
};

CommandAction setup_check_command(CLI::App& app, const CommandLine& line);

int check_command(const CheckCommandOptions& options);

}  // namespace torchprof::cli
