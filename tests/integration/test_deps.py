"""The two files that get copied onto GPU nodes need nothing beyond glibc and
libstdc++ at run time, and the injected library exports only its entry points."""

import os
import re
import subprocess

import tp
from tp import check

ALLOWED_NEEDED = re.compile(r"^(libc\.so\.6|libm\.so\.6|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux[-\w.]*\.so\.\d)$")
ENTRY_POINTS = {"InitializeInjectionNvtx2", "InitializeInjection"}
# CUPTI functions interposed for the program's own CUPTI client: the callback side
# (inject/cupti/subscribers.cpp) and the activity side (inject/cupti/share.cpp).
CUPTI_INTERPOSED = {"cuptiSubscribe", "cuptiSubscribe_v2", "cuptiUnsubscribe", "cuptiEnableCallback", "cuptiEnableDomain",
                    "cuptiEnableAllDomains", "cuptiGetCallbackState", "cuptiFinalize",
                    "cuptiActivityRegisterCallbacks", "cuptiActivityRegisterTimestampCallback", "cuptiActivityEnable",
                    "cuptiActivityDisable", "cuptiActivityEnableContext", "cuptiActivityDisableContext",
                    "cuptiActivityFlushAll", "cuptiActivityGetNextRecord", "cuptiActivityEnableRuntimeApi",
                    "cuptiActivityEnableDriverApi", "cuptiActivityFlushPeriod", "cuptiActivitySetAttribute",
                    "cuptiActivityGetAttribute", "cuptiActivityEnableAllSyncRecords"}
# torch's memory entry points in libc10, interposed for --profile-memory (inject/torch_memory.cpp).
C10_INTERPOSED = {"_ZN3c109alloc_cpuEm", "_ZN3c108free_cpuEPv", "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"}


def readelf(*args):
    proc = subprocess.run(["readelf", "-W", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    check(proc.returncode == 0, f"readelf {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode()


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf("-d", path))


def defined_dynamic_symbols(path):
    names = set()
    for line in readelf("--dyn-syms", path).splitlines():
        cols = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(cols) >= 8 and cols[0].endswith(":") and cols[6] != "UND" and cols[4] in ("GLOBAL", "WEAK"):
            names.add(cols[7].split("@")[0])
    return names


def libc_path():
    out = subprocess.run(["gcc", "-print-file-name=libc.so.6"], stdout=subprocess.PIPE, check=False).stdout
    path = out.decode().strip()
    return path if os.path.isabs(path) else "/lib/x86_64-linux-gnu/libc.so.6"


def shipped_files():
    files = [tp.bin_path("torchprof"), tp.lib_path("libtorchprof_inject.so")]
    run = tp.bin_path("torchprof-run")
    if os.path.isfile(run) and not os.path.islink(run):
        files.append(run)
    for f in files:
        check(os.path.isfile(f), f"{f} is not built")
    return files


def needed_libs():
    for path in shipped_files():
        libs = needed(path)
        bad = [lib for lib in libs if not ALLOWED_NEEDED.match(lib)]
        check(not bad, f"{os.path.basename(path)} needs {bad} (only glibc, libm, libstdc++, libgcc_s allowed)")


def inject_exports():
    lib = tp.lib_path("libtorchprof_inject.so")
    check(os.path.isfile(lib), f"{lib} is not built")
    exported = defined_dynamic_symbols(lib)
    check(ENTRY_POINTS <= exported, f"entry points missing from the exports: {ENTRY_POINTS - exported}")
    libc = defined_dynamic_symbols(libc_path())
    check(len(libc) > 1000, "could not read libc's symbols")
    check(CUPTI_INTERPOSED <= exported, f"interposed CUPTI functions not exported: {CUPTI_INTERPOSED - exported}")
    check(C10_INTERPOSED <= exported, f"interposed c10 functions not exported: {C10_INTERPOSED - exported}")
    stray = sorted(s for s in exported - ENTRY_POINTS - CUPTI_INTERPOSED - C10_INTERPOSED
                   if not s.startswith("torchprof_") and s not in libc)
    check(not stray, f"libtorchprof_inject.so exports symbols that are neither entry points, torchprof_*, "
                     f"interposed CUPTI, c10 nor libc functions: {stray[:20]}")


if __name__ == "__main__":
    raise SystemExit(tp.main({f.__name__: f for f in (needed_libs, inject_exports)}))
