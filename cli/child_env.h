// The target's environment, built in one place (variables listed in common/wire/env.h).
#pragma once

#include <string>
#include <vector>

namespace torchprof::cli {

struct ChildEnvSettings {
  std::string inject_lib;   // absolute path of libtorchprof_inject.so
  std::string socket_path;  // the collector's socket
  std::string log_level;    // "" = the target inherits whatever it has
  std::string worker_name;  // "" = each process names itself <host>_<pid>
  std::string python_path;  // "" = not a Python target; else put first on PYTHONPATH
  // TORCHPROF_PYTHON: the bootstrap's directory for the Python processes the target
  // starts; "" = none (--no-python), and an inherited value is removed.
  std::string python_bootstrap;
  std::string trace;        // TORCHPROF_TRACE (nvtx,cuda,gpu,memory,python); "" = inherited
  std::string pytorch_ops;  // TORCHPROF_PYTORCH_OPS ("ops[,shapes][,stack]"); "" = inherited
  bool paused = false;      // TORCHPROF_PAUSED=1: the processes start with recording off
};

// An injection variable another tool set (nsys, ncu, a CUPTI tool): left as it is.
struct OutsideTool {
  std::string variable;  // CUDA_INJECTION64_PATH or NVTX_INJECTION64_PATH
  std::string value;     // the library it names
  std::string name;      // "Nsight Systems", "Nsight Compute", or the library's file name
};

// The tool a library path belongs to, as a person would name it.
std::string outside_tool_name(const std::string& path);

// `parent` (KEY=VALUE entries, as in environ) with the injection variables set:
// LD_PRELOAD gets the library prepended to what is there, NVTX_INJECTION64_PATH and
// CUDA_INJECTION64_PATH name it, TORCHPROF_* carry the socket and the settings;
// for Python targets PYTHONPATH gets the bootstrap directory in front of the user's, and
// TORCHPROF_PYTHON names it for the Python processes started further down the tree.
// An injection variable that already names another tool's library is kept: that tool
// keeps CUDA's (or NVTX's) injection, and it is listed in `outside` when given.
std::vector<std::string> build_child_env(const std::vector<std::string>& parent, const ChildEnvSettings& settings,
                                         std::vector<OutsideTool>* outside = nullptr);

// The one line that says which tool keeps which injection, and what torchprof still records.
std::string outside_tools_line(const std::vector<OutsideTool>& outside);

// This process's environment as KEY=VALUE entries.
std::vector<std::string> current_environment();

}  // namespace torchprof::cli
