// Where libcupti is looked for when the program has none loaded and
// TORCHPROF_CUPTI_LIB is unset: the CUPTI of the CUDA the program uses, found from
// the libraries it has loaded, before the one torchprof was built with.
#pragma once

#include <cstddef>

namespace torchprof::inject {

inline constexpr size_t kCuptiPathMax = 512;
inline constexpr size_t kCuptiCandidatesMax = 24;

struct CuptiSearchInputs {
  const char* cudart = nullptr;       // path of the loaded libcudart.so.N, or nullptr
  const char* torch_lib = nullptr;    // path of the loaded libtorch_cuda.so / libtorch.so, or nullptr
  const char* virtual_env = nullptr;  // $VIRTUAL_ENV, or nullptr
  const char* build_path = nullptr;   // the libcupti found at build time, or nullptr
  // Whether a path names an existing file; candidates that do not are left out
  // (the sonames at the end are always kept: the loader searches for those).
  bool (*exists)(const char* path) = nullptr;
  // $VIRTUAL_ENV's site-packages folders (lib/python3.X/site-packages), filled by the caller.
  const char* const* site_packages = nullptr;
  size_t site_packages_count = 0;
};

// Fills out[] with the paths to try in order, each once; returns how many. The
// major version of the loaded libcudart (its soname's suffix) picks the CUPTI next
// to it; without one, 13 before 12.
size_t cupti_search_paths(const CuptiSearchInputs& in, char (*out)[kCuptiPathMax], size_t max);

}  // namespace torchprof::inject
