// Where libtorchprof_inject.so is: next to the launcher, in the layout both the build
// tree and the install tree share (bin/torchprof, lib/libtorchprof_inject.so).
#pragma once

#include <string>

namespace torchprof::cli {

constexpr const char* kInjectLibName = "libtorchprof_inject.so";

// $TORCHPROF_LIB when set, else <dir of /proc/self/exe>/../lib/libtorchprof_inject.so,
// made absolute. Throws std::runtime_error naming the path when the file is missing.
std::string find_inject_library();

}  // namespace torchprof::cli
