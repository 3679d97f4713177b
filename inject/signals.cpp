#include "inject/signals.h"

#include <cerrno>
#include <cstring>

#include <atomic>

#include "inject/process_state.h"

namespace torchprof::inject {
namespace {

constexpr int kAlways[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kWhenDefault[] = {SIGTERM, SIGINT, SIGHUP};

// For each signal whose kernel disposition is our handler ("owned"): what the
// program asked for. Written under g_lock; the handler reads a copy without it (a
// sigaction racing with the delivery of the same signal may see either value).
struct sigaction g_program[NSIG];
std::atomic<bool> g_owned[NSIG];
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
std::atomic<bool> g_installed{false};
std::atomic<int> g_handling{0};

class SpinLock {
 public:
  SpinLock() {
    while (g_lock.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~SpinLock() { g_lock.clear(std::memory_order_release); }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;
};

bool is_always(int signo) {
  for (int s : kAlways) {
    if (s == signo) return true;
  }
  return false;
}

bool is_when_default(int signo) {
  for (int s : kWhenDefault) {
    if (s == signo) return true;
  }
  return false;
}

bool is_handler(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) ? sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN
                                     : sa.sa_sigaction != nullptr;
}

bool is_default(const struct sigaction& sa) { return !is_handler(sa) && sa.sa_handler == SIG_DFL; }

// Should our handler stand in for `wanted`? Always for the default (we flush, then
// die as the program asked); for a program handler only on the crash signals (ours
// runs it first). SIG_IGN goes to the kernel: it must survive exec, as with nohup.
bool should_own(int signo, const struct sigaction& wanted) {
  if (is_default(wanted)) return is_always(signo) || is_when_default(signo);
  return is_handler(wanted) && is_always(signo);
}

void on_fatal_signal(int signo, siginfo_t* info, void* context);

// Our handler in the kernel, blocking what the program's handler would block.
void install_ours(int signo, const struct sigaction& wanted) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  if (is_handler(wanted)) {
    sa.sa_mask = wanted.sa_mask;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (wanted.sa_flags & (SA_RESTART | SA_NODEFER));
  } else {
    sigemptyset(&sa.sa_mask);
  }
  real_sigaction(signo, &sa, nullptr);
}

void call_program_handler(int signo, siginfo_t* info, void* context, const struct sigaction& prog) {
  if (prog.sa_flags & SA_RESETHAND) {
    // No lock here: the interrupted thread may hold it.
    memset(&g_program[signo], 0, sizeof(g_program[signo]));
    g_program[signo].sa_handler = SIG_DFL;
  }
  if (prog.sa_flags & SA_SIGINFO) {
    prog.sa_sigaction(signo, info, context);
  } else {
    prog.sa_handler(signo);
  }
}

void on_fatal_signal(int signo, siginfo_t* info, void* context) {
  struct sigaction prog = g_program[signo];
  if (is_handler(prog)) {
    // The program decides: it may recover, exit (flushed by our exit hooks), or
    // restore the default and re-raise (which comes back here as the default).
    call_program_handler(signo, info, context, prog);
    return;
  }
  int saved_errno = errno;
  if (prog.sa_handler == SIG_IGN) return;
  // A second fatal signal while we flush (or one in the flusher itself) goes
  // straight to the default.
  if (g_handling.fetch_add(1) == 0) request_final_flush(wire::ExitKind::kSignal, signo);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  g_owned[signo].store(false);
  real_sigaction(signo, &dfl, nullptr);
  errno = saved_errno;
  // Delivered when the handler returns (the signal is blocked until then); a
  // faulting instruction faults again under the default disposition.
  raise(signo);
}

void own(int signo, const struct sigaction& wanted) {
  g_program[signo] = wanted;
  install_ours(signo, wanted);
  g_owned[signo].store(true);
}

}  // namespace

void install_signal_handlers() {
  SpinLock lock;
  if (g_installed.load()) return;
  for (int signo : kAlways) {
    struct sigaction current;
    if (real_sigaction(signo, nullptr, &current) == 0 && should_own(signo, current)) own(signo, current);
  }
  for (int signo : kWhenDefault) {
    struct sigaction current;
    if (real_sigaction(signo, nullptr, &current) == 0 && is_default(current)) own(signo, current);
  }
  g_installed.store(true);
}

bool program_sigaction(int signo, const struct sigaction* act, struct sigaction* old) {
  if (signo <= 0 || signo >= NSIG || !g_installed.load(std::memory_order_acquire)) return false;
  if (!is_always(signo) && !is_when_default(signo)) return false;
  SpinLock lock;
  const bool owned = g_owned[signo].load();
  if (act == nullptr) {
    if (!owned) return false;
    if (old != nullptr) *old = g_program[signo];
    return true;
  }
  struct sigaction before;
  if (owned) {
    before = g_program[signo];
  } else {
    real_sigaction(signo, nullptr, &before);
  }
  if (should_own(signo, *act)) {
    own(signo, *act);
  } else {
    g_owned[signo].store(false);
    real_sigaction(signo, act, nullptr);
  }
  if (old != nullptr) *old = before;
  return true;
}

}  // namespace torchprof::inject
