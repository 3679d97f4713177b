// The module view (--with-modules): each nn.Module instance of each process, in its
// hierarchy, with its calls, ops and times, as TensorBoard's module view gives them
// (tb_plugin's module_op.py): occurrences, direct child operators, host time and device
// time, each in all and self (less what the module calls and ops inside it hold).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

struct ModuleRow {
  int pid = 0;
  std::string name;        // "Linear_0": the call's name without "nn.Module: "
  int parent = -1;         // index of the row its first call ran inside; -1 at the top
  int depth = 0;
  uint64_t occurrences = 0;
  uint64_t operators = 0;  // direct child ops, over all calls
  int64_t host_ns = 0;
  int64_t self_host_ns = 0;
  int64_t device_ns = 0;       // GPU time of what was launched inside its calls
  int64_t self_device_ns = 0;  // of that, launched with no module call inside it open
};

// The rows of every process, each tree depth first (children in the order of their
// first call), the processes in the run's order.
std::vector<ModuleRow> module_view(const Run& run);

}  // namespace torchprof
