// Ends in a chosen way after a few ranges, for the exit-code tests.
//
//   exit_code MODE VALUE [RANGES=3]
//
// MODE: exit (exit(VALUE)), _exit (_exit(VALUE)), return (return VALUE from main),
//       signal (raise(VALUE)), segv (a real invalid write), abort (abort()).
// Before that, RANGES "before_exit" ranges of 1 ms and one that stays open
// ("open_at_exit"), so a tool sees records right up to the end.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "busy.h"

int main(int argc, char** argv) {
  nvtxInitialize(NULL);  // loads the tool now, not inside the first timed range
  if (argc < 3) {
    fprintf(stderr, "usage: exit_code exit|_exit|return|signal|segv|abort VALUE [RANGES]\n");
    return 2;
  }
  const char* mode = argv[1];
  int value = (int)tp_arg(argc, argv, 2, 0);
  int ranges = (int)tp_arg(argc, argv, 3, 3);
  for (int i = 0; i < ranges; ++i) {
    nvtxRangePushA("before_exit");
    tp_busy_ms(1);
    nvtxRangePop();
  }
  nvtxRangePushA("open_at_exit");
  printf("exit_code: %s %d\n", mode, value);
  fflush(stdout);
  if (strcmp(mode, "exit") == 0) exit(value);
  if (strcmp(mode, "_exit") == 0) _exit(value);
  if (strcmp(mode, "return") == 0) return value;
  if (strcmp(mode, "signal") == 0) {
    raise(value);
    return 99;  // only reached for signals that are ignored
  }
  if (strcmp(mode, "segv") == 0) {
    volatile int* volatile nowhere = NULL;
    *nowhere = value;
  }
  if (strcmp(mode, "abort") == 0) abort();
  fprintf(stderr, "exit_code: unknown mode %s\n", mode);
  return 2;
}
