// The Python stack of a PyTorch op, for --with-stack on the op observer's path
// (torch_observer.cpp): the calling thread's frames, read under the GIL through
// Python's C API (found with dlsym: the interpreter that runs the program), innermost
// first, each "file(line): function", torch's and torchprof's own frames left out.
#pragma once

#include <cstddef>

namespace torchprof::inject {

// Finds the C API. False (with the missing name in `why`) when the process has no
// Python, or not the functions used here (3.9 and later have them).
bool stack_find(const char** why);

// Frames whose file starts with one of these directories are left out ('\n' between
// them; at most four, each under 1 KiB). Called before the observer is registered.
void stack_skip_dirs(const char* dirs);

// After this, stack_append adds nothing: the interpreter is about to finalize.
void stack_off();

// Appends ", stack = f.py(12): fwd; f.py(30): <module>" to `out` (holding `used` of
// `cap` bytes), or nothing when the thread has no Python frames of the program's or
// when Python is going away. Takes the GIL (PyGILState_Ensure), as torch's own
// profiler does for with_stack. Returns the new length.
size_t stack_append(char* out, size_t used, size_t cap);

}  // namespace torchprof::inject
