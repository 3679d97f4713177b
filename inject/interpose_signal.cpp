// signal(), sigaction() and the System V calls (sysv_signal, sigset, sigignore) of
// the program. For the fatal signals whose handler we
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

// Sets `handler` with `flags` and an empty mask, as each of the signal() family
// does in glibc; returns the previous handler (SIG_ERR with errno on failure).
sighandler_t set_handler(int signo, sighandler_t handler, int flags) {
  struct sigaction act;
  struct sigaction old;
  memset(&act, 0, sizeof(act));
  memset(&old, 0, sizeof(old));
  act.sa_handler = handler;
  act.sa_flags = flags;
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

// signal()'s BSD semantics, as glibc gives them: restart, no reset, no extra mask.
sighandler_t bsd_signal_impl(int signo, sighandler_t handler) { return set_handler(signo, handler, SA_RESTART); }

// System V signal(): the handler is reset on delivery and the signal is not blocked
// while it runs.
sighandler_t sysv_signal_impl(int signo, sighandler_t handler) {
  return set_handler(signo, handler, SA_RESETHAND | SA_NODEFER);
}

// sigset(): SIG_HOLD adds the signal to the mask; anything else sets the handler and
// removes it from the mask. Returns SIG_HOLD when the signal was blocked before.
sighandler_t sigset_impl(int signo, sighandler_t handler) {
  if (signo <= 0 || signo >= NSIG || handler == SIG_ERR) {
    errno = EINVAL;
    return SIG_ERR;
  }
  sigset_t one;
  sigset_t before;
  sigemptyset(&one);
  sigaddset(&one, signo);
  sighandler_t previous;
  if (handler == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &one, &before) != 0) return SIG_ERR;
    struct sigaction now;
    memset(&now, 0, sizeof(now));
    if (!program_sigaction(signo, nullptr, &now) && real_sigaction(signo, nullptr, &now) != 0) return SIG_ERR;
    previous = now.sa_handler;
  } else {
    previous = set_handler(signo, handler, 0);
    if (previous == SIG_ERR) return SIG_ERR;
    if (sigprocmask(SIG_UNBLOCK, &one, &before) != 0) return SIG_ERR;
  }
  return sigismember(&before, signo) ? SIG_HOLD : previous;
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

TORCHPROF_EXPORT sighandler_t ssignal(int signo, sighandler_t handler) noexcept {
  return tpi::bsd_signal_impl(signo, handler);
}

TORCHPROF_EXPORT sighandler_t sysv_signal(int signo, sighandler_t handler) noexcept {
  return tpi::sysv_signal_impl(signo, handler);
}

TORCHPROF_EXPORT sighandler_t __sysv_signal(int signo, sighandler_t handler) noexcept {
  return tpi::sysv_signal_impl(signo, handler);
}

TORCHPROF_EXPORT sighandler_t sigset(int signo, sighandler_t handler) noexcept {
  return tpi::sigset_impl(signo, handler);
}

TORCHPROF_EXPORT int sigignore(int signo) noexcept {
  return tpi::set_handler(signo, SIG_IGN, 0) == SIG_ERR ? -1 : 0;
}

}  // extern "C"
