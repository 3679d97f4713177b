// The run's output directory: -o patterns and never overwriting an earlier run.
#pragma once

#include <functional>
#include <string>

#include "common/safe_dir.h"

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
  DirHandle handle;      // `path`, held open: every output is made inside it by name
};

// Creates `wanted` (with its parents), or uses it when it is an empty directory; when
// it exists otherwise, takes the first of wanted-1, wanted-2, … that is free. Each
// component is opened with O_NOFOLLOW from the one before (open_dir_safely). Throws
// InputError when nothing can be created, when `wanted` exists and is not a directory
// (a file, /dev/null), and when the directory taken belongs to another user or group or
// others can write in it (unless it is ours and sticky): another user could then put
// links where the outputs are about to be written.
OutputDir create_output_dir(const std::string& wanted);

// The one line saying that `wanted` was taken and where the outputs go instead; said
// even with -q (a later `torchprof check wanted` would read the earlier run).
void say_redirect(const std::string& wanted, const OutputDir& dir);

}  // namespace torchprof::cli
