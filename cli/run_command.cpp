#include "cli/run_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <functional>
#include <optional>
#include <set>

#include "cli/child_env.h"
#include "cli/completion.h"
#include "cli/control_registry.h"
#include "cli/errors.h"
#include "cli/inject_library.h"
#include "cli/log.h"
#include "cli/output_dir.h"
#include "cli/program_path.h"
#include "cli/python_target.h"
#include "cli/validators.h"
#include "cli/run_info.h"
#include "cli/stale_sockets.h"
#include "cli/target_process.h"
#include "collector/capture_writer.h"
#include "collector/control_server.h"
#include "collector/control_state.h"
#include "collector/server.h"
#include "pipeline/check.h"

namespace torchprof::cli {
namespace {

using Clock = std::chrono::steady_clock;
// After the target exits, its descendants' connections get this long to close...
constexpr auto kExitGrace = std::chrono::seconds(3);
// ...extended to this long after the last byte while data keeps arriving...
constexpr auto kDataGrace = std::chrono::seconds(1);
// ...but never beyond this, so a daemon left behind cannot hold the run open.
constexpr auto kMaxDrain = std::chrono::seconds(60);
constexpr auto kTick = std::chrono::milliseconds(100);

struct Profiled {
  TargetStatus status;
  uint32_t connections = 0;
  int pid = 0;
};

// The level the injected library gets: what was asked for, else quiet's, else inherited.
std::string child_log_level(const CommonOptions& common) {
  if (!common.log_level.empty()) return common.log_level;
  return common.quiet ? "warn" : "";
}

// After the target exits: wait while connections are open or descendants it left
// behind still run (they may not have connected yet), within the bounds above.
void wait_for_stragglers(TargetProcess& target, Server& server) {
  const auto start = Clock::now();
  auto deadline = start + kExitGrace;
  uint64_t seen = server.bytes_received();
  for (;;) {
    const bool connections = server.connections_open() > 0;
    if (!connections && !target.children_left()) return;
    if (connections) server.wait_idle(kTick);
    if (target.pause(connections ? std::chrono::milliseconds(0) : kTick)) {
      log().warn("interrupted: not waiting for {} open connection(s)", server.connections_open());
      return;
    }
    const auto now = Clock::now();
    if (const uint64_t bytes = server.bytes_received(); bytes != seen) {
      seen = bytes;
      deadline = std::max(deadline, now + kDataGrace);
    }
    if (now >= deadline || now - start >= kMaxDrain) {
      log().warn("not waiting any longer for what the program left running "
                 "({} open connection(s){})",
                 server.connections_open(),
                 target.children_left() ? ", processes still running" : "");
      return;
    }
  }
}

// The bootstrap directory, or "" with --no-python (or when it is missing).
std::string python_bootstrap_dir(const RunOptions& options) {
  if (options.no_python) return "";
  std::string dir = find_python_bootstrap();
  if (dir.empty()) log().warn("share/torchprof/python is missing: no automatic steps for Python");
  return dir;
}

// The bootstrap directory to put on the target's own PYTHONPATH, or "" when the target
// is not Python (its Python descendants get it when they are exec'd).
std::string python_path_for(const RunOptions& options, const std::string& program, const std::string& dir) {
  if (dir.empty() || (!options.python && !is_python_program(program))) return "";
  return dir;
}

bool signal_toggles(const RunOptions& options) { return options.output.capture_range == "signal"; }

// SIGUSR2 with --capture-range signal. Signals of one kind coalesce while one is pending,
// so two sent quickly may toggle once: each toggle is logged with its window.
void toggle_on_signal(ControlState& control, Server& server) {
  uint32_t window = 0;
  std::string error;
  const bool was_recording = control.recording();
  if (std::optional<wire::Control> c = control.toggle(&window, &error)) {
    server.broadcast(*c);
    log().info("SIGUSR2: recording {} (window {})", was_recording ? "stopped" : "started", window);
  }
}

Profiled profile_target(const RunOptions& options, const std::string& program,
                        const std::string& lib, CaptureWriter& writer, const OutputDir& dir) {
  ControlState control(options.paused || signal_toggles(options));
  Server* server_ptr = nullptr;
  std::function<void()> on_usr2;
  if (signal_toggles(options)) on_usr2 = [&] { toggle_on_signal(control, *server_ptr); };
  TargetProcess target(on_usr2);  // first: the collector's thread inherits the blocked signals
  Server server(writer);
  server_ptr = &server;
  server.set_control(&control);
  server.start();
  ControlServer control_server(control, [&server](const wire::Control& c) { server.broadcast(c); });
  std::unique_ptr<ControlRegistration> registration;
  try {
    control_server.start(server.socket_dir());
    registration = std::make_unique<ControlRegistration>(dir.path, control_server.socket_path(), dir.handle);
  } catch (const std::exception& e) {
    log().warn("no capture control for this run: {}", e.what());
  }
  const std::string bootstrap = python_bootstrap_dir(options);
  ChildEnvSettings settings{lib, server.socket_path(), child_log_level(options.common),
                            options.output.worker_name, python_path_for(options, program, bootstrap),
                            bootstrap, options.trace, pytorch_ops_setting(options)};
  settings.paused = options.paused || signal_toggles(options);
  std::vector<OutsideTool> outside;
  const std::vector<std::string> env = build_child_env(current_environment(), settings, &outside);
  if (const std::string line = outside_tools_line(outside); !line.empty()) {
    log().warn("{}", line);
    writer.append_text(capture::ChunkType::kRunInfo, 0, outside_tools_json(outside));
  }
  if (const int err = target.spawn(program, options.command, env); err != 0) {
    std::cerr << "torchprof: " << options.command[0] << ": " << std::strerror(err) << "\n";
  }
  if (registration) registration->set_target(target.pid());
  Profiled result;
  result.status = target.wait();
  result.pid = target.pid();
  log().debug("pid {} exited with status {}", target.pid(), result.status.exit_code);
  wait_for_stragglers(target, server);
  registration.reset();
  control_server.stop();
  server.stop();
  // Per-connection counts are logged by the collector as each connection closes.
  result.connections = static_cast<uint32_t>(server.stats().size());
  return result;
}

// Analysis problems are reported, but the target's own failure is what the caller
// most needs to see in the exit code.
int write_run_outputs(const RunOptions& options, const std::string& capture,
                      const OutputDir& out_dir, const TargetStatus& status) {
  const std::string& dir = out_dir.path;
  OutputOptions out = options.output;
  out.out_dir = dir;
  out.out_dir_handle = out_dir.handle;
  out.quiet = options.common.quiet;
  out.format = "table";
  out.write_files = true;
  try {
    const OutputResult result = write_outputs(capture, out, std::cerr);
    if (result.truncated) log().warn("the capture ended early; reported what it holds");
    if (result.corrupted) log().warn("{}", result.corruption);
    if (!out.table_only) {  // the step summary reads summary.json
      const std::string summary_error = append_run_step_summary(dir, out.sort, out.row_limit);
      if (!summary_error.empty()) log().warn("{}", summary_error);
    }
  } catch (const InputError& e) {
    log().error("cannot analyse {}: {}", capture, e.what());
    return status.exit_code != 0 ? status.exit_code : kExitUsage;
  } catch (const std::exception& e) {
    log().error("analysis of {} failed: {}", capture, e.what());
    return status.exit_code != 0 ? status.exit_code : kExitInternal;
  }
  log().info("results in {}", dir);
  return status.exit_code;
}

}  // namespace

std::string pytorch_ops_setting(const RunOptions& options) {
  const bool shapes = options.record_shapes || options.output.group_by_input_shape;
  const bool memory = options.profile_memory || options.output.memory_snapshot;
  if (!options.pytorch_ops && !shapes && !options.with_stack && !memory && !options.with_flops &&
      !options.with_modules) {
    return "";
  }
  std::string value = "ops";
  if (shapes) value += ",shapes";
  if (options.with_flops) value += ",flops";
  if (options.with_modules) value += ",modules";
  if (options.with_stack) value += ",stack";
  if (memory) value += ",memory";
  return value;
}

void validate_trace_list(const std::string& list) {
  static const std::set<std::string> kWords = {"nvtx", "cuda", "gpu", "memory", "python", "all"};
  if (list.empty()) return;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string word = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!kWords.count(word)) {
      throw UsageError("--trace " + list + ": unknown item '" + word +
                       "' (valid: nvtx, cuda, gpu, memory, python, all)");
    }
    if (comma == std::string::npos) return;
    start = comma + 1;
  }
}

CommandAction setup_run_command(CLI::App& app, const CommandLine& line) {
  auto options = std::make_shared<RunOptions>();
  add_common_options(app, options->common);
  with_hint(app.add_option("-o,--output", options->out_pattern,
                           "Output directory; %h = host, %p = launcher pid, %q{VAR} = $VAR. An existing "
                           "non-empty one is kept: DIR-1, DIR-2, … is used instead")
                ->capture_default_str(),
            ValueHint::kDirectory);
  add_analysis_options(app, options->output);
  app.add_option("--worker-name", options->output.worker_name,
                 "Worker name of every process's traces instead of <host>_<pid>");
  app.add_flag("--gzip", options->output.gzip, "Write traces as .pt.trace.json.gz");
  app.add_flag("--table-only", options->output.table_only,
               "When the program ends, make only the table (table.txt); `torchprof report` makes the "
               "rest later");
  app.add_flag("--paused", options->paused,
               "Start with recording off: `torchprof start|stop|trigger DIR` from another shell "
               "switches it (see man torchprof-run)");
  app.add_flag("--python", options->python,
               "Load the Python bootstrap (one step per optimizer.step()) even when PROGRAM is "
               "not a Python interpreter or script, e.g. a shell script that runs python");
  app.add_flag("--no-python", options->no_python, "Never load the Python bootstrap");
  with_choices(app.add_option("--trace", options->trace,
                              "What to trace, a comma list of nvtx,cuda,gpu,memory,python (default: all)")
                   ->check(non_empty("a comma list of nvtx, cuda, gpu, memory, python, all")),
               {"nvtx", "cuda", "gpu", "memory", "python", "all"}, ValueHint::kCommaList);
  app.add_flag("--pytorch-ops", options->pytorch_ops,
               "Record each PyTorch operator as a cpu_op range (Python targets; costs "
               "microseconds per op)");
  app.add_flag("--record-shapes", options->record_shapes,
               "Record the operators' input shapes (implies --pytorch-ops)");
  app.add_flag("--with-flops", options->with_flops,
               "Record torch's FLOP count of each operator it counts (conv, matmul, mul, add); adds "
               "a Total FLOPs column (implies --pytorch-ops)");
  app.add_flag("--with-modules", options->with_modules,
               "Record each nn.Module call (global module hooks) as torch's Python tracer names it; "
               "adds the module view (implies --pytorch-ops)");
  app.add_flag("--with-stack", options->with_stack,
               "Record each operator's Python source location; adds a Source Location column "
               "(implies --pytorch-ops)");
  app.add_flag("--profile-memory", options->profile_memory,
               "Record torch's tensor allocations and frees: CPU Mem / Self CPU Mem per operator, "
               "memory per step and the leak finding (implies --pytorch-ops)");
  // Everything from PROGRAM on belongs to the program, options included.
  app.prefix_command();
  return [options, &app, &line] {
    options->command = program_command(app, line);
    return run_command(*options);
  };
}

std::vector<std::string> program_command(const CLI::App& app, const CommandLine& line) {
  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command[0].size() > 1 && command[0][0] == '-') {
    throw UsageError("unknown option " + command[0] + " (put -- before a program named so)");
  }
  if (line.had_separator) {
    if (!command.empty()) command.push_back("--");  // it was the program's own
    command.insert(command.end(), line.after_separator.begin(), line.after_separator.end());
  }
  if (command.empty()) {
    throw UsageError("no program to run: torchprof-run [OPTIONS] [--] PROGRAM [ARGS...]");
  }
  return command;
}

int run_command(const RunOptions& options) {
  configure_logging(options.common.log_level, options.common.quiet);
  validate_analysis_options(options.output);
  validate_trace_list(options.trace);
  const std::string& name = options.command.at(0);
  const ResolvedProgram program = resolve_program(name, std::getenv("PATH"));
  if (program.exit_code != 0) {
    std::cerr << "torchprof: " << name << ": " << program.error << "\n";
    return program.exit_code;
  }
  if (const std::string why = untraceable_reason(program.path); !why.empty()) {
    log().warn("{} {}", name, why);
  }
  if (const int stale = remove_stale_socket_dirs(socket_dir_bases()); stale > 0) {
    log().debug("removed {} socket directories of launchers that were killed", stale);
  }
  const std::string lib = find_inject_library();
  const std::string host = host_name();
  const std::string wanted = expand_output_pattern(
      options.out_pattern, host, ::getpid(), [](const char* var) { return std::getenv(var); });
  const OutputDir dir = create_output_dir(wanted);
  say_redirect(wanted, dir);

  CaptureWriter writer(dir.path, dir.handle);
  std::error_code ec;
  const RunInfo info{options.command, program.path, host,
                     std::filesystem::current_path(ec).string(), ::getpid(), real_now_ns(),
                     dir.path};
  writer.append_text(capture::ChunkType::kRunInfo, 0, run_info_json(info, options.output));
  const Profiled profiled = profile_target(options, program.path, lib, writer, dir);
  writer.append_text(capture::ChunkType::kRunEnd, 0,
                     run_end_json(profiled.status, real_now_ns(), profiled.connections, profiled.pid));
  writer.close();
  if (!writer.ok()) log().error("the capture is incomplete: {}", writer.error());
  return write_run_outputs(options, writer.path(), dir, profiled.status);
}

}  // namespace torchprof::cli
