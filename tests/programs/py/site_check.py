"""Prints what start-up did: which sitecustomize Python ended up with, whether a
user's sitecustomize ran, whether torchprof is active, and the modules that are
loaded but that a bare interpreter would not have loaded (given on argv)."""

import os
import sys


def main():
    mod = sys.modules.get("sitecustomize")
    print("sitecustomize %s" % (getattr(mod, "__file__", None),))
    print("user sitecustomize ran %s" % os.environ.get("TP_USER_SITECUSTOMIZE_RAN", "no"))
    print("torch imported %s" % ("torch" in sys.modules))
    print("ctypes imported %s" % ("ctypes" in sys.modules))
    if len(sys.argv) > 1 and sys.argv[1] == "--modules":
        print("modules %s" % " ".join(sorted(sys.modules)))


if __name__ == "__main__":
    main()
