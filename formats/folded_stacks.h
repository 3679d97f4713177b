// Folded stacks for flame graphs, as torch's export_stacks() writes them: one line
// per distinct stack, frames outermost first joined by ';', the op last, a space and
// the op's self CPU time in integer microseconds (lines with 0 are left out).
// Only ops recorded with a Python stack (--with-stack) have lines.
#pragma once

#include <string>

#include "analysis/model.h"

namespace torchprof {

// Over the recorded steps of every process; "" when no op has a stack.
std::string render_folded_stacks(const Run& run);

}  // namespace torchprof
