#include "formats/folded_stacks.h"

#include <map>

namespace torchprof {

std::string render_folded_stacks(const Run& run) {
  // The engine summed identical stacks (flame graph tools would sum them anyway); the map
  // keeps the output in a stable order.
  std::string out;
  for (const auto& [stack, ns] : run.folded) {
    const int64_t us = ns / 1000;
    if (us <= 0) continue;
    out += stack;
    out += ' ';
    out += std::to_string(us);
    out += '\n';
  }
  return out;
}

}  // namespace torchprof
