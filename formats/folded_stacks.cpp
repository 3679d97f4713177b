#include "formats/folded_stacks.h"

#include <map>

namespace torchprof {

std::string render_folded_stacks(const Run& run) {
  // Identical stacks are summed (flame graph tools would sum them anyway); the map
  // keeps the output in a stable order.
  std::map<std::string, int64_t> self_ns;
  for (const Process& proc : run.processes) {
    for (const Event& e : proc.events_list) {
      const OpInfo* op = e.op();
      if (op == nullptr || op->stack.empty() || e.step < 0) continue;
      const StepAction action = proc.steps[e.step].action;
      if (action != StepAction::kRecord && action != StepAction::kRecordAndSave) continue;
      std::string key;
      for (auto frame = op->stack.rbegin(); frame != op->stack.rend(); ++frame) {
        key += *frame;
        key += ';';
      }
      key += e.name;
      self_ns[key] += e.self_ns;
    }
  }
  std::string out;
  for (const auto& [stack, ns] : self_ns) {
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
