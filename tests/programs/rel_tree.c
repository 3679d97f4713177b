// Process trees for the reliability tests. Every process does its ranges ("<role>",
// RANGES of them, 200 us each) and the parent waits for its children.
//
//   rel_tree MODE [RANGES=5] [REPORT_FILE]
//
// MODE: fork      a child that does not exec ("fork_child")
//       forkexec  fork + execv of this program as a leaf ("leaf_forkexec")
//       spawn     posix_spawn of a leaf ("leaf_spawn")
//       system    system("exec <self> leaf system") through /bin/sh ("leaf_system")
//       vfork     vfork + execv of a leaf ("leaf_vfork")
//       cleanenv  fork + execle of a leaf with an empty environment ("leaf_cleanenv")
//       daemon    a child that closes every descriptor (0..1023), puts a file of its
//                 own on 900..910, then does "daemon_after" ranges; it writes
//                 "foreign_bytes=N" (bytes that appeared in its file) to REPORT_FILE
//       pthread_exit  main does "main_before" and calls pthread_exit; a thread goes
//                 on for 300 ms and does "late_thread" ranges
//       leaf NAME a leaf: "leaf_NAME" ranges
// The parent does "parent" ranges before and prints "children ok" when every child
// exited 0.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

extern char** environ;

static int g_ranges = 5;

static void ranges(const char* name) {
  for (int i = 0; i < g_ranges; ++i) {
    nvtxRangePushA(name);
    tp_busy_us(200);
    nvtxRangePop();
  }
}

static int wait_ok(pid_t pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static char* g_self;
static char g_count[16];

static int run_daemon(const char* report) {
  ranges("daemon_before");
  usleep(100 * 1000);  // daemonizing comes after some work: its events are flushed by now
  for (int fd = 0; fd < 1024; ++fd) close(fd);
  char path[4096];
  snprintf(path, sizeof path, "%s.file", report);
  int own = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  for (int fd = 900; fd <= 910; ++fd) dup2(own, fd);
  ranges("daemon_after");
  usleep(200 * 1000);  // a few flush intervals: anything written to our fds lands by now
  struct stat st;
  long long foreign = fstat(own, &st) == 0 ? (long long)st.st_size : -1;
  FILE* f = fopen(report, "w");
  if (f == NULL) return 1;
  fprintf(f, "foreign_bytes=%lld\n", foreign);
  fclose(f);
  return 0;
}

static void* late_thread(void* arg) {
  (void)arg;
  usleep(300 * 1000);
  ranges("late_thread");
  return NULL;
}

static pid_t start_child(const char* mode, const char* report) {
  char* leaf[] = {g_self, (char*)"leaf", (char*)mode + 0, g_count, NULL};
  if (strcmp(mode, "spawn") == 0) {
    pid_t pid = -1;
    return posix_spawn(&pid, g_self, NULL, NULL, leaf, environ) == 0 ? pid : -1;
  }
  if (strcmp(mode, "vfork") == 0) {
    pid_t pid = vfork();
    if (pid == 0) {
      execv(g_self, leaf);
      _exit(126);
    }
    return pid;
  }
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (strcmp(mode, "fork") == 0) {
    ranges("fork_child");
    exit(0);
  }
  if (strcmp(mode, "forkexec") == 0) execv(g_self, leaf);
  if (strcmp(mode, "cleanenv") == 0) {
    char* empty[] = {NULL};
    execle(g_self, g_self, "leaf", "cleanenv", g_count, (char*)NULL, empty);
  }
  if (strcmp(mode, "daemon") == 0) _exit(run_daemon(report));
  _exit(126);
}

int main(int argc, char** argv) {
  nvtxInitialize(NULL);
  if (argc < 2) {
    fprintf(stderr, "usage: rel_tree MODE [RANGES] [REPORT_FILE] | rel_tree leaf NAME [RANGES]\n");
    return 2;
  }
  g_self = argv[0];
  const char* mode = argv[1];
  if (strcmp(mode, "leaf") == 0 && argc >= 3) {
    g_ranges = (int)tp_arg(argc, argv, 3, 5);
    char name[64];
    snprintf(name, sizeof name, "leaf_%s", argv[2]);
    ranges(name);
    return 0;
  }
  g_ranges = (int)tp_arg(argc, argv, 2, 5);
  snprintf(g_count, sizeof g_count, "%d", g_ranges);
  ranges("parent");
  fflush(stdout);
  if (strcmp(mode, "pthread_exit") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, late_thread, NULL);
    ranges("main_before");
    pthread_exit(NULL);
  }
  int ok;
  if (strcmp(mode, "system") == 0) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "exec '%s' leaf system %s", g_self, g_count);
    int status = system(cmd);
    ok = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  } else {
    ok = wait_ok(start_child(mode, argc > 3 ? argv[3] : "/dev/null"));
  }
  if (ok) printf("children ok\n");
  return ok ? 0 : 1;
}
