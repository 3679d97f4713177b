// Checks of option values that CLI11 does not have, each failing with one line that
// says what was wrong and what is expected.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace torchprof::cli {

// An option given with an empty value ("--schedule ''") is refused; `expected` says what
// the value should look like.
CLI::Validator non_empty(const std::string& expected);

// A number of seconds, 0 or more (fractions allowed), no larger than a day times 365.
CLI::Validator seconds();

}  // namespace torchprof::cli
