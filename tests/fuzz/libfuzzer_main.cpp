// libFuzzer's entry point (clang -fsanitize=fuzzer).
#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return torchprof::fuzz::run_one(data, size);
}
