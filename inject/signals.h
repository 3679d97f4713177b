// Fatal-signal handlers installed at the process's first event: flush, send
// Bye(kSignal), then restore the previous disposition and re-raise.
#pragma once

namespace torchprof::inject {

// Once per process image (a fork child inherits them). SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT always; SIGTERM, SIGINT, SIGHUP only while at SIG_DFL.
void install_signal_handlers();

}  // namespace torchprof::inject
