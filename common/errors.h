// Error types shared by every host-side layer (collector, formats, pipeline, cli).
// They sit below all of them, so a lower layer never includes a higher one for them.
#pragma once

#include <stdexcept>

namespace torchprof {

// Unreadable or invalid input (missing file, foreign file, bad option value): exit 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace torchprof
