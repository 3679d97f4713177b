// Symbols the program, NVTX or the CUDA driver must see. Everything else in the
// library is hidden (and exports.map is the final word).
#pragma once

#define TORCHPROF_EXPORT __attribute__((visibility("default")))
