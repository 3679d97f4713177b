// A hand-built capture with GPU records, shared by the GPU analysis, trace and
// summary tests; its timeline and expected values are documented where it is built
// (analysis_gpu_test.cpp).
#pragma once

#include <string>

namespace torchprof::test {

// Saves the capture and returns its path. Process 42, device 0 "Fake GPU",
// monotonic 0 = epoch 1'700'000'000'000'000'000 ns.
std::string gpu_nested_capture();

}  // namespace torchprof::test
