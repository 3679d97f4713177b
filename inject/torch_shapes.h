// Input shapes of a PyTorch op, for --record-shapes on the op observer's path
// (torch_observer.cpp): torch's own exported helper reads them, so that they are what
// torch.profiler's record_shapes lists (a tensor's sizes; [] for a tensor list, a
// scalar, None or an undefined tensor).
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchprof::inject {

// Finds torch::profiler::impl::inputSizes(const at::RecordFunction&, bool) through
// `lookup` (a symbol name -> address function). False when torch does not export it.
bool shapes_find(void* (*lookup)(const char*));

// Appends ", sizes = [[2, 3], [3, 4], []]" (torch's shapesToStr) to `out`, which holds
// `used` bytes of `cap`. Returns the new length, or `used` unchanged when the shapes could
// not be read (torch threw, as it does for tensors without sizes) or do not fit.
// The slow path: torch allocates the vectors, and may throw (caught here).
size_t shapes_append(const void* record_function, char* out, size_t used, size_t cap);

// torch::profiler::impl::inputTypes(fn), found by shapes_find when torch exports it (1.13
// and 2.x do): each input's dtype name as Kineto's "Input type" lists it ("float",
// "Scalar", "" for None). Appends ", types = ["float", "Scalar"]" (torch's dtypesToStr);
// as shapes_append otherwise, and nothing when torch lacks the function.
size_t types_append(const void* record_function, char* out, size_t used, size_t cap);
// The running torch's major version: how its Kineto names lists (before the observer starts).
void types_style(int torch_major);

// Finds torch's saveExtraArgs and computeFlops (torch/csrc/profiler/util.h), and the
// clear() of their map that libtorch exports, through `lookup`. False when one is missing.
bool flops_find(void* (*lookup)(const char*));

// torch's FLOP count of the op now starting (what torch.profiler(with_flops=True) gives
// it): 0 for ops torch does not count, or when torch threw. The slow path, as shapes.
uint64_t flops_of(const void* record_function, const char* name);

// Appends ", flops = N" when flops_of() is above 0; as shapes_append otherwise.
size_t flops_append(const void* record_function, const char* name, char* out, size_t used, size_t cap);

}  // namespace torchprof::inject
