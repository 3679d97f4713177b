#include "inject/torch_stack.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "inject/text_put.h"

namespace torchprof::inject {
namespace {

// Python's C API as the stable ABI declares it; objects stay opaque here.
using PyObj = void;
using GilEnsureFn = int (*)();
using GilReleaseFn = void (*)(int);
using GetFrameFn = PyObj* (*)();          // PyEval_GetFrame: borrowed; PyGILState_GetThisThreadState
using FrameBackFn = PyObj* (*)(PyObj*);   // PyFrame_GetBack: new reference
using FrameCodeFn = PyObj* (*)(PyObj*);   // PyFrame_GetCode: new reference
using FrameLineFn = int (*)(PyObj*);      // PyFrame_GetLineNumber
using IntOfFn = long (*)(PyObj*);         // PyLong_AsLong
using GetAttrFn = PyObj* (*)(PyObj*, const char*);
using Utf8Fn = const char* (*)(PyObj*, ptrdiff_t*);
using RefFn = void (*)(PyObj*);
using IntFn = int (*)();
using ErrClearFn = void (*)();

struct Api {
  GilEnsureFn gil_ensure;
  GilReleaseFn gil_release;
  GetFrameFn get_frame;
  GetFrameFn this_thread_state;
  FrameBackFn frame_back;
  FrameCodeFn frame_code;
  FrameLineFn frame_line;
  IntOfFn long_value;
  GetAttrFn get_attr;
  Utf8Fn utf8;
  RefFn incref;
  RefFn decref;
  IntFn initialized;
  IntFn finalizing;  // _Py_IsFinalizing (3.7..3.12) or Py_IsFinalizing (3.13): may be null
  ErrClearFn err_clear;
};
Api g_api{};
std::atomic<bool> g_on{false};

constexpr int kMaxFrames = 32;
constexpr int kMaxSkip = 4;
char g_skip[kMaxSkip][1024];
size_t g_skip_len[kMaxSkip];
int g_skips = 0;

// Per code object (kept alive by a reference of ours, so its address is never reused):
// whether it is torch's or torchprof's, and "file" and "function" as UTF-8. Only read
// and written under the GIL, which is the lock.
struct CodeEntry {
  PyObj* code;
  bool own;
  char* file;  // "file" with ';' made ',' (the stack's separator), then '\0', then "function"
  size_t file_len;
  size_t name_len;
  int first_line;  // co_firstlineno
};
constexpr size_t kCodeSlots = 1 << 14;
CodeEntry* g_codes = nullptr;
size_t g_codes_used = 0;

// Frames already running when the capture started (the caller of stack_find's thread),
// with the line each was at then: torch's tracer shows such a frame at that line, and
// every frame entered later at its function's first line. Held by a reference of ours.
constexpr int kMaxStartFrames = 64;
PyObj* g_start_frames[kMaxStartFrames];
int g_start_lines[kMaxStartFrames];
int g_start_count = 0;

int shown_line(PyObj* frame, int first_line) {
  for (int i = 0; i < g_start_count; ++i) {
    if (g_start_frames[i] == frame) return g_start_lines[i];
  }
  return first_line;
}

bool starts_with_skip(const char* file, size_t len) {
  for (int i = 0; i < g_skips; ++i) {
    if (len >= g_skip_len[i] && memcmp(file, g_skip[i], g_skip_len[i]) == 0) return true;
  }
  return false;
}

// The entry for `code`, made on first sight; null when the table is full or the
// names cannot be read.
const CodeEntry* code_entry(PyObj* code) {
  if (g_codes == nullptr) {
    g_codes = static_cast<CodeEntry*>(calloc(kCodeSlots, sizeof(CodeEntry)));
    if (g_codes == nullptr) return nullptr;
  }
  size_t h = (reinterpret_cast<uintptr_t>(code) >> 4) * 0x9E3779B97F4A7C15ull;
  for (size_t probe = 0; probe < 64; ++probe) {
    CodeEntry& e = g_codes[(h + probe) & (kCodeSlots - 1)];
    if (e.code == code) return &e;
    if (e.code != nullptr) continue;
    if (g_codes_used * 2 >= kCodeSlots) return nullptr;  // half full: new code goes unnamed
    PyObj* file = g_api.get_attr(code, "co_filename");
    PyObj* name = g_api.get_attr(code, "co_name");
    PyObj* first = g_api.get_attr(code, "co_firstlineno");
    const long first_line = first != nullptr ? g_api.long_value(first) : -1;
    if (first != nullptr) g_api.decref(first);
    ptrdiff_t flen = 0, nlen = 0;
    const char* f = file != nullptr ? g_api.utf8(file, &flen) : nullptr;
    const char* n = name != nullptr ? g_api.utf8(name, &nlen) : nullptr;
    bool ok = f != nullptr && n != nullptr && flen >= 0 && nlen >= 0 && first_line >= 0;
    char* text = ok ? static_cast<char*>(malloc(static_cast<size_t>(flen + nlen) + 2)) : nullptr;
    if (text != nullptr) {
      for (ptrdiff_t i = 0; i < flen; ++i) text[i] = f[i] == ';' ? ',' : f[i];
      text[flen] = '\0';
      memcpy(text + flen + 1, n, static_cast<size_t>(nlen));
      text[flen + 1 + nlen] = '\0';
      e.own = starts_with_skip(f, static_cast<size_t>(flen));
      e.file = text;
      e.file_len = static_cast<size_t>(flen);
      e.name_len = static_cast<size_t>(nlen);
      e.first_line = static_cast<int>(first_line);
      g_api.incref(code);
      e.code = code;
      ++g_codes_used;
    }
    if (file != nullptr) g_api.decref(file);
    if (name != nullptr) g_api.decref(name);
    if (text == nullptr) {
      g_api.err_clear();
      return nullptr;
    }
    return &e;
  }
  return nullptr;
}

template <typename T>
bool sym(T& fn, const char* name, const char** why) {
  fn = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
  if (fn == nullptr && why != nullptr) *why = name;
  return fn != nullptr;
}

}  // namespace

bool stack_find(const char** why) {
  Api a{};
  Api& s = g_api;
  bool ok = sym(a.gil_ensure, "PyGILState_Ensure", why) && sym(a.gil_release, "PyGILState_Release", why) &&
            sym(a.get_frame, "PyEval_GetFrame", why) &&
            sym(a.this_thread_state, "PyGILState_GetThisThreadState", why) && sym(a.frame_back, "PyFrame_GetBack", why) &&
            sym(a.frame_code, "PyFrame_GetCode", why) && sym(a.frame_line, "PyFrame_GetLineNumber", why) &&
            sym(a.get_attr, "PyObject_GetAttrString", why) && sym(a.utf8, "PyUnicode_AsUTF8AndSize", why) &&
            sym(a.incref, "Py_IncRef", why) && sym(a.long_value, "PyLong_AsLong", why) && sym(a.decref, "Py_DecRef", why) &&
            sym(a.initialized, "Py_IsInitialized", why) && sym(a.err_clear, "PyErr_Clear", why);
  if (!ok) return false;
  a.finalizing = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "Py_IsFinalizing"));
  if (a.finalizing == nullptr) a.finalizing = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
  s = a;
  // Called through ctypes (which releases the GIL around the call) on the thread that
  // imported torch: the frames running there now are kept with their lines.
  const int gil = s.gil_ensure();
  PyObj* frame = s.get_frame();
  if (frame != nullptr) s.incref(frame);
  g_start_count = 0;
  while (frame != nullptr && g_start_count < kMaxStartFrames) {
    g_start_frames[g_start_count] = frame;  // our reference: the frame stays alive
    g_start_lines[g_start_count++] = s.frame_line(frame);
    frame = s.frame_back(frame);
  }
  if (frame != nullptr) s.decref(frame);
  s.gil_release(gil);
  g_on.store(true);
  return true;
}

void stack_skip_dirs(const char* dirs) {
  g_skips = 0;
  while (dirs != nullptr && *dirs != '\0' && g_skips < kMaxSkip) {
    const char* end = strchr(dirs, '\n');
    size_t n = end != nullptr ? static_cast<size_t>(end - dirs) : strlen(dirs);
    if (n > 0 && n < sizeof g_skip[0]) {
      memcpy(g_skip[g_skips], dirs, n);
      g_skip_len[g_skips++] = n;
    }
    dirs = end != nullptr ? end + 1 : nullptr;
  }
}

void stack_off() { g_on.store(false); }

size_t stack_append(char* out, size_t used, size_t cap) {
  if (!g_on.load(std::memory_order_relaxed) || g_api.initialized() == 0) return used;
  if (g_api.finalizing != nullptr && g_api.finalizing() != 0) return used;
  // A thread Python has never run on (one of torch's C++ threads) has no frames: it never
  // waits for the GIL here.
  if (g_api.this_thread_state() == nullptr) return used;
  const int gil = g_api.gil_ensure();
  size_t at = used;
  static constexpr char kField[] = ", stack = ";
  int frames = 0;
  bool room = put_text(out, at, cap, kField, sizeof kField - 1);
  PyObj* frame = g_api.get_frame();  // borrowed
  if (frame != nullptr) g_api.incref(frame);
  while (room && frame != nullptr && frames < kMaxFrames) {
    PyObj* code = g_api.frame_code(frame);
    const CodeEntry* e = code != nullptr ? code_entry(code) : nullptr;
    if (code != nullptr) g_api.decref(code);  // the code table holds one while e is set
    if (e != nullptr && !e->own) {
      const size_t before = at;
      const int64_t line = shown_line(frame, e->first_line);
      room = (frames == 0 || put_text(out, at, cap, "; ", 2)) && put_text(out, at, cap, e->file, e->file_len) &&
             put_text(out, at, cap, "(", 1) && put_int(out, at, cap, line) &&
             put_text(out, at, cap, "): ", 3) && put_text(out, at, cap, e->file + e->file_len + 1, e->name_len);
      if (room) {
        ++frames;
      } else {
        at = before;  // the frames that fit are kept, as the dispatch mode keeps them
      }
    }
    PyObj* back = g_api.frame_back(frame);
    g_api.decref(frame);
    frame = back;
  }
  if (frame != nullptr) g_api.decref(frame);
  g_api.gil_release(gil);
  return frames > 0 ? at : used;
}

}  // namespace torchprof::inject
