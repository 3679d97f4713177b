// A small process tree with known NVTX counts per process.
//
//   nvtx_fork_exec [P=3] [C=2] [E=4] [F=5]
//
// The parent does P "parent_range" ranges, then forks two children, one after the other:
//   exec child: C "child_range" ranges, then execs this program in child mode
//               (--exec-child E), which does E "exec_range" ranges; same pid
//   fork child: F "fork_range" ranges, then exit(0) without exec
// The parent waits for both, does one "parent_after" range and prints
//   parent=<pid> exec_child=<pid> fork_child=<pid>
// Each range lasts 1 ms. Exit status 0 when both children exited 0, else 1.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"
#include "truth.h"

static void ranges(const char* name, int n) {
  TpTimeline t = tp_timeline_start();
  for (int i = 0; i < n; ++i) {
    int64_t start = tp_push(name);
    tp_wait_ms(&t, 1);
    tp_pop(name, start);
  }
}

static pid_t spawn_exec_child(const char* argv0, int c, int e) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  tp_ready();
  ranges("child_range", c);
  char count[32];
  snprintf(count, sizeof count, "%d", e);
  char* const args[] = {(char*)argv0, (char*)"--exec-child", count, NULL};
  tp_truth_write();  // exec skips atexit
  execv("/proc/self/exe", args);
  perror("execv");
  _exit(126);
}

static pid_t spawn_fork_child(int f) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  tp_ready();
  ranges("fork_range", f);
  exit(0);
}

static int wait_ok(pid_t pid) {
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char** argv) {
  nvtxInitialize(NULL);  // loads the tool now, not inside the first timed range
  tp_truth_init();
  tp_ready();
  if (argc >= 2 && strcmp(argv[1], "--exec-child") == 0) {
    ranges("exec_range", (int)tp_arg(argc, argv, 2, 4));
    return 0;
  }
  int p = (int)tp_arg(argc, argv, 1, 3);
  int c = (int)tp_arg(argc, argv, 2, 2);
  int e = (int)tp_arg(argc, argv, 3, 4);
  int f = (int)tp_arg(argc, argv, 4, 5);

  ranges("parent_range", p);
  fflush(stdout);
  // One child at a time, so that busy waits do not compete for the CPUs.
  pid_t exec_child = spawn_exec_child(argv[0], c, e);
  int ok = wait_ok(exec_child);
  pid_t fork_child = spawn_fork_child(f);
  ok = wait_ok(fork_child) && ok;
  ranges("parent_after", 1);
  printf("parent=%d exec_child=%d fork_child=%d\n", (int)getpid(), (int)exec_child, (int)fork_child);
  return ok ? 0 : 1;
}
