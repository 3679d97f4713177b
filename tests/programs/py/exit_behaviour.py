"""exit_behaviour.py MODE: writes to stdout and stderr, then
exit3 -> sys.exit(3); raise -> an uncaught exception (exit code 1, traceback);
ok -> returns normally."""

import sys


def fail():
    raise ValueError("deliberate failure for the test")


def main():
    mode = sys.argv[1]
    print("to stdout")
    print("to stderr", file=sys.stderr)
    sys.stdout.flush()
    if mode == "exit3":
        sys.exit(3)
    if mode == "raise":
        fail()


if __name__ == "__main__":
    main()
