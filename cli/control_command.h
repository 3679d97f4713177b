// `torchprof start|stop [DIR|PID]` and `torchprof trigger [DIR|PID] --steps N [--wait W]`:
// on-demand capture of a run that torchprof-run started (collector/control_server.h).
//
// Exit codes: 0 done; 1 --wait: the window did not close in time (or the run ended
// first); 2 no such running capture, or a usage error; 3 refused: the run belongs to
// another user.
#pragma once

#include "cli/command.h"

namespace torchprof::cli {

constexpr int kExitControlWaitFailed = 1;
constexpr int kExitControlRefused = 3;

CommandAction setup_start_command(CLI::App& app, const CommandLine& line);
CommandAction setup_stop_command(CLI::App& app, const CommandLine& line);
CommandAction setup_trigger_command(CLI::App& app, const CommandLine& line);

}  // namespace torchprof::cli
