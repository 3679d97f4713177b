// Whether a program is a Python interpreter, from its path or its #! line. Shared by
// the launcher (cli/python_target.cpp) and the injected library's exec interposer
// (inject/interpose_exec.cpp), which runs in vfork children: no allocation, no
// library calls beyond reading bytes.
#pragma once

#include <cstddef>

namespace torchprof::python_program {

// True when the last component of path[0, len) is python, python3, python3.11, ...
// (python followed by digits and dots only).
inline bool is_python_name(const char* path, size_t len) {
  size_t start = 0;
  for (size_t i = 0; i < len; ++i) {
    if (path[i] == '/') start = i + 1;
  }
  static constexpr char kWord[] = "python";
  constexpr size_t kWordLen = sizeof(kWord) - 1;
  if (len - start < kWordLen) return false;
  for (size_t i = 0; i < kWordLen; ++i) {
    if (path[start + i] != kWord[i]) return false;
  }
  for (size_t i = start + kWordLen; i < len; ++i) {
    if ((path[i] < '0' || path[i] > '9') && path[i] != '.') return false;
  }
  return true;
}

inline bool is_python_name(const char* path) {
  size_t n = 0;
  while (path[n] != '\0') ++n;
  return is_python_name(path, n);
}

// True when a #! line (its bytes after "#!", up to the newline or `len`) runs Python:
// its first word is a Python interpreter, or it is env and the first word after env
// that is neither an option nor an assignment is one (env -S python3 -u,
// env PYTHONUNBUFFERED=1 python3).
inline bool shebang_runs_python(const char* line, size_t len) {
  size_t i = 0;
  bool after_env = false;
  bool first = true;
  while (i < len && line[i] != '\n') {
    while (i < len && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    bool assignment = false;
    while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\n') {
      assignment = assignment || line[i] == '=';
      ++i;
    }
    const size_t n = i - start;
    if (n == 0) break;
    const char* word = line + start;
    if (first) {
      first = false;
      size_t base = 0;
      for (size_t k = 0; k < n; ++k) {
        if (word[k] == '/') base = k + 1;
      }
      const bool env = n - base == 3 && word[base] == 'e' && word[base + 1] == 'n' && word[base + 2] == 'v';
      if (!env) return is_python_name(word, n);
      after_env = true;
      continue;
    }
    if (after_env && (word[0] == '-' || assignment)) continue;
    return is_python_name(word, n);
  }
  return false;
}

}  // namespace torchprof::python_program
