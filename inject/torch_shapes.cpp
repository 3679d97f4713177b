// Built with exceptions (inject/CMakeLists.txt): torch's helper throws c10::Error for
// tensors whose sizes it cannot give, and nothing may unwind through the library's
// other frames, which are built without.
#include "inject/torch_shapes.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "inject/text_put.h"

namespace torchprof::inject {
namespace {

// The exported function returns its vector through a hidden pointer; declared with the
// same return type, the call is the same.
using Sizes = std::vector<std::vector<int64_t>>;
using InputSizesFn = Sizes (*)(const void*, bool);

InputSizesFn g_input_sizes = nullptr;

}  // namespace

bool shapes_find(void* (*lookup)(const char*)) {
  g_input_sizes = reinterpret_cast<InputSizesFn>(lookup("_ZN5torch8profiler4impl10inputSizesERKN2at14RecordFunctionEb"));
  return g_input_sizes != nullptr;
}

size_t shapes_append(const void* record_function, char* out, size_t used, size_t cap) {
  if (g_input_sizes == nullptr) return used;
  Sizes sizes;
  try {
    sizes = g_input_sizes(record_function, false);
  } catch (...) {
    return used;
  }
  size_t at = used;
  static constexpr char kField[] = ", sizes = [";
  if (!put_text(out, at, cap, kField, sizeof kField - 1)) return used;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0 && !put_text(out, at, cap, ", ", 2)) return used;
    if (!put_text(out, at, cap, "[", 1)) return used;
    for (size_t j = 0; j < sizes[i].size(); ++j) {
      if (j > 0 && !put_text(out, at, cap, ", ", 2)) return used;
      if (!put_int(out, at, cap, sizes[i][j])) return used;
    }
    if (!put_text(out, at, cap, "]", 1)) return used;
  }
  if (!put_text(out, at, cap, "]", 1)) return used;
  return at;
}

}  // namespace torchprof::inject
