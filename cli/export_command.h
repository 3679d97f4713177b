// `torchprof export --type sqlite [-o FILE] [--force-overwrite true|false] RUN`: the run
// as a SQLite database in Nsight Systems' export schema (formats/sqlite_export.h).
#pragma once

#include <string>

#include "cli/analysis_options.h"
#include "cli/command.h"

namespace torchprof::cli {

struct ExportOptions {
  CommonOptions common;
  std::string input;            // run directory or capture.tprof
  std::string type = "sqlite";
  std::string output;           // "" = <run dir>/capture.sqlite
  std::string force_overwrite = "false";
  std::string step_marker = "^ProfilerStep#";
};

CommandAction setup_export_command(CLI::App& app, const CommandLine& line);

int export_command(const ExportOptions& options);

}  // namespace torchprof::cli
