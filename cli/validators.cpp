#include "cli/validators.h"

#include <cmath>
#include <cstdlib>

namespace torchprof::cli {

CLI::Validator non_empty(const std::string& expected) {
  return CLI::Validator(
      [expected](std::string& value) -> std::string {
        return value.empty() ? "empty value: give " + expected : std::string();
      },
      "", "non-empty");
}

CLI::Validator seconds() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        constexpr double kYear = 365.0 * 24 * 3600;
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || end == value.c_str() || *end != '\0' || !std::isfinite(v) || v < 0 || v > kYear) {
          return value + ": not a number of seconds from 0 to " + std::to_string(static_cast<long>(kYear)) +
                 " (e.g. 60 or 0.5)";
        }
        return {};
      },
      "SECONDS", "seconds");
}

}  // namespace torchprof::cli
