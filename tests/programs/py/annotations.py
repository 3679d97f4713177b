"""torchprof's module API with known durations (no torch):

    outer (decorator, 1 call)          total = 2*INNER + GAP
      inner (context manager, 2 calls) each INNER, with a mark inside
      gap (sleep, no range)            GAP
    bare (bare decorator: name = qualname "bare")

Prints whether torchprof is active; behaves the same with or without torchprof-run.
"""

import sys
import time

import torchprof

INNER_S = 0.030
GAP_S = 0.020


@torchprof.range("outer")
def outer():
    for k in range(2):
        with torchprof.range("inner"):
            torchprof.mark("inner mark %d" % k)
            time.sleep(INNER_S)
    time.sleep(GAP_S)


@torchprof.range
def bare():
    time.sleep(0.010)
    return 42


def main():
    outer()
    value = bare()
    torchprof.mark("done")
    print("active %s" % torchprof.active())
    print("bare returned %d" % value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
