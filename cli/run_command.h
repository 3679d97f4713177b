// `torchprof run` / `torchprof-run`: profile a program from start to exit.
#pragma once

#include <string>
#include <vector>

#include "cli/analysis_options.h"
#include "cli/command.h"
#include "pipeline/outputs.h"

namespace torchprof::cli {

struct RunOptions {
  CommonOptions common;
  OutputOptions output;  // analysis and output settings handed to write_outputs
  std::string out_pattern = "./torchprof_out";
  std::vector<std::string> command;  // PROGRAM ARGS…
  bool python = false;     // --python: the Python bootstrap whatever PROGRAM is
  bool no_python = false;  // --no-python: never (default: when PROGRAM is Python)
  std::string trace;       // --trace: comma list of nvtx,cuda,gpu,memory,python; "" = all
  bool pytorch_ops = false;    // --pytorch-ops: PyTorch operators as cpu_op rows
  bool record_shapes = false;  // --record-shapes: with their input shapes (implies pytorch_ops)
  bool with_flops = false;     // --with-flops: with torch's FLOP counts (implies pytorch_ops)
  bool with_modules = false;   // --with-modules: nn.Module calls and the module view (implies pytorch_ops)
  bool profile_memory = false; // --profile-memory: torch's tensor allocations per op (implies pytorch_ops)
  bool with_stack = false;     // --with-stack: with their Python source location (implies pytorch_ops)
  bool paused = false;         // --paused: record nothing until `torchprof start|trigger`
};

// TORCHPROF_PYTORCH_OPS for the options: "" (off), or "ops" followed by ",shapes"
// and ",stack" as asked. --group-by-input-shape implies --record-shapes.
std::string pytorch_ops_setting(const RunOptions& options);

CommandAction setup_run_command(CLI::App& app, const CommandLine& line);

// PROGRAM ARGS… from what CLI11 left over (`app` parses in prefix mode) and what
// followed `--`. Throws UsageError for an unknown option or a missing program.
std::vector<std::string> program_command(const CLI::App& app, const CommandLine& line);

// Checks a --trace list; throws UsageError naming an unknown item.
void validate_trace_list(const std::string& list);

// Runs the target under the collector, then writes the outputs. Returns the target's
// exit code (128+N for signal N), or 126/127 when it cannot be started.
int run_command(const RunOptions& options);

}  // namespace torchprof::cli
