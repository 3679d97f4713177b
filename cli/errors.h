// Errors the front end maps to exit codes.
#pragma once

#include <stdexcept>

namespace torchprof::cli {

constexpr int kExitUsage = 2;           // bad options, unreadable inputs
constexpr int kExitInternal = 70;       // EX_SOFTWARE: a bug or an environment we cannot use
constexpr int kExitCannotExecute = 126; // as shells: found but not executable
constexpr int kExitNotFound = 127;      // as shells: command not found

// A bad option value or a missing argument: one line, exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace torchprof::cli
