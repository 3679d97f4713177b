// signal() and sigaction() of the program. For the fatal signals whose handler we
// installed (signals.cpp), the program's wish is recorded and our handler stays in
// place: a program that sets SIG_DFL still gets its events flushed before it dies,
// one that installs a handler has it called from ours, and a query reports what the
// program set, never our handler. Every other call goes to the C library unchanged.
#include <dlfcn.h>
#include <signal.h>

#include <cerrno>
#include <cstring>

#include "inject/export.h"
#include "inject/signals.h"

namespace torchprof::inject {
namespace {

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);

SigactionFn g_real_sigaction = nullptr;

SigactionFn resolve() {
  if (g_real_sigaction == nullptr) {
    g_real_sigaction = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
  }
  return g_real_sigaction;
}

// Resolved at load: our signal handler must not enter the dynamic loader.
__attribute__((constructor)) void resolve_at_load() { resolve(); }

// signal()'s BSD semantics, as glibc gives them: restart, no reset, no extra mask.
sighandler_t bsd_signal_impl(int signo, sighandler_t handler) {
  struct sigaction act;
  struct sigaction old;
  memset(&act, 0, sizeof(act));
  memset(&old, 0, sizeof(old));
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;
  sigemptyset(&act.sa_mask);
  if (signo <= 0 || signo >= NSIG || handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  if (!program_sigaction(signo, &act, &old)) {
    if (real_sigaction(signo, &act, &old) != 0) return SIG_ERR;
  }
  return old.sa_handler;
}

}  // namespace

int real_sigaction(int signo, const struct sigaction* act, struct sigaction* old) {
  SigactionFn real = resolve();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return real(signo, act, old);
}

}  // namespace torchprof::inject

namespace tpi = torchprof::inject;

extern "C" {

TORCHPROF_EXPORT int sigaction(int signo, const struct sigaction* act, struct sigaction* old) noexcept {
  if (tpi::program_sigaction(signo, act, old)) return 0;
  return tpi::real_sigaction(signo, act, old);
}

TORCHPROF_EXPORT sighandler_t signal(int signo, sighandler_t handler) noexcept {
  return tpi::bsd_signal_impl(signo, handler);
}

TORCHPROF_EXPORT sighandler_t bsd_signal(int signo, sighandler_t handler) noexcept {
  return tpi::bsd_signal_impl(signo, handler);
}

}  // extern "C"
