// The front end's entry point, shared by `torchprof` and `torchprof-run`.
#pragma once

namespace torchprof::cli {

enum class Entry {
  kTorchprof,     // torchprof SUBCOMMAND …
  kTorchprofRun,  // torchprof-run …, the same as `torchprof run …`
};

// Parses, runs the command and maps errors to exit codes: 2 for usage errors and
// unreadable inputs, 70 for internal errors, else what the command returns.
int run_cli(int argc, char** argv, Entry entry);

}  // namespace torchprof::cli
