// Shell completion answered from the option definitions themselves:
//
//   torchprof __complete CWORD WORD...      (WORD 0 is the command's name)
//
// prints one candidate per line for word CWORD, or a single directive line for the shell
// script to act on: ":dirs", ":files" (run directories, captures, summary.json) or
// ":command N" (the program starts at word N: complete it as a command line of its own).
// scripts/completion/torchprof.bash and _torchprof pass the words and act on the answer.
//
// An option's values come from where it is defined: with_choices() both checks them and
// lists them here; with_hint() says what kind of value the shell should offer.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace torchprof::cli {

enum class ValueHint {
  kNone,       // free text: nothing offered
  kDirectory,  // a directory (-o)
  kRun,        // a run directory, capture.tprof or summary.json
  kCommaList,  // choices joined by commas (--trace nvtx,gpu)
};

// `option` accepts only `values` (checked as CLI::IsMember unless `hint` is kCommaList or
// `checked` is false, where the option checks its values itself) and completion offers them.
CLI::Option* with_choices(CLI::Option* option, std::vector<std::string> values, ValueHint hint = ValueHint::kNone,
                          bool checked = true);
CLI::Option* with_hint(CLI::Option* option, ValueHint hint);

// `root`: the parsed-to-be app of `torchprof` (its subcommands) or of `torchprof-run`
// (`run_only`). Returns the exit code (0).
int complete_words(const CLI::App& root, bool run_only, const std::vector<std::string>& words, size_t cword,
                   std::ostream& out);

}  // namespace torchprof::cli
