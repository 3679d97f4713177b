// A long-running training-like loop for on-demand capture (torchprof start/stop/trigger).
//
//   ondemand_loop [S=300] [STEP_MS=10] [FORK=0]
//
// S steps, each a "ProfilerStep#k" range holding two "work" ranges, sleeping STEP_MS in
// all (sleeps, not busy waits: the tests count events, they do not time them). With
// FORK=1 the program first forks a child that does "child_work" ranges (no steps) every
// 5 ms for as long as the parent runs; with FORK=2 the child is forked after S/5 steps
// and execs this program as `ondemand_loop --child` to do the same (a process that
// connects late, from a fresh image). At the end it prints
//   ondemand_loop: S steps, 2S work ranges
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

static void sleep_ms(double ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (time_t)(ms / 1000)) * 1e6)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int child_loop(void) {
  for (;;) {
    nvtxRangePushA("child_work");
    sleep_ms(1);
    nvtxRangePop();
    sleep_ms(4);
    if (getppid() == 1) return 0;
  }
}

int main(int argc, char** argv) {
  nvtxInitialize(NULL);
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_loop();
  const int steps = argc > 1 ? atoi(argv[1]) : 300;
  const double step_ms = argc > 2 ? atof(argv[2]) : 10;
  const int with_child = argc > 3 ? atoi(argv[3]) : 0;
  pid_t child = -1;
  if (with_child == 1) {
    child = fork();
    if (child == 0) return child_loop();
  }
  for (int k = 0; k < steps; ++k) {
    if (with_child == 2 && k == steps / 5) {
      child = fork();
      if (child == 0) {
        execl("/proc/self/exe", argv[0], "--child", (char*)NULL);
        _exit(127);
      }
    }
    char name[32];
    snprintf(name, sizeof name, "ProfilerStep#%d", k);
    nvtxRangePushA(name);
    for (int i = 0; i < 2; ++i) {
      nvtxRangePushA("work");
      sleep_ms(step_ms / 2);
      nvtxRangePop();
    }
    nvtxRangePop();
  }
  if (child > 0) {
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
  }
  printf("ondemand_loop: %d steps, %d work ranges\n", steps, 2 * steps);
  return 0;
}
