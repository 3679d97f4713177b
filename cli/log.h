// The front end's own logger ("torchprof"), on stderr: stdout belongs to the target.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

namespace torchprof::cli {

spdlog::logger& log();

// The level asked for: `option` when given, else $TORCHPROF_LOG_LEVEL, else "info".
// `quiet` raises it to at least "warn".
std::string effective_log_level(const std::string& option, bool quiet);

// Applies effective_log_level() to every logger of the process (the collector's too).
void configure_logging(const std::string& option, bool quiet);

}  // namespace torchprof::cli
