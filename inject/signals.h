// Fatal-signal handlers installed at the process's first event: flush, send
// Bye(kSignal), then die of the signal with the disposition the program wants.
//
// The program keeps full control of its dispositions: signal()/sigaction() are
// interposed (interpose_signal.cpp) so that, for a signal we handle, the program's
// wish is recorded instead of replacing our handler. Our handler then does what the
// program asked for: calls its handler, or (default) flushes and dies.
#pragma once

#include <signal.h>

namespace torchprof::inject {

// Once per process image (a fork child inherits them). SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT unless ignored; SIGTERM, SIGINT, SIGHUP only while at SIG_DFL.
void install_signal_handlers();

// The C library's sigaction, past our interposer.
int real_sigaction(int signo, const struct sigaction* act, struct sigaction* old);

// The interposer's view: applies the program's sigaction() to a signal we manage
// and returns true (`old` gets what the program set before, never our handler);
// false when the call is none of our business and must go to the C library.
bool program_sigaction(int signo, const struct sigaction* act, struct sigaction* old);

}  // namespace torchprof::inject
