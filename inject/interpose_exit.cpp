// Ends of the process. A normal exit flushes from the library destructor, which
// runs in _dl_fini after the program's atexit handlers and static destructors
// (so their NVTX events are kept); main's return value and exit()'s status are
// noted on the way. _exit/_Exit flush before the real call.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "inject/capture_control.h"
#include "inject/config.h"
#include "inject/cupti/tracer.h"
#include "inject/export.h"
#include "inject/process_state.h"

namespace torchprof::inject {
namespace {

using MainFn = int (*)(int, char**, char**);
using StartMainFn = int (*)(MainFn, int, char**, void (*)(), void (*)(), void (*)(), void*);
using ExitFn = void (*)(int);

MainFn g_real_main = nullptr;
std::atomic<bool> g_exit_noted{false};
int g_exit_status = 0;

void note_exit(int status) {
  bool expected = false;
  if (g_exit_noted.compare_exchange_strong(expected, true)) g_exit_status = status;
}

int wrapped_main(int argc, char** argv, char** envp) {
  int rc = g_real_main(argc, argv, envp);
  note_exit(rc);
  return rc;
}

[[noreturn]] void exit_group(int status) {
  for (;;) syscall(SYS_exit_group, status);
}

__attribute__((constructor)) void on_load() {
  load_config();
  if (config().active) capture::init(config().paused);
  if (config().active) init_process_hooks();
}

__attribute__((destructor)) void on_unload() {
  if (!config().active) return;
  cupti_process_exiting();
  if (g_exit_noted.load()) {
    request_final_flush(wire::ExitKind::kExit, g_exit_status);
  } else {
    request_final_flush(wire::ExitKind::kUnknown, 0);
  }
}

}  // namespace
}  // namespace torchprof::inject

using torchprof::inject::exit_group;

extern "C" TORCHPROF_EXPORT int __libc_start_main(torchprof::inject::MainFn main, int argc, char** argv,
                                                  void (*init)(), void (*fini)(), void (*rtld_fini)(),
                                                  void* stack_end) {
  auto real = reinterpret_cast<torchprof::inject::StartMainFn>(dlsym(RTLD_NEXT, "__libc_start_main"));
  if (real == nullptr) exit_group(127);
  torchprof::inject::g_real_main = main;
  return real(torchprof::inject::wrapped_main, argc, argv, init, fini, rtld_fini, stack_end);
}

extern "C" TORCHPROF_EXPORT void exit(int status) noexcept {
  torchprof::inject::note_exit(status);
  static auto real = reinterpret_cast<torchprof::inject::ExitFn>(dlsym(RTLD_NEXT, "exit"));
  if (real != nullptr) real(status);
  exit_group(status);
}

extern "C" TORCHPROF_EXPORT void _exit(int status) {
  torchprof::inject::request_final_flush(torchprof::wire::ExitKind::kExit, status);
  exit_group(status);
}

extern "C" TORCHPROF_EXPORT void _Exit(int status) noexcept {
  torchprof::inject::request_final_flush(torchprof::wire::ExitKind::kExit, status);
  exit_group(status);
}
