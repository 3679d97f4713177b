// memory_snapshot.pickle (--memory-snapshot): a process's CUDA tensor history
// (Process::memory_history) in the format torch 2.x's torch.cuda.memory._snapshot()
// returns and pytorch.org/memory_viz opens: a dict with "segments" and "device_traces",
// one list of trace entries per device index, each entry a dict with action ("alloc" or
// "free_completed"), addr, size, stream, time_us and frames ({filename, line, name},
// innermost first). The reports torch's allocator makes name no segments: "segments" is
// empty, so memory_viz's Active Memory Timeline has everything and its segment views
// nothing. Written as pickle protocol 2 with only the opcodes memory_viz's own reader
// takes (docs/memory.md lists them).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "analysis/model.h"

namespace torchprof {

std::string render_memory_snapshot(const MemoryHistory& history);

// The snapshots of a run: (file name, contents) for each process that has a history,
// memory_snapshot.pickle when one has, else memory_snapshot.<worker>.pickle for each
// (the worker as the traces name it, <host>_<pid>).
std::vector<std::pair<std::string, std::string>> render_memory_snapshots(const Run& run);

}  // namespace torchprof
