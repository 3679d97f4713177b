"""`cmake --install` gives a relocatable tree: it is installed into a temporary prefix,
copied elsewhere, and the copy's torchprof-run profiles a program (finding its library
and Python bootstrap relative to itself). Also: the man pages render without warnings,
the bash completion offers subcommands and options, --version names the build,
colour codes never reach a pipe, and scripts/setup.sh's build packages cover what this
build used while pulling in none of the test-only ones.

Needs TP_CMAKE (the cmake that configured the build) besides tp.py's variables."""

import glob
import json
import os
import re
import shutil
import subprocess

import tp
from tp import check, check_eq

MAN_PAGES = ["torchprof.1", "torchprof-run.1", "torchprof-report.1", "torchprof-diff.1", "torchprof-check.1",
             "torchprof-export.1"]


def build_dir():
    return os.path.dirname(os.path.abspath(tp.bin_path("")))


def install(prefix):
    cmake = os.environ.get("TP_CMAKE") or shutil.which("cmake")
    check(cmake, "cmake not found (TP_CMAKE unset)")
    proc = subprocess.run([cmake, "--install", build_dir(), "--prefix", prefix],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    check_eq(proc.returncode, 0, "cmake --install exit code: " + proc.stdout.decode(errors="replace")[-3000:])


def installed_copy():
    """Installs, then copies the tree elsewhere and removes the original prefix."""
    prefix = os.path.join(tp.fresh_dir("install"), "prefix")
    install(prefix)
    for rel in ["bin/torchprof", "bin/torchprof-run", "lib/libtorchprof_inject.so",
                "share/bash-completion/completions/torchprof", "share/bash-completion/completions/torchprof-run"] + \
               ["share/man/man1/" + m for m in MAN_PAGES]:
        check(os.path.isfile(os.path.join(prefix, rel)), f"{rel} not installed under {prefix}")
    if os.path.isdir(os.path.join(tp.bin_path(".."), "share", "torchprof", "python")):
        check(os.path.isfile(os.path.join(prefix, "share/torchprof/python/sitecustomize.py")),
              "share/torchprof/python/sitecustomize.py not installed")
    moved = os.path.join(tp.fresh_dir("relocated"), "tree")
    shutil.copytree(prefix, moved, symlinks=True)
    shutil.rmtree(prefix)
    return moved


def clean_env():
    """No variable that could point back at the build tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPROF_")}
    env["PATH"] = "/usr/bin:/bin"
    return env


def relocated_run():
    tree = installed_copy()
    out_dir = os.path.join(tp.fresh_dir("install_out"), "out")
    prog = tp.program("nvtx_nested")
    argv = [os.path.join(tree, "bin", "torchprof-run"), "-o", out_dir, "--", prog]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90, env=clean_env(),
                          stdin=subprocess.DEVNULL)
    result = tp.Result(argv, proc, out_dir, 0)
    tp._last_result = result
    check_eq(result.rc, 0, "exit code of the relocated torchprof-run")
    procs = tp.processes_with_events(result.summary)
    check(procs and sum(p["events"] for p in procs) > 0, "the relocated run recorded no events")
    check(os.path.isfile(result.file("report.html")), "no report.html from the relocated run")
    # The Python bootstrap comes from the copied tree too.
    py_dir = os.path.join(tree, "share", "torchprof", "python")
    if os.path.isdir(py_dir):
        script = os.path.join(tp.fresh_dir("py"), "prog.py")
        with open(script, "w") as f:
            f.write("import sys\nprint([p for p in sys.path if 'torchprof' in p])\n")
        out2 = os.path.join(tp.fresh_dir("install_py"), "out")
        proc = subprocess.run([os.path.join(tree, "bin", "torchprof-run"), "-q", "-o", out2, "--",
                               "/usr/bin/python3", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=90, env=clean_env())
        check_eq(proc.returncode, 0, "exit code of the relocated Python run: " + proc.stderr.decode(errors="replace"))
        check(os.path.realpath(py_dir) in proc.stdout.decode(),
              f"the bootstrap on sys.path is not the copied tree's: {proc.stdout.decode()!r}")


def gpu_bundle():
    """scripts/gpu-check.sh --bundle: at most 20 MiB, nothing needed but glibc and
    libstdc++, and from a copy elsewhere its torchprof-run profiles a program with its own
    injected library and Python bootstrap, and its check is the bundle's own."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "gpu-check.sh")
    elf = subprocess.run(["readelf", "-d", tp.bin_path("torchprof-run")], stdout=subprocess.PIPE, timeout=30).stdout
    if re.search(rb"\[lib(a|ub|t)san", elf):
        print("a sanitizer build: the bundle (stripped, at most 20 MiB, glibc only) is made of release builds")
        return
    made = os.path.join(tp.fresh_dir("bundle"), "b")
    proc = subprocess.run(["bash", script, "--bundle", made, build_dir()], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=120)
    check_eq(proc.returncode, 0, "gpu-check.sh --bundle: " + proc.stderr.decode(errors="replace")[-2000:])
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(made) for f in fs
               if not os.path.islink(os.path.join(d, f)))
    check(size <= 20 * 1024 * 1024, f"the bundle is {size} bytes, over 20 MiB")
    allowed = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2"}
    for rel in ("build/bin/torchprof-run", "build/bin/torchprof", "build/lib/libtorchprof_inject.so"):
        out = subprocess.run(["readelf", "-d", os.path.join(made, rel)], stdout=subprocess.PIPE, timeout=30).stdout
        needed = set(re.findall(r"\(NEEDED\).*\[(.*)\]", out.decode()))
        check(needed and needed <= allowed, f"{rel} needs {sorted(needed - allowed)}")
        sections = subprocess.run(["readelf", "-S", os.path.join(made, rel)], stdout=subprocess.PIPE, timeout=30)
        check(b".debug_info" not in sections.stdout, f"{rel} is stripped")
    moved = os.path.join(tp.fresh_dir("bundle_moved"), "copy")
    shutil.copytree(made, moved, symlinks=True)
    shutil.rmtree(made)
    out_dir = os.path.join(tp.fresh_dir("bundle_out"), "out")
    run = subprocess.run([os.path.join(moved, "build", "bin", "torchprof-run"), "-q", "-o", out_dir, "--",
                          tp.program("nvtx_nested")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90,
                         env=clean_env(), stdin=subprocess.DEVNULL)
    check_eq(run.returncode, 0, "the moved bundle's torchprof-run: " + run.stderr.decode(errors="replace")[-1500:])
    with open(os.path.join(out_dir, "summary.json")) as f:
        summary = json.load(f)
    check(sum(p["events"] for p in summary["processes"]) > 0, "the moved bundle recorded events")
    check(os.path.isfile(os.path.join(moved, "BUNDLE")) and os.path.isfile(os.path.join(moved, "gpu-check.sh")),
          "the bundle's own check")


def man_pages():
    tree = installed_copy()
    man = shutil.which("man")
    pages = sorted(glob.glob(os.path.join(tree, "share", "man", "man1", "*.1")))
    check_eq(sorted(os.path.basename(p) for p in pages), sorted(MAN_PAGES), "installed man pages")
    if man is None:
        print("man is not installed: rendering not checked")
        return
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    for page in pages:
        proc = subprocess.run([man, "--warnings", "-l", page], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=60, env=env)
        check_eq(proc.returncode, 0, f"man -l {page} exit code")
        check_eq(proc.stderr.decode(errors="replace"), "", f"warnings of man --warnings -l {page}")
        text = proc.stdout.decode(errors="replace")
        check(len(text) > 800 and "NAME" in text, f"{page} rendered to almost nothing")


def help_options(args):
    proc = subprocess.run([tp.bin_path("torchprof")] + args + ["--help"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=30)
    check_eq(proc.returncode, 0, f"torchprof {' '.join(args)} --help")
    text = proc.stdout.decode()
    # Option lines only ("  -o,--output TEXT  ..."), not the descriptions or examples.
    return text, sorted(set(re.findall(r"^\s+(?:-\w,)?(--[a-z][\w-]*)", text, re.M)))


def man_documents_options():
    """Every long option --help lists is in the man page of its command."""
    with_pages = {"run": "torchprof-run.1", "report": "torchprof-report.1", "diff": "torchprof-diff.1",
                  "check": "torchprof-check.1", "export": "torchprof-export.1"}
    man_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "man")
    for sub, page in with_pages.items():
        _, options = help_options([sub])
        with open(os.path.join(man_dir, page), encoding="utf-8") as f:
            text = f.read().replace("\\-", "-")
        missing = [o for o in options if o not in text]
        check(not missing, f"man/{page} does not document {missing}")
    with open(os.path.join(man_dir, "torchprof-run.1"), encoding="utf-8") as f:
        run_page = f.read().replace("\\-", "-").replace("\\_", "_")
    env_h = os.path.join(man_dir, "..", "common", "wire", "env.h")
    with open(env_h, encoding="utf-8") as f:
        variables = [line.split('"')[1] for line in f if 'constexpr const char*' in line]
    missing = [v for v in variables if v not in run_page]
    check(not missing, f"man/torchprof-run.1 ENVIRONMENT does not document {missing}")


def complete(tree, words):
    """What the installed bash completion offers for `words` (the last one being completed)."""
    script = os.path.join(tree, "share", "bash-completion", "completions", "torchprof")
    bash = f"""
source {script!r}
COMP_WORDS=({' '.join(repr(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE={' '.join(words)!r}
COMP_POINT=${{#COMP_LINE}}
_torchprof
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = dict(os.environ, PATH=os.path.join(tree, "bin") + ":/usr/bin:/bin")
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", bash], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=30, env=env)
    check_eq(proc.stderr.decode(errors="replace"), "", f"stderr of the completion for {words}")
    return set(proc.stdout.decode().split())


def completion():
    tree = installed_copy()
    check_eq(complete(tree, ["torchprof", ""]) >= {"run", "report", "diff", "check"}, True,
             "subcommands offered for `torchprof <TAB>`")
    check_eq(complete(tree, ["torchprof", "re"]), {"report"}, "completion of `torchprof re`")
    run_opts = complete(tree, ["torchprof-run", "--"])
    check({"--output", "--schedule", "--sort", "--row-limit", "--help", "--version"} <= run_opts,
          f"options offered for `torchprof-run --<TAB>`: {sorted(run_opts)}")
    check({"--format", "--output"} <= complete(tree, ["torchprof", "report", "--"]), "report options")
    check_eq(complete(tree, ["torchprof", "run", "--sort", "self_cpu_t"]), {"self_cpu_time_total"},
             "values of --sort")
    check_eq(complete(tree, ["torchprof", "report", "--format", ""]), {"table", "csv", "json", "markdown", "folded"},
             "values of report --format")
    check_eq(complete(tree, ["torchprof", "diff", "--format", ""]), {"table", "csv", "json", "markdown"},
             "values of diff --format")
    check("--fail-on-regression" in complete(tree, ["torchprof", "diff", "--f"]), "diff options")
    check_eq(complete(tree, ["torchprof", "report", "--adv"]), {"--advice"}, "completion of report --adv")
    # After the program, options belong to it: ours are not offered.
    after = complete(tree, ["torchprof-run", "./app", "--s"])
    check("--schedule" not in after, f"torchprof's options offered after the program: {sorted(after)}")
    # From the option definitions: every subcommand, the values each option accepts.
    check({"start", "stop", "trigger"} <= complete(tree, ["torchprof", ""]), "start, stop, trigger offered")
    check_eq(complete(tree, ["torchprof", "run", "--capture-range", ""]),
             {"none", "cudaProfilerApi", "nvtx:", "signal"}, "values of --capture-range")
    check_eq(complete(tree, ["torchprof", "diff", "--metric", ""]),
             {"cuda_time_total", "cpu_time_total", "self_cpu_time_total", "self_cuda_time_total", "count",
              "step_time", "cpu_memory_usage", "self_cpu_memory_usage", "cuda_memory_usage",
              "self_cuda_memory_usage"}, "values of diff --metric (those it accepts)")
    check_eq(complete(tree, ["torchprof-run", "--trace", "nvtx,g"]), {"nvtx,gpu"}, "--trace's comma list")
    check({"--steps", "--wait"} <= complete(tree, ["torchprof", "trigger", "--"]), "trigger's options")
    run_all = complete(tree, ["torchprof-run", "-"])
    check(not {"--size", "--steps", "--max"} & run_all, f"options run does not have: {sorted(run_all)}")
    check("step_time_avg=" in complete(tree, ["torchprof", "check", "out", "--max", "st"]), "check's metrics")
    for cmd in (["torchprof", "run"], ["torchprof-run"]):
        check_eq(complete(tree, cmd + ["--sort", "cpu_time_t"]), {"cpu_time_total"}, f"{cmd} --sort")


def help_texts():
    """--help: run's usage names the program; each subcommand's examples are its own."""
    proc = subprocess.run([tp.bin_path("torchprof-run"), "--help"], stdout=subprocess.PIPE, timeout=30)
    check("Usage: torchprof-run [OPTIONS] [--] PROGRAM [ARGS...]\n" in proc.stdout.decode(),
          f"torchprof-run --help usage: {proc.stdout.decode()[:200]!r}")
    for sub in ("run", "report", "diff", "check", "start", "stop", "trigger"):
        text, _ = help_options([sub])
        examples = text.split("Examples:\n", 1)
        check(len(examples) == 2, f"torchprof {sub} --help has no examples")
        lines = [line.strip() for line in examples[1].splitlines() if line.startswith("  ")]
        mine = "torchprof-run" if sub == "run" else f"torchprof {sub}"
        pair = {"start", "stop"} if sub in ("start", "stop") else {sub}
        others = [f"torchprof {o} " for o in ("run", "report", "diff", "check", "start", "stop", "trigger")
                  if o not in pair]
        check(lines and any(mine in line for line in lines) and
              not any(o in line + " " for line in lines for o in others), f"torchprof {sub} --help examples: {lines}")
    text, _ = help_options(["run"])
    check("Usage: torchprof run [OPTIONS] [--] PROGRAM [ARGS...]\n" in text, f"torchprof run --help: {text[:200]!r}")


def version():
    proc = subprocess.run([tp.bin_path("torchprof"), "--version"], stdout=subprocess.PIPE, timeout=30)
    check_eq(proc.returncode, 0, "torchprof --version exit code")
    text = proc.stdout.decode()
    lines = text.strip().splitlines()
    check(lines and lines[0].startswith("torchprof ") and lines[0].split()[1][0].isdigit(),
          f"first line of --version: {text!r}")
    for key in ("commit:", "compiler:", "build type:"):
        check(any(line.startswith(key) for line in lines), f"--version has no {key!r} line: {text!r}")
    run = subprocess.run([tp.bin_path("torchprof-run"), "--version"], stdout=subprocess.PIPE, timeout=30)
    check_eq(run.stdout.decode(), text, "torchprof-run --version")
    help_text, _ = help_options([])
    check("Examples:" in help_text, "torchprof --help has no examples")


def no_color_on_pipes():
    """Log lines on a pipe carry no ANSI escapes (colour is for terminals only)."""
    result = tp.profile("demo_train", options=["--log-level", "debug"])
    check(result.stderr, "expected log output on stderr")
    check(b"\x1b[" not in result.stderr, "ANSI escape codes on a pipe: " + repr(result.stderr[:300]))


SETUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "setup.sh")
TEST_ONLY = ["python3-torch", "chromium", "clang", "libclang-rt-dev", "man-db", "sqlite3"]


def setup_list(*args):
    proc = subprocess.run([SETUP, "--list", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check_eq(proc.returncode, 0, f"setup.sh --list {' '.join(args)}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode().split()


def package_closure(packages):
    """The packages apt-get install --no-install-recommends of `packages` may bring."""
    proc = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                           "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    check_eq(proc.returncode, 0, "apt-cache depends: " + proc.stderr.decode(errors="replace"))
    return {line.strip().split(":")[0] for line in proc.stdout.decode().splitlines() if not line.startswith(" ")}


def build_files():
    """Files this build was made with: compiler, ninja, the packages CMake found, spdlog/fmt headers."""
    cache = {}
    with open(os.path.join(build_dir(), "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.strip().partition("=")
            if sep and ":" in key:
                cache[key.split(":")[0]] = value
    files = [cache["CMAKE_CXX_COMPILER"], cache["CMAKE_C_COMPILER"], cache["CMAKE_MAKE_PROGRAM"],
             cache["ZLIB_LIBRARY_RELEASE"], "/usr/include/spdlog/spdlog.h", "/usr/include/fmt/core.h"]
    for key in ("zstd_DIR", "CLI11_DIR", "nlohmann_json_DIR", "doctest_DIR"):
        configs = glob.glob(os.path.join(cache[key], "*onfig.cmake"))
        check(configs, f"no package config under {key}={cache[key]}")
        files.append(configs[0])
    return [os.path.realpath(f) for f in files]


def owner(path):
    proc = subprocess.run(["dpkg", "-S", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check_eq(proc.returncode, 0, f"dpkg -S {path}: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode().split(":")[0].strip()


def setup_packages():
    """The README's first command (`scripts/setup.sh`) installs the build packages alone: they bring
    every package whose files this build used, and none of the test-only ones; `--tests` adds them."""
    build, tests = setup_list(), setup_list("--tests")
    check(set(build) < set(tests), f"--tests does not add to the build packages: {build} / {tests}")
    check_eq(sorted(set(tests) - set(build)), sorted(TEST_ONLY), "test-only packages")
    with open(os.path.join(os.path.dirname(SETUP), "..", "README.md"), encoding="utf-8") as f:
        block = f.read().split("```sh\n", 1)[1].split("```", 1)[0]
    readme = [" ".join(c.split()) for c in block.replace("\\\n", " ").splitlines()]
    check(readme[0].startswith("scripts/setup.sh && ") and "demo_train" in readme[0],
          f"README's first command: {readme[0]!r}")
    check(readme[1].startswith("scripts/setup.sh --tests && "), f"README's second command: {readme[1]!r}")
    if shutil.which("apt-cache") is None or shutil.which("dpkg") is None:
        print("no apt-cache/dpkg: package closure not checked")
        return
    closure = package_closure(build)
    pulled = [p for p in TEST_ONLY if p in closure]
    check(not pulled, f"the build packages bring test-only packages: {pulled}")
    missing = {f: owner(f) for f in build_files()}
    missing = {f: p for f, p in missing.items() if p not in closure}
    check(not missing, f"files this build used come from packages setup.sh does not bring: {missing}")


def python_module():
    """`import torchprof` works outside torchprof-run from the installed (and moved) tree:
    torchprof.pth in python3's site directory names share/torchprof/python relative to
    itself; there every call is a no-op and the bootstrap's sitecustomize stays inert."""
    tree = installed_copy()
    pths = glob.glob(os.path.join(tree, "lib", "python3*", "*-packages", "torchprof.pth"))
    check_eq(len(pths), 1, f"torchprof.pth files installed under {tree}/lib: {pths}")
    code = ("import site, sys; site.addsitedir(sys.argv[1]); import torchprof, sitecustomize\n"
            "with torchprof.range('x'):\n    torchprof.mark('m')\n"
            "@torchprof.range\ndef f():\n    return 7\n"
            "torchprof.step()\n"
            "print(f(), torchprof.active(), torchprof.__file__.startswith(sys.argv[2]))\n")
    proc = subprocess.run(["/usr/bin/python3", "-c", code, os.path.dirname(pths[0]), tree],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, env=clean_env())
    check_eq((proc.returncode, proc.stdout, proc.stderr), (0, b"7 False True\n", b""),
             "import torchprof through torchprof.pth")


SCENARIOS = {"gpu_bundle": gpu_bundle, "relocated_run": relocated_run, "python_module": python_module, "man_pages": man_pages,
             "man_documents_options": man_documents_options, "completion": completion,
             "version": version, "no_color": no_color_on_pipes, "help_texts": help_texts,
             "setup_packages": setup_packages}

if __name__ == "__main__":
    raise SystemExit(tp.main(SCENARIOS))
