// Input shapes of a PyTorch op, for --record-shapes on the op observer's path
// (torch_observer.cpp): torch's own exported helper reads them, so that they are what
// torch.profiler's record_shapes lists (a tensor's sizes; [] for a tensor list, a
// scalar, None or an undefined tensor).
#pragma once

#include <cstddef>

namespace torchprof::inject {

// Finds torch::profiler::impl::inputSizes(const at::RecordFunction&, bool) through
// `lookup` (a symbol name -> address function). False when torch does not export it.
bool shapes_find(void* (*lookup)(const char*));

// Appends ", sizes = [[2, 3], [3, 4], []]" (torch's shapesToStr) to `out`, which holds
// `used` bytes of `cap`. Returns the new length, or `used` unchanged when the shapes could
// not be read (torch threw, as it does for tensors without sizes) or do not fit.
// The slow path: torch allocates the vectors, and may throw (caught here).
size_t shapes_append(const void* record_function, char* out, size_t used, size_t cap);

}  // namespace torchprof::inject
