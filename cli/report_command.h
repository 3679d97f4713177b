// `torchprof report CAPTURE|DIR…`: analyse a saved capture again; several captures
// (the runs of the ranks or nodes of one job) are merged into one report.
#pragma once

#include <string>
#include <vector>

#include "cli/analysis_options.h"
#include "cli/command.h"
#include "pipeline/outputs.h"

namespace torchprof::cli {

struct ReportOptions {
  CommonOptions common;
  OutputOptions output;
  std::vector<std::string> inputs;  // capture files, or run directories holding capture.tprof
  std::string out_dir;  // "" = the capture's own directory (one input), nothing written (several)
  std::string straggler_threshold = "10";  // percent, "10" or "10%"
};

CommandAction setup_report_command(CLI::App& app, const CommandLine& line);

// The capture file `input` names. Throws InputError when it is not there.
std::string capture_path_of(const std::string& input);

int report_command(const ReportOptions& options);

}  // namespace torchprof::cli
