// Built with -static: LD_PRELOAD cannot reach it. Prints one line and exits 5, so a
// test can see that the program still runs, with its own exit code, under the tool.
#include <stdio.h>

int main(void) {
  puts("static program ran");
  return 5;
}
