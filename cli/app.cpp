#include "cli/app.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/check_command.h"
#include "cli/command.h"
#include "cli/completion.h"
#include "cli/control_command.h"
#include "cli/diff_command.h"
#include "cli/export_command.h"
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
  const char* examples;  // the footer of its --help
};

constexpr const char* kRunExamples =
    "Examples:\n"
    "  torchprof-run python train.py\n"
    "  torchprof-run -o out_%h --schedule wait=1,warmup=1,active=3 -- ./app --size 4096\n"
    "  torchprof-run --step-marker '^iteration' --sort self_cpu_time_total -- ./app\n"
    "  torchprof-run --pytorch-ops --record-shapes -- python train.py\n"
    "Results go to the output directory: table.txt, summary.json, report.html (open in a\n"
    "browser), traces/ (Perfetto, TensorBoard, HTA). See man torchprof-run.\n";

constexpr const char* kReportExamples =
    "Examples:\n"
    "  torchprof report torchprof_out --sort self_cpu_time_total --row-limit 20\n"
    "  torchprof report torchprof_out -o again --schedule skip_first=10,wait=0,warmup=1,active=4\n"
    "  torchprof report torchprof_out --format markdown --stats --advice\n"
    "  torchprof report huge_out --table-only\n"
    "  torchprof report out_0 out_1 out_2 out_3 -o merged\n"
    "See man torchprof-report.\n";

constexpr const char* kDiffExamples =
    "Examples:\n"
    "  torchprof diff before_out after_out\n"
    "  torchprof diff before_out after_out --fail-on-regression --threshold 10 --min-time 100us\n"
    "  torchprof diff before_out after_out --metric step_time --format markdown > comment.md\n"
    "Exit code 1 with --fail-on-regression when a judged row or the total regresses.\n"
    "See man torchprof-diff.\n";

constexpr const char* kCheckExamples =
    "Examples:\n"
    "  torchprof check torchprof_out --max step_time_avg=120ms dropped_events=0\n"
    "  torchprof check torchprof_out --max op:forward:cpu_total_ns=2s --format markdown\n"
    "Exit code 1 when a limit is broken. See man torchprof-check.\n";

constexpr const char* kExportExamples =
    "Examples:\n"
    "  torchprof export --type sqlite torchprof_out\n"
    "  torchprof export -t sqlite -o run.sqlite --force-overwrite true torchprof_out\n"
    "  sqlite3 torchprof_out/capture.sqlite 'SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL'\n"
    "Tables as nsys export --type sqlite names them, with TORCH_OPS, TORCH_STEPS and\n"
    "TORCH_MEMORY. An existing file is kept (exit 2) unless --force-overwrite true.\n"
    "See man torchprof-export.\n";

constexpr const char* kStartStopExamples =
    "Examples:\n"
    "  torchprof-run --paused -o out -- python train.py &\n"
    "  torchprof start out; sleep 10; torchprof stop out\n"
    "Exit codes: 2 no such running capture, 3 the run belongs to another user.\n";

constexpr const char* kTriggerExamples =
    "Examples:\n"
    "  torchprof-run --paused -o out -- python train.py &\n"
    "  torchprof trigger out --steps 5 --wait 60\n"
    "Exit codes: 1 --wait ran out (or the run ended first), 2 no such running capture,\n"
    "3 the run belongs to another user.\n";

// The subcommands of `torchprof`; `run` must stay first (torchprof-run is it alone).
const Subcommand kSubcommands[] = {
    {"run", "Run a program under the profiler", setup_run_command, kRunExamples},
    {"report", "Analyse a saved capture again", setup_report_command, kReportExamples},
    {"diff", "Compare two runs op by op; --fail-on-regression for CI", setup_diff_command, kDiffExamples},
    {"check", "Fail (exit 1) when a run breaks --max/--min limits", setup_check_command, kCheckExamples},
    {"export", "Write a run as a SQLite database in nsys's schema", setup_export_command, kExportExamples},
    {"start", "Start recording in a running capture (torchprof-run --paused)", setup_start_command,
     kStartStopExamples},
    {"stop", "Stop recording in a running capture", setup_stop_command, kStartStopExamples},
    {"trigger", "Record the next N steps of a running capture", setup_trigger_command, kTriggerExamples},
};

constexpr const char* kExamples =
    "Examples:\n"
    "  torchprof-run python train.py\n"
    "  torchprof report torchprof_out --sort self_cpu_time_total --row-limit 20\n"
    "  torchprof diff before_out after_out --fail-on-regression --threshold 10\n"
    "  torchprof check torchprof_out --max step_time_avg=120ms\n"
    "  torchprof-run --paused -o out -- python train.py &  torchprof trigger out --steps 5\n"
    "torchprof COMMAND --help shows a command's options. Results go to torchprof_out/:\n"
    "table.txt, summary.json, report.html (open in a browser), traces/ (Perfetto, TensorBoard,\n"
    "HTA). See man torchprof.\n";

constexpr const char* kRunUsage = "[OPTIONS] [--] PROGRAM [ARGS...]";

// CLI11's usage line, except for `run`, whose program and its arguments CLI11 does not see.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (app->get_name() == "run" || app->get_name() == "torchprof-run") {
      return get_label("Usage") + ": " + name + " " + kRunUsage + "\n";
    }
    return CLI::Formatter::make_usage(app, name);
  }
};

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

// The apps of `torchprof` (with its subcommands) or of `torchprof-run` (run alone).
struct AppTree {
  std::unique_ptr<CLI::App> app;
  CommandLine line;
  std::vector<std::pair<CLI::App*, CommandAction>> commands;
};

std::unique_ptr<AppTree> make_app_tree(bool run_only) {
  auto tree = std::make_unique<AppTree>();
  tree->app = std::make_unique<CLI::App>(run_only ? "Profile a program" : "Profiler for CUDA and PyTorch programs",
                                         run_only ? "torchprof-run" : "torchprof");
  CLI::App& app = *tree->app;
  app.formatter(std::make_shared<Formatter>());
  app.set_version_flag("--version", version_text());
  if (run_only) {
    app.footer(kSubcommands[0].examples);
    tree->commands.emplace_back(&app, kSubcommands[0].setup(app, tree->line));
    return tree;
  }
  app.footer(kExamples);
  for (const Subcommand& sub : kSubcommands) {
    CLI::App* sub_app = app.add_subcommand(sub.name, sub.help);
    sub_app->footer(sub.examples);
    tree->commands.emplace_back(sub_app, sub.setup(*sub_app, tree->line));
  }
  app.require_subcommand(1);
  return tree;
}

// `torchprof __complete CWORD WORD...` (cli/completion.h).
int complete(int argc, char** argv, bool run_only) {
  if (argc < 3) return kExitUsage;
  const size_t cword = std::strtoul(argv[2], nullptr, 10);
  std::vector<std::string> words(argv + 3, argv + argc);
  const bool words_run_only = !words.empty() && std::filesystem::path(words[0]).filename() == "torchprof-run";
  const std::unique_ptr<AppTree> tree = make_app_tree(run_only || words_run_only);
  return complete_words(*tree->app, run_only || words_run_only, words, cword, std::cout);
}

int dispatch(int argc, char** argv, Entry entry) {
  const bool run_only = entry == Entry::kTorchprofRun;
  if (argc > 1 && std::string_view(argv[1]) == "__complete") return complete(argc, argv, run_only);
  const std::unique_ptr<AppTree> tree = make_app_tree(run_only);
  CLI::App& app = *tree->app;
  const std::string first = argc > 1 ? argv[1] : "";
  if (!run_only && !first.empty() && first[0] != '-' &&
      std::none_of(std::begin(kSubcommands), std::end(kSubcommands),
                   [&](const Subcommand& sub) { return first == sub.name; })) {
    throw UsageError("unknown command '" + first + "' (see torchprof --help)");
  }
  const bool is_run = run_only || first == kSubcommands[0].name;
  try {
    app.parse(prepare_args(argc, argv, is_run, tree->line));
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    print_error(std::string(e.what()) + " (see --help)");  // one line, as every usage error
    return kExitUsage;
  }
  for (auto& [sub_app, action] : tree->commands) {
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
