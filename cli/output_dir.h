// The run's output directory: -o patterns and never overwriting an earlier run.
#pragma once

#include <functional>
#include <string>

namespace torchprof::cli {

using EnvLookup = std::function<const char*(const char*)>;

// Expands %h (host name), %p (the launcher's pid), %q{VAR} (VAR's value, empty when
// unset) and %% (a percent sign), as nsys does. Throws UsageError on anything else
// after a %.
std::string expand_output_pattern(const std::string& pattern, const std::string& host, int pid,
                                  const EnvLookup& getenv_fn);

struct OutputDir {
  std::string path;
  bool renamed = false;  // `wanted` held an earlier run
};

// Creates `wanted` (with its parents), or uses it when it is an empty directory; when
// it exists otherwise, takes the first of wanted-1, wanted-2, … that is free.
// Throws InputError when nothing can be created.
OutputDir create_output_dir(const std::string& wanted);

}  // namespace torchprof::cli
