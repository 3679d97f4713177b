#include "cli/app.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/check_command.h"
#include "cli/command.h"
#include "cli/control_command.h"
#include "cli/diff_command.h"
#include "cli/errors.h"
#include "cli/report_command.h"
#include "cli/run_command.h"
#include "common/errors.h"
#include "torchprof_build_info.h"  // generated at configure time (top-level CMakeLists.txt)

namespace torchprof::cli {
namespace {

struct Subcommand {
  const char* name;
  const char* help;
  CommandSetup setup;
};

// The subcommands of `torchprof`; `run` must stay first (torchprof-run is it alone).
const Subcommand kSubcommands[] = {
    {"run", "Run a program under the profiler", setup_run_command},
    {"report", "Analyse a saved capture again", setup_report_command},
    {"diff", "Compare two runs op by op; --fail-on-regression for CI", setup_diff_command},
    {"check", "Fail (exit 1) when a run breaks --max/--min limits", setup_check_command},
    {"start", "Start recording in a running capture (torchprof-run --paused)", setup_start_command},
    {"stop", "Stop recording in a running capture", setup_stop_command},
    {"trigger", "Record the next N steps of a running capture", setup_trigger_command},
};

constexpr const char* kExamples =
    "Examples:\n"
    "  torchprof-run python train.py\n"
    "  torchprof-run --schedule wait=1,warmup=1,active=3 -o out_%h -- ./app --size 4096\n"
    "  torchprof report torchprof_out --sort self_cpu_time_total --row-limit 20\n"
    "  torchprof diff before_out after_out --fail-on-regression --threshold 10\n"
    "  torchprof check torchprof_out --max step_time_avg=120ms\n"
    "  torchprof-run --paused -o out -- python train.py &  torchprof trigger out --steps 5\n"
    "Results go to torchprof_out/: table.txt, summary.json, report.html (open in a browser),\n"
    "traces/ (TensorBoard, Perfetto). See man torchprof.\n";

constexpr const char* kRunExamples =
    "Examples:\n"
    "  torchprof-run python train.py\n"
    "  torchprof-run -o out_%h --schedule wait=1,warmup=1,active=3 -- ./app --size 4096\n"
    "  torchprof-run --step-marker '^iteration' --sort self_cpu_time_total -- ./app\n"
    "Results go to the output directory: table.txt, summary.json, report.html (open in a\n"
    "browser), traces/ (TensorBoard, Perfetto). See man torchprof-run.\n";

std::string compiler_description() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return "gcc " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#else
  return "unknown compiler";
#endif
}

// What --version prints: enough to tell two builds apart in a bug report.
std::string version_text() {
  std::string text = std::string("torchprof ") + TORCHPROF_VERSION + "\n";
  text += std::string("commit: ") + (*kBuildGitCommit ? kBuildGitCommit : "unknown") + "\n";
  text += "compiler: " + compiler_description() + "\n";
  text += std::string("build type: ") + (*kBuildType ? kBuildType : "none");
  return text;
}

void print_error(const std::string& message) { std::cerr << "torchprof: " << message << "\n"; }

// CLI11 wants the arguments reversed, without argv[0]. For `run`, the first `--` ends
// our options; what follows it is set aside for the program.
std::vector<std::string> prepare_args(int argc, char** argv, bool is_run, CommandLine& line) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (is_run) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] != "--") continue;
      line.had_separator = true;
      line.after_separator.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      args.resize(i);
      break;
    }
  }
  return {args.rbegin(), args.rend()};
}

int dispatch(int argc, char** argv, Entry entry) {
  const bool run_only = entry == Entry::kTorchprofRun;
  CLI::App app{run_only ? "Profile a program: torchprof-run [OPTIONS] [--] PROGRAM [ARGS...]"
                        : "Profiler for CUDA and PyTorch programs",
               run_only ? "torchprof-run" : "torchprof"};
  app.set_version_flag("--version", version_text());
  app.footer(run_only ? kRunExamples : kExamples);
  CommandLine line;
  std::vector<std::pair<CLI::App*, CommandAction>> commands;
  if (run_only) {
    commands.emplace_back(&app, kSubcommands[0].setup(app, line));
  } else {
    for (const Subcommand& sub : kSubcommands) {
      CLI::App* sub_app = app.add_subcommand(sub.name, sub.help);
      commands.emplace_back(sub_app, sub.setup(*sub_app, line));
    }
    app.require_subcommand(1);
  }
  const std::string first = argc > 1 ? argv[1] : "";
  if (!run_only && !first.empty() && first[0] != '-' &&
      std::none_of(std::begin(kSubcommands), std::end(kSubcommands),
                   [&](const Subcommand& sub) { return first == sub.name; })) {
    throw UsageError("unknown command '" + first + "' (see torchprof --help)");
  }
  const bool is_run = run_only || first == kSubcommands[0].name;
  try {
    app.parse(prepare_args(argc, argv, is_run, line));
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    print_error(std::string(e.what()) + " (see --help)");  // one line, as every usage error
    return kExitUsage;
  }
  for (auto& [sub_app, action] : commands) {
    if (sub_app == &app || sub_app->parsed()) return action();
  }
  return kExitUsage;
}

}  // namespace

int run_cli(int argc, char** argv, Entry entry) {
  try {
    return dispatch(argc, argv, entry);
  } catch (const UsageError& e) {
    print_error(e.what());
    return kExitUsage;
  } catch (const InputError& e) {
    print_error(e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitInternal;
  }
}

}  // namespace torchprof::cli
