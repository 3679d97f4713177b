"""Small helpers the bootstrap's torch hooks share."""

import os
import sys


def log(message):
    if os.environ.get("TORCHPROF_LOG_LEVEL", "") in ("trace", "debug"):
        sys.stderr.write("torchprof: %s\n" % message)


def replace_attr(owner, name, wrapper):
    """Puts `wrapper` in place of owner.name, looking like what it wraps (functools.wraps
    without its __dict__ copy, which would carry markers such as torch's `hooked`)."""
    original = getattr(owner, name)
    for attr in ("__doc__", "__name__", "__qualname__", "__module__"):
        setattr(wrapper, attr, getattr(original, attr, None))
    wrapper.__wrapped__ = original
    setattr(owner, name, wrapper)
    return original
