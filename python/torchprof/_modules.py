"""nn.Module calls as ranges, for torchprof-run --with-modules.

TORCHPROF_PYTORCH_OPS holds "modules": torch's global module hooks
(torch.nn.modules.module.register_module_forward_pre_hook and
register_module_forward_hook, in torch 1.13 and 2.x) open a range before each module's
forward and close it after, named as torch's Python tracer names a module call,
"nn.Module: <Class>_<n>", n counting the instances of that class in the order of their
first call (torch/csrc/autograd/profiler_python.cpp numbers them so). The ranges go
through torchprof_module_push/pop into the "torchprof.modules" domain, which the
collector keeps apart from the op tree: the ops' times stay torch's.

torch's own with_modules=True means TorchScript's module hierarchy; its module view
(TensorBoard's) comes from with_stack=True's Python tracer, whose python_function events
these calls are written as.

A forward that raises skips the post hook on torch 1.13 (2.x is asked to call it
always): what it left open closes at the next post hook of a module around it, or when
one of those modules is called again (the next forward), whichever comes first. (A module
that calls itself recursively is taken for such a call.) The hooks never raise and never
change a module's inputs or outputs.
"""

import threading

from torchprof._util import log as _log


def install(torch, api):
    """Registers the hooks; returns a reason string when it cannot, else None."""
    push = getattr(api, "module_push", None) if api is not None else None
    pop = getattr(api, "module_pop", None) if api is not None else None
    if push is None or pop is None:
        return "the injected library has no module ranges"
    from torch.nn.modules import module as module_mod

    register_pre = getattr(module_mod, "register_module_forward_pre_hook", None)
    register_post = getattr(module_mod, "register_module_forward_hook", None)
    if register_pre is None or register_post is None:
        return "this torch has no global module hooks"
    pre, post = make_hooks(push, pop)
    register_pre(pre)
    try:
        register_post(post, always_call=True)  # torch >= 2.1: called when forward raises too
    except TypeError:
        register_post(post)
    return None


def make_hooks(push, pop):
    ids = {}    # class -> {id(module): n}
    names = {}  # id(module) -> the range's name, bytes
    local = threading.local()  # .calls: the ids of the modules whose calls are open

    def new_name(module, key):
        cls = type(module)
        per_class = ids.setdefault(cls, {})
        n = per_class.setdefault(key, len(per_class))
        name = names[key] = ("nn.Module: %s_%d" % (cls.__name__, n)).encode("utf-8", "replace")
        return name

    def close_through(calls, key):
        # The calls open above the last call of `key`, and that call, close now.
        while calls:
            pop()
            if calls.pop() == key:
                break

    def pre(module, inputs):
        try:
            key = id(module)
            name = names.get(key)
            if name is None:
                name = new_name(module, key)
            try:
                calls = local.calls
            except AttributeError:
                calls = local.calls = []
            if calls and key in calls:
                # Called again while its last call is open: that call raised (torch 1.13
                # calls no post hook then). It closes now, with what was open inside it.
                close_through(calls, key)
            if push(name) >= 0:
                calls.append(key)
        except Exception as e:  # noqa: BLE001 - a module call without a range, never a failing one
            _log("module range: %s: %s" % (type(e).__name__, e))
        return None

    def post(module, inputs, output):
        try:
            calls = local.calls
            key = id(module)
            if calls and calls[-1] == key:
                calls.pop()
                pop()
            elif key in calls:
                close_through(calls, key)  # calls left open above it (their forward raised)
        except AttributeError:
            pass  # no call of this thread opened
        except Exception as e:  # noqa: BLE001
            _log("module range: %s: %s" % (type(e).__name__, e))
        return None

    return pre, post
