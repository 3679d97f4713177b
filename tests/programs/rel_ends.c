// Ends a process in one of the ways the reliability tests cover, after RANGES
// "before_end" ranges (the last one may still be open), so a tool must deliver
// records made right up to the end.
//
//   rel_ends MODE [RANGES=50]
//
// MODE: segv        a real write through a null pointer
//       abort       abort()
//       _exit       _exit(3)
//       thread_exit exit(7) from a second thread while main waits in a range
//       sigdfl      signal(SIGSEGV, SIG_DFL) after the tool's handlers exist, then segv
//       own_handler sigaction() installs a crash reporter (prints, restores SIG_DFL,
//                   re-raises); checks what queries report; then segv
//       sysv_signal sysv_signal() installs a handler that prints and returns; the fault
//                   repeats under the default the handler was reset to
//       sigset      sigset(SIGSEGV, SIG_DFL) (prints what it returned), then segv
//       sleep       prints "ready pid=N" and sleeps (to be killed from outside)
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

static void ranges(int n) {
  for (int i = 0; i < n; ++i) {
    nvtxRangePushA("before_end");
    tp_busy_us(100);
    nvtxRangePop();
  }
}

static void crash(void) {
  volatile int* volatile nowhere = NULL;
  *nowhere = 1;
}

static void* exiting_thread(void* arg) {
  ranges(*(int*)arg);
  nvtxRangePushA("thread_open_at_exit");
  exit(7);
}

static void say(const char* text) {
  ssize_t rc = write(STDOUT_FILENO, text, strlen(text));
  (void)rc;
}

static void reporter(int signo, siginfo_t* info, void* context) {
  (void)info;
  (void)context;
  say("own handler ran\n");
  signal(signo, SIG_DFL);
  raise(signo);
}

static void sysv_handler(int signo) {
  (void)signo;
  say("sysv handler ran\n");
}

// The program asks what its disposition is: it must see what it set, never the tool's.
static const char* query_segv(void) {
  struct sigaction now;
  if (sigaction(SIGSEGV, NULL, &now) != 0) return "error";
  if (now.sa_flags & SA_SIGINFO) return now.sa_sigaction == reporter ? "mine" : "foreign";
  if (now.sa_handler == SIG_DFL) return "default";
  return now.sa_handler == SIG_IGN ? "ignore" : "foreign";
}

static void install_reporter(void) {
  char line[128];
  snprintf(line, sizeof line, "before install: %s\n", query_segv());
  say(line);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = reporter;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  struct sigaction old;
  sigaction(SIGSEGV, &sa, &old);
  snprintf(line, sizeof line, "old: %s\nafter install: %s\n", old.sa_handler == SIG_DFL ? "default" : "foreign",
           query_segv());
  say(line);
}

int main(int argc, char** argv) {
  nvtxInitialize(NULL);
  if (argc < 2) {
    fprintf(stderr, "usage: rel_ends segv|abort|_exit|thread_exit|sigdfl|own_handler|sysv_signal|sigset|sleep [RANGES]\n");
    return 2;
  }
  const char* mode = argv[1];
  int n = (int)tp_arg(argc, argv, 2, 50);
  nvtxMarkA("ready");  // the tool sets itself up (and installs its handlers) here
  if (strcmp(mode, "thread_exit") == 0) {
    pthread_t t;
    nvtxRangePushA("main_waiting");
    pthread_create(&t, NULL, exiting_thread, &n);
    pthread_join(t, NULL);
    return 99;
  }
  if (strcmp(mode, "sigdfl") == 0) signal(SIGSEGV, SIG_DFL);
  if (strcmp(mode, "own_handler") == 0) install_reporter();
  if (strcmp(mode, "sysv_signal") == 0) {
    say(sysv_signal(SIGSEGV, sysv_handler) == SIG_DFL ? "sysv old: default\n" : "sysv old: other\n");
  }
  if (strcmp(mode, "sigset") == 0) {
    // Deprecated, still in use: the program under test is the kind that calls it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    say(sigset(SIGSEGV, SIG_DFL) == SIG_DFL ? "sigset old: default\n" : "sigset old: other\n");
#pragma GCC diagnostic pop
  }
  ranges(n);
  nvtxRangePushA("open_at_end");
  if (strcmp(mode, "segv") == 0 || strcmp(mode, "sigdfl") == 0 || strcmp(mode, "own_handler") == 0 ||
      strcmp(mode, "sysv_signal") == 0 || strcmp(mode, "sigset") == 0) {
    crash();
  }
  if (strcmp(mode, "abort") == 0) abort();
  if (strcmp(mode, "_exit") == 0) _exit(3);
  if (strcmp(mode, "sleep") == 0) {
    char line[64];
    snprintf(line, sizeof line, "ready pid=%d\n", (int)getpid());
    say(line);
    for (;;) pause();
  }
  fprintf(stderr, "rel_ends: unknown mode %s\n", mode);
  return 2;
}
