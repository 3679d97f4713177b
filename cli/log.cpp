#include "cli/log.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "common/wire/env.h"

namespace torchprof::cli {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("torchprof");
    return existing ? existing : spdlog::stderr_color_mt("torchprof");
  }();
  return *logger;
}

std::string effective_log_level(const std::string& option, bool quiet) {
  std::string level = option;
  if (level.empty()) {
    const char* from_env = std::getenv(env::kLogLevel);
    if (from_env != nullptr) level = from_env;
  }
  if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") level = "info";
  if (quiet && spdlog::level::from_str(level) < spdlog::level::warn) level = "warn";
  return level;
}

void configure_logging(const std::string& option, bool quiet) {
  log();
  spdlog::set_pattern("%n: %^%l%$: %v");
  spdlog::set_level(spdlog::level::from_str(effective_log_level(option, quiet)));
}

}  // namespace torchprof::cli
