#include "inject/signals.h"

#include <csignal>
#include <cstring>

#include <atomic>

#include "inject/process_state.h"

namespace torchprof::inject {
namespace {

constexpr int kAlways[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kWhenDefault[] = {SIGTERM, SIGINT, SIGHUP};

struct sigaction g_previous[NSIG];
bool g_installed = false;
std::atomic<int> g_handling{0};

void on_fatal_signal(int signo, siginfo_t*, void*) {
  int saved_errno = errno;
  // A second fatal signal while we flush (or one in the flusher itself) goes
  // straight to the previous disposition.
  if (g_handling.fetch_add(1) == 0) {
    request_final_flush(wire::ExitKind::kSignal, signo);
  }
  sigaction(signo, &g_previous[signo], nullptr);
  errno = saved_errno;
  // Delivered when the handler returns (the signal is blocked until then); a
  // faulting instruction faults again under the restored disposition.
  raise(signo);
}

void install(int signo) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(signo, &sa, &g_previous[signo]);
}

}  // namespace

void install_signal_handlers() {
  if (g_installed) return;
  g_installed = true;
  for (int signo : kAlways) install(signo);
  for (int signo : kWhenDefault) {
    struct sigaction current;
    if (sigaction(signo, nullptr, &current) == 0 && !(current.sa_flags & SA_SIGINFO) &&
        current.sa_handler == SIG_DFL) {
      install(signo);
    }
  }
}

}  // namespace torchprof::inject
