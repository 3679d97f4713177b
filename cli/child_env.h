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
  std::string trace;        // TORCHPROF_TRACE (nvtx,cuda,gpu,memory,python); "" = inherited
  std::string pytorch_ops;  // TORCHPROF_PYTORCH_OPS ("ops[,shapes][,stack]"); "" = inherited
  bool paused = false;      // TORCHPROF_PAUSED=1: the processes start with recording off
};

// `parent` (KEY=VALUE entries, as in environ) with the injection variables set:
// LD_PRELOAD gets the library prepended to what is there, NVTX_INJECTION64_PATH and
// CUDA_INJECTION64_PATH name it, TORCHPROF_* carry the socket and the settings;
// for Python targets PYTHONPATH gets the bootstrap directory in front of the user's.
std::vector<std::string> build_child_env(const std::vector<std::string>& parent,
                                         const ChildEnvSettings& settings);

// This process's environment as KEY=VALUE entries.
std::vector<std::string> current_environment();

}  // namespace torchprof::cli
