// Python targets: recognising them and finding the bootstrap that gives them steps
// (python/sitecustomize.py, installed as share/torchprof/python next to bin/).
#pragma once

#include <string>

namespace torchprof::cli {

// True when `path` (the resolved program) is a Python interpreter — its base name is
// python, python3, python3.11, … — or a script whose #! line runs one, directly or
// through env (torchrun, accelerate and other entry-point scripts).
bool is_python_program(const std::string& path);

// <dir of /proc/self/exe>/../share/torchprof/python made absolute, or "" when it
// holds no sitecustomize.py.
std::string find_python_bootstrap();

}  // namespace torchprof::cli
