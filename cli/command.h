// How a subcommand plugs into the front end (cli/app.cpp lists them).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace torchprof::cli {

// The command line as split before parsing. `run` stops parsing at PROGRAM; an
// explicit `--` before it is taken out here, because CLI11's prefix mode mishandles it.
struct CommandLine {
  bool had_separator = false;
  std::vector<std::string> after_separator;
};

// Runs a parsed subcommand; returns the process exit code.
using CommandAction = std::function<int()>;

// Adds a subcommand's options to `app`; the action it returns runs once `app` has
// parsed. `line` outlives the action.
using CommandSetup = CommandAction (*)(CLI::App& app, const CommandLine& line);

}  // namespace torchprof::cli
