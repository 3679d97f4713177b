// JSON bodies of the capture's run-level chunks (kRunInfo, kRunEnd).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/child_env.h"
#include "cli/target_process.h"
#include "pipeline/outputs.h"

namespace torchprof::cli {

struct RunInfo {
  std::vector<std::string> command;  // as typed
  std::string program;               // what was executed
  std::string host;
  std::string cwd;
  int launcher_pid = 0;
  int64_t start_real_ns = 0;
  std::string output;                // the output directory used
};

// {"command":[…],"program":…,"host":…,"start_real_ns":…,"cwd":…,"launcher_pid":…,
//  "version":…,"options":{"output":…,"schedule":…,"step_marker":…,"worker_name":…,
//  "gzip":…,"sort":…,"row_limit":…}}
std::string run_info_json(const RunInfo& info, const OutputOptions& options);

// {"outside_tools":[{"variable":…,"library":…,"tool":…}]}: another run-information chunk,
// for the injection variables another tool holds (child_env.h).
std::string outside_tools_json(const std::vector<OutsideTool>& outside);

// {"exit_code":N,"signal":null|N,"end_real_ns":…,"connections":N}; exit_code is 128+N
// for a target killed by signal N, as the launcher's own exit code.
// `pid`: the target's, so that a report lists it even when nothing of it reached the
// collector (killed before its first flush).
std::string run_end_json(const TargetStatus& status, int64_t end_real_ns, uint32_t connections, int pid);

int64_t real_now_ns();
std::string host_name();

}  // namespace torchprof::cli
