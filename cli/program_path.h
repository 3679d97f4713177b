// Finding PROGRAM the way a shell does, before anything is created for the run.
#pragma once

#include <string>

namespace torchprof::cli {

struct ResolvedProgram {
  std::string path;   // what to execve; empty when not runnable
  int exit_code = 0;  // 127 not found, 126 found but not executable; 0 when runnable
  std::string error;  // "command not found", "Permission denied", …
};

// A name with a slash is taken as it is; otherwise each directory of `path_env`
// (an empty entry meaning ".", unset meaning the system default) is searched for an
// executable regular file. A script found so whose #! interpreter is missing is not
// runnable either: 127 (126 when it is there but cannot be executed), the error naming
// the interpreter.
ResolvedProgram resolve_program(const std::string& name, const char* path_env);

// The file alone, its #! line unread.
ResolvedProgram resolve_program_file(const std::string& name, const char* path_env);

}  // namespace torchprof::cli
