// Checks of option values that CLI11 does not have, each failing with one line that
// says what was wrong and what is expected.
#pragma once

#include <cmath>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace torchprof::cli {

// Inline: the files that use them parse CLI11 already; a file of their own would parse it
// once more (seconds of every build).

// An option given with an empty value ("--schedule ''") is refused; `expected` says what
// the value should look like.
inline CLI::Validator non_empty(const std::string& expected) {
  return CLI::Validator(
      [expected](std::string& value) -> std::string {
        return value.empty() ? "empty value: give " + expected : std::string();
      },
      "", "non-empty");
}

// A number of seconds, 0 or more (fractions allowed), at most a year.
inline CLI::Validator seconds() {
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
